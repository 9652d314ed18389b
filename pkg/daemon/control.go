package daemon

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"slices"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
)

// ops is the control API of one daemon.
type ops struct {
	d *daemon
}

// controlHandler returns the HTTP handler of the control API.
func (d *daemon) controlHandler() http.Handler {
	return control.NewHandler(&ops{d: d})
}

// startControl serves the control API on the configured socket (or the
// listener a predecessor handed over) until the returned stop is called
// (serve defers it, so the socket goes away before the data plane does;
// after a hand-over it stays, served by the successor). A fresh start
// binds the socket in claim (exclusive.go) and stops when it cannot; a
// successor whose inherited socket cannot be served logs it and forwards
// without its CLI.
func (d *daemon) startControl(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	path := d.cfg.ControlSocket
	if d.controlLn == nil {
		ln, err := control.Listen(path)
		if err != nil {
			d.log.Error("control socket: the CLI cannot reach this daemon", "socket", path, "err", err)
			cancel()
			return func() {}
		}
		d.controlLn = ln
	}
	// Also for a handed-over socket: the configuration may have changed.
	if err := control.ShareWithGroup(path, d.cfg.ControlSocketGroup); err != nil {
		d.log.Error("control socket: read-only group not applied", "socket", path, "err", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := control.ServeListener(ctx, d.controlLn, d.controlHandler()); err != nil {
			d.log.Error("control socket: the CLI cannot reach this daemon", "socket", path, "err", err)
		}
	}()
	d.log.Info("control socket", "path", path, "read_only_group", d.cfg.ControlSocketGroup)
	return func() {
		cancel()
		<-done
		if d.exit != exitHandedOver {
			os.Remove(path)
		}
	}
}

// ruleRows is what a request needs of the control goroutine's state
// about one rule, copied there.
type ruleRows struct {
	name     string
	slot     uint16
	cfg      *config.Rule
	state    *failover.State
	backends []backendRow
	warm     bool        // first round of health checks published (warmup.go)
	status   *ruleStatus // the rule's last published status: its table digest
}

type backendRow struct {
	view    config.BackendView
	removed bool
	slot    uint32
	nhErr   string
	probe   string // last probe error
	verdict string // the prober's health ("" before its first report)
	present bool   // has a slot (always, once published)
}

// rows copies the state of every rule (or one) on the control goroutine.
func (o *ops) rows(ctx context.Context, rule string) ([]ruleRows, error) {
	var only func(*config.Rule) bool
	if rule != "" {
		only = func(r *config.Rule) bool { return ruleOrService(r, rule) }
	}
	out, err := o.rowsOf(ctx, nil, only)
	if err == nil && rule != "" && len(out) == 0 {
		return nil, control.BadRequest("no rule %q", rule)
	}
	return out, err
}

// rowsOf copies the state of the rules only selects (every rule when nil)
// on the control goroutine, in configuration order, into dst's storage
// (its rows and their backend slices are reused: a streamed answer copies
// chunk after chunk into the same memory).
func (o *ops) rowsOf(ctx context.Context, dst []ruleRows, only func(*config.Rule) bool) ([]ruleRows, error) {
	out := dst[:0]
	err := o.d.do(ctx, func() {
		d := o.d
		for i := range d.view.Rules {
			rv := &d.view.Rules[i]
			if only != nil && !only(rv.Rule) {
				continue
			}
			if len(out) < cap(out) {
				out = out[:len(out)+1]
			} else {
				out = append(out, ruleRows{})
			}
			rr := &out[len(out)-1]
			*rr = ruleRows{name: rv.Rule.Name, cfg: rv.Rule, backends: slices.Grow(rr.backends[:0], len(rv.Backends))}
			for _, b := range rv.Backends {
				rr.backends = append(rr.backends, d.row(rv.Rule, b, false))
			}
			if rt := d.rules[rv.Rule.Name]; rt != nil {
				rr.slot, rr.state, rr.warm, rr.status = rt.slot, rt.prev, rt.warm.warm, rt.status
				// Backends removed by a reload, still draining.
				if len(rt.removed) > 0 {
					gone := slices.SortedFunc(maps.Keys(rt.removed), netip.Addr.Compare)
					for _, addr := range gone {
						rr.backends = append(rr.backends, d.row(rv.Rule, config.BackendView{Addr: addr, Group: rt.removed[addr].group}, true))
					}
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// row runs on the control goroutine.
func (d *daemon) row(r *config.Rule, b config.BackendView, removed bool) backendRow {
	row := backendRow{view: b, removed: removed}
	if m := d.reg.backends[r.Name]; m != nil {
		row.slot, row.present = m[b.Addr]
	}
	if nh, ok := d.nexthops[nhKey{b.Addr, r.Encap.Type == config.EncapDirect}]; ok && nh.err != nil {
		row.nhErr = nh.err.Error()
	} else if !ok && !removed {
		row.nhErr = "not resolved yet"
	}
	if p, ok := d.probes[d.probeKeyOf(r, b.Addr)]; ok {
		row.probe, row.verdict = p.lastError, p.health.String()
	}
	return row
}

// Reload implements control.API.
func (o *ops) Reload(ctx context.Context, req control.ReloadRequest) (*control.ReloadResult, error) {
	var rerr error
	var res control.ReloadResult
	o.d.log.Info("reload asked through the control socket", "by", control.PeerFrom(ctx).String(), "force", req.Force)
	var busy error
	err := o.d.do(ctx, func() {
		if busy = o.d.restartGuard("reload"); busy != nil {
			return
		}
		res.Warnings, rerr = o.d.Reload(req.Force)
		res.Config, res.Rules = o.d.cfg.Path, len(o.d.cfg.Rules)
	})
	if err != nil {
		return nil, err
	}
	if busy != nil {
		return nil, busy
	}
	var guard *refusedReload
	if errors.As(rerr, &guard) {
		return nil, &control.Error{Status: http.StatusConflict, Message: rerr.Error(), Warnings: res.Warnings}
	}
	if rerr != nil {
		e := &control.Error{Status: http.StatusUnprocessableEntity, Message: "reload rejected; the running configuration keeps serving", Warnings: res.Warnings}
		var cerr *config.Error
		if errors.As(rerr, &cerr) {
			for _, i := range cerr.Issues {
				e.Issues = append(e.Issues, i.String())
			}
		} else {
			e.Message += ": " + rerr.Error()
		}
		return nil, e
	}
	return &res, nil
}
