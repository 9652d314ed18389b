package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
)

// Reload re-reads the configuration and the state file. A configuration
// with any error is rejected whole and the running one keeps serving.
// Backends that left a rule are drained per connection_draining_timeout;
// tracked connections of the others keep their backend. It must run on the
// control goroutine (Run does so for SIGHUP). It returns the
// configuration's warnings (validate's), accepted or not. force applies a
// configuration the guard rails refuse (reloadkeys.go).
func (d *daemon) Reload(force bool) ([]string, error) {
	warnings, err := d.reload(force)
	if err != nil {
		d.reloadsRejected.Add(1)
		d.events.add(control.RuleEvent{Kind: eventReload, To: "rejected", Reason: firstLine(err)})
	} else {
		d.reloadsOK.Add(1)
		d.events.add(control.RuleEvent{Kind: eventReload, To: "accepted", Reason: fmt.Sprintf("%d rules", len(d.cfg.Rules))})
	}
	return warnings, err
}

func (d *daemon) reload(force bool) (warnings []string, err error) {
	cfg, ws, err := config.Load(d.opts.ConfigPath)
	for _, w := range ws {
		d.log.Warn("configuration", "warning", w.String())
		warnings = append(warnings, w.String())
	}
	revived, err := d.apply(cfg, err, force)
	return append(warnings, revived...), err
}

// apply checks and applies a loaded configuration (err: Load's error). It
// returns the overrides the new configuration applies again (warnings).
func (d *daemon) apply(cfg *config.Config, err error, force bool) (revived []string, _ error) {
	if err != nil {
		var cerr *config.Error
		if errors.As(err, &cerr) {
			for _, i := range cerr.Issues {
				d.log.Error("configuration", "error", i.String())
			}
		}
		return nil, err
	}
	if host := config.CheckHost(cfg); len(host) > 0 {
		for _, i := range host {
			d.log.Error("configuration", "error", i.String())
		}
		return nil, &config.Error{Issues: host}
	}
	if err := checkRestartOnly(d.cfg, cfg); err != nil { // reloadkeys.go
		return nil, err
	}
	if err := checkBGPReload(d.cfg.BGP, cfg.BGP); err != nil {
		return nil, err
	}
	st, err := config.LoadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	newView := config.Apply(cfg, st)
	if err := guardReload(d.view, newView, force); err != nil { // reloadkeys.go
		d.log.Error("reload refused", "err", err)
		return nil, err
	}
	live, err := d.prepareLive(cfg)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, r := range d.cfg.Rules {
		nr := cfg.Rule(r.Name)
		rt := d.rules[r.Name]
		if nr == nil || rt == nil {
			continue
		}
		for _, gb := range r.Backends() {
			if !ruleHas(nr, gb.Addr) {
				rt.removed[gb.Addr] = removedBackend{at: now, group: gb.Group.Name}
			}
		}
	}
	old, oldState, oldView := d.cfg, d.state, d.view
	d.cfg, d.state = cfg, st
	d.view = newView
	d.resolveAll(context.Background())
	if err := d.publish(); err != nil {
		d.cfg, d.state = old, oldState
		d.view = config.Apply(old, oldState)
		live.abort()
		return nil, fmt.Errorf("reload: %w", err)
	}
	d.commitLive(live, old) // reloadkeys.go
	if err := d.checker.Set(d.healthTargets()); err != nil {
		d.log.Error("reload health checks", "err", err)
	}
	d.reloadBGP(context.Background())
	for k := range d.probes {
		if r := cfg.Rule(k.rule); r == nil || !ruleHas(r, k.addr) {
			delete(d.probes, k)
		}
	}
	revived = revivedOverrides(oldView, newView) // reloadkeys.go
	for _, w := range revived {
		d.log.Warn("state overlay", "warning", w)
	}
	d.log.Info("reloaded", "config", cfg.Path, "rules", len(cfg.Rules))
	return revived, nil
}

func ruleHas(r *config.Rule, addr netip.Addr) bool {
	for _, gb := range r.Backends() {
		if gb.Addr == addr {
			return true
		}
	}
	return false
}

// firstLine is an error's first issue, for the event list (a rejected
// configuration's every issue is in the log and the reload's answer).
func firstLine(err error) string {
	var cerr *config.Error
	if errors.As(err, &cerr) && len(cerr.Issues) > 0 {
		msg := cerr.Issues[0].String()
		if n := len(cerr.Issues); n > 1 {
			msg += fmt.Sprintf(" (and %d more)", n-1)
		}
		return msg
	}
	return err.Error()
}
