package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
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
	load := config.Load
	if d.loader != nil {
		load = d.loader.Load
	}
	t0 := time.Now()
	cfg, ws, err := load(d.opts.ConfigPath)
	for _, w := range ws {
		d.log.Warn("configuration", "warning", w.String())
		warnings = append(warnings, w.String())
	}
	revived, err := d.apply(cfg, err, force, t0)
	return append(warnings, revived...), err
}

// apply checks and applies a loaded configuration (err: Load's error). It
// returns the overrides the new configuration applies again (warnings).
// t0 is when the reload began (the "reloaded" line says how long it took
// in the daemon, the files read and checked included).
func (d *daemon) apply(cfg *config.Config, err error, force bool, t0 time.Time) (revived []string, _ error) {
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
	newView := config.ApplyFrom(d.view, d.state, cfg, st)
	// prior[i]: the index in d.view of newView's rule i, or -1 (new).
	prior := newView.Prior(d.view)
	if err := guardReload(d.view, newView, prior, force); err != nil { // reloadkeys.go
		d.log.Error("reload refused", "err", err)
		return nil, err
	}
	live, err := d.prepareLive(cfg)
	if err != nil {
		return nil, err
	}
	// What changed: the rules whose file or overrides did (the others keep
	// their views, config.SameView), all of them when the seed or the
	// table size did.
	now := time.Now()
	var changed []string
	for i := range newView.Rules {
		rv := &newView.Rules[i]
		ov := priorView(d.view, prior[i])
		if ov != nil && config.SameView(rv, ov) {
			continue
		}
		changed = append(changed, rv.Rule.Name)
		rt := d.rules[rv.Rule.Name]
		if ov == nil || rt == nil {
			continue
		}
		keep := make(map[netip.Addr]bool, len(rv.Backends))
		for _, b := range rv.Backends {
			keep[b.Addr] = true
		}
		for _, b := range ov.Backends {
			if !keep[b.Addr] {
				rt.removed[b.Addr] = removedBackend{at: now, group: b.Group}
				d.ruleChanged(rv.Rule.Name)
			}
		}
	}
	all := cfg.HashSeed != d.cfg.HashSeed || cfg.MaglevTableSize != d.cfg.MaglevTableSize
	old, oldState, oldView := d.cfg, d.state, d.view
	d.cfg, d.state = cfg, st
	d.view = newView
	d.touch(changed...)
	if all {
		d.touchAll()
	}
	// The probes of the changed and removed rules are grouped again
	// (services.go) before the publication, which reads verdicts through
	// the groups.
	regrouped := append(slices.Clone(changed), goneRules(oldView, prior)...)
	probers := d.regroupProbes(regrouped)
	d.touchBackends(d.resolveNew(context.Background(), changed)) // nexthop.go
	if err := d.publishConfig(); err != nil {
		d.cfg, d.state = old, oldState
		d.view = oldView
		d.touchAll() // the next publication starts from the configuration as it is
		live.abort()
		// Back to the old groups; the probers that moved twice may not be
		// those the checker runs.
		for name := range d.regroupProbes(regrouped) {
			probers[name] = true
		}
		if err := d.reloadHealth(regrouped, probers); err != nil {
			d.log.Error("reload health checks", "err", err)
		}
		return nil, fmt.Errorf("reload: %w", err)
	}
	d.commitLive(live, old) // reloadkeys.go
	if err := d.reloadHealth(regrouped, probers); err != nil {
		d.log.Error("reload health checks", "err", err)
	}
	d.reloadBGP(context.Background())
	forgetProbes(d.forgetProbe, oldView, newView, prior)
	revived = revivedOverrides(oldView, newView, prior) // reloadkeys.go
	for _, w := range revived {
		d.log.Warn("state overlay", "warning", w)
	}
	d.log.Info("reloaded", "config", cfg.Path, "rules", len(cfg.Rules), "changed", len(changed), "took", time.Since(t0).Round(10*time.Microsecond).String())
	return revived, nil
}

// reloadHealth gives the health checker the targets of the rules a reload
// changed or removed (names) and of those that became or stopped being the
// prober of a shared backend (probers: regroupProbes), and leaves the
// probers of every other rule running: a rule's targets depend on its own
// file and its share groups' probers only.
func (d *daemon) reloadHealth(names []string, probers map[string]bool) error {
	rules := make(map[string]bool, len(names)+len(probers))
	for _, name := range names {
		rules[name] = true
	}
	for name := range probers {
		rules[name] = true
	}
	if len(rules) == 0 {
		return nil
	}
	return d.checker.SetRules(rules, d.healthTargetsOf(rules))
}

// goneRules names the rules of old that v no longer has (prior:
// config.View.Prior of v).
func goneRules(old *config.View, prior []int) []string {
	kept := make([]bool, len(old.Rules))
	for _, j := range prior {
		if j >= 0 {
			kept[j] = true
		}
	}
	var gone []string
	for j, k := range kept {
		if !k {
			gone = append(gone, old.Rules[j].Rule.Name)
		}
	}
	return gone
}

// priorView is v's rule j, nil for -1 (config.View.Prior).
func priorView(v *config.View, j int) *config.RuleView {
	if j < 0 {
		return nil
	}
	return &v.Rules[j]
}

// forgetProbes drops the verdicts of the backends that left a rule whose
// view changed, and of every backend of a rule that is gone (prior:
// config.View.Prior of v).
func forgetProbes(forget func(probeKey), old, v *config.View, prior []int) {
	kept := make([]bool, len(old.Rules)) // old rules still in v
	for i := range v.Rules {
		j := prior[i]
		if j < 0 {
			continue
		}
		kept[j] = true
		nv, ov := &v.Rules[i], &old.Rules[j]
		if config.SameView(nv, ov) {
			continue
		}
		in := make(map[netip.Addr]bool, len(nv.Backends))
		for _, b := range nv.Backends {
			in[b.Addr] = true
		}
		for _, b := range ov.Backends {
			if !in[b.Addr] {
				forget(probeKey{ov.Rule.Name, b.Addr})
			}
		}
	}
	for j, still := range kept {
		if !still {
			for _, b := range old.Rules[j].Backends {
				forget(probeKey{old.Rules[j].Rule.Name, b.Addr})
			}
		}
	}
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
