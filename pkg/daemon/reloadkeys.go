package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// What a reload does with each key of xlb.toml
// (docs/design.md#validation-and-reload; a reload once silently ignored
// metrics_listen and conntrack.max_entries):
//
//	live     rules (rules_dir), state_file, hash_seed, maglev_table_size,
//	         health_check_path (probepath.go),
//	         [bgp] peers and attributes (bgp.go), [[bgp.peer]] bfd and
//	         [bgp.bfd] (the affected peers are re-added: their BGP and
//	         BFD sessions restart), metrics_listen (the
//	         endpoint moves: the new address is bound before anything else
//	         changes, the old one closed after), control_socket_group (the
//	         socket's group and mode change)
//	refused  interface, queues, xdp_mode, bind_mode, pin_dir,
//	         control_socket, worker_nice, [conntrack] max_entries, new_entries_per_second,
//	         new_entries_burst, unconfirmed_idle_timeout, bgp.local_as,
//	         router_id, hold_time (bgp.go), [fleet] and every key of it
//	         (fleet.go): they belong to the attached program, the sockets,
//	         the workers' tables, the speaker or the fleet node, made at
//	         start. The reload is rejected whole, naming them; xlb
//	         restart applies them without losing a connection.

// restartOnly names the keys whose change a reload refuses.
func restartOnly(o, n *config.Config) []string {
	var keys []string
	add := func(changed bool, key string) {
		if changed {
			keys = append(keys, key)
		}
	}
	add(o.Interface != n.Interface, "interface")
	add(!slices.Equal(queueList(o.Queues), queueList(n.Queues)) || o.Queues.All != n.Queues.All, "queues")
	add(o.XDPMode != n.XDPMode, "xdp_mode")
	add(o.BindMode != n.BindMode, "bind_mode")
	add(o.PinDir != n.PinDir, "pin_dir")
	add(o.ControlSocket != n.ControlSocket, "control_socket")
	add(o.WorkerNice != n.WorkerNice, "worker_nice")
	add(o.BusyPoll != n.BusyPoll, "busy_poll")
	add(o.BusyPollBudget != n.BusyPollBudget, "busy_poll_budget")
	oc, nc := o.Conntrack, n.Conntrack
	add(oc.MaxEntries != nc.MaxEntries, "conntrack.max_entries")
	add(oc.NewEntriesPerSecond != nc.NewEntriesPerSecond, "conntrack.new_entries_per_second")
	add(oc.NewEntriesBurst != nc.NewEntriesBurst, "conntrack.new_entries_burst")
	add(oc.UnconfirmedIdle != nc.UnconfirmedIdle, "conntrack.unconfirmed_idle_timeout")
	return append(keys, fleetRestartOnly(o.Fleet, n.Fleet)...) // fleet.go
}

// checkRestartOnly refuses a reload that changes a key only a start
// applies.
func checkRestartOnly(o, n *config.Config) error {
	if keys := restartOnly(o, n); len(keys) > 0 {
		return fmt.Errorf("reload: %s cannot change while running; the running configuration keeps serving (xlb restart applies it without losing a connection)", strings.Join(keys, ", "))
	}
	return nil
}

// liveChange is what a reload changes outside the snapshot, prepared
// before anything is published (prepare may fail and reject the reload)
// and then committed or aborted.
type liveChange struct {
	metricsLn net.Listener // the new metrics address, bound; nil: no move
	moveTo    string       // the new metrics_listen ("" turns it off)
	move      bool
}

// prepareLive binds a moved metrics endpoint's new address.
func (d *daemon) prepareLive(n *config.Config) (*liveChange, error) {
	lc := &liveChange{}
	if n.MetricsListen == d.cfg.MetricsListen {
		return lc, nil
	}
	lc.move, lc.moveTo = true, n.MetricsListen
	if n.MetricsListen == "" {
		return lc, nil
	}
	ln, err := net.Listen("tcp", n.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("reload: metrics_listen %s: %w", n.MetricsListen, err)
	}
	lc.metricsLn = ln
	return lc, nil
}

// abort undoes prepare.
func (lc *liveChange) abort() {
	if lc.metricsLn != nil {
		lc.metricsLn.Close()
	}
}

// commit applies the live keys of the accepted configuration n (already
// d.cfg): the metrics endpoint moves, the control socket's group changes.
func (d *daemon) commitLive(lc *liveChange, old *config.Config) {
	if lc.move {
		d.metricsMu.Lock()
		if d.metricsStop != nil {
			d.metricsStop()
			d.metricsStop = nil
		}
		if d.metricsLn != nil {
			d.metricsLn.Close()
		}
		d.metricsLn = lc.metricsLn
		if lc.metricsLn != nil {
			if reg, err := d.metricsRegistry(); err != nil {
				d.log.Error("metrics endpoint not served", "err", err)
			} else {
				d.metricsStop = metrics.ServeListener(lc.metricsLn, metrics.Handler(reg, d.log))
			}
		}
		d.metricsMu.Unlock()
		d.log.Info("metrics endpoint moved", "from", old.MetricsListen, "to", lc.moveTo)
	}
	if d.cfg.ControlSocketGroup != old.ControlSocketGroup {
		if err := control.ShareWithGroup(d.cfg.ControlSocket, d.cfg.ControlSocketGroup); err != nil {
			d.log.Error("control socket: read-only group not applied", "err", err)
		} else {
			d.log.Info("control socket group changed", "from", old.ControlSocketGroup, "to", d.cfg.ControlSocketGroup)
		}
	}
}

// refusedReload is a reload the guard rails refuse without force.
type refusedReload struct{ why string }

func (r *refusedReload) Error() string {
	return "reload refused: " + r.why + "; the running configuration keeps serving (xlb reload --force applies it)"
}

// guardReload refuses, without force, a configuration that leaves no rule
// (every VIP would stop) or that leaves a rule with every backend drained
// (its new connections would go nowhere), as backend mark refuses an
// empty primary set. A rule that was already so is not refused again.
func guardReload(old, n *config.View, prior []int, force bool) error {
	if force {
		return nil
	}
	if len(n.Rules) == 0 && len(old.Rules) > 0 {
		return &refusedReload{fmt.Sprintf("the new configuration has no rules: all %d rule(s) and their VIPs would stop", len(old.Rules))}
	}
	allDrained := func(rv *config.RuleView) bool {
		for _, b := range rv.Backends {
			if !b.Drained {
				return false
			}
		}
		return len(rv.Backends) > 0
	}
	var drained []string
	for i := range n.Rules {
		rv, ov := &n.Rules[i], priorView(old, prior[i])
		if ov != nil && config.SameView(rv, ov) {
			continue // as it was
		}
		if allDrained(rv) && (ov == nil || !allDrained(ov)) {
			drained = append(drained, rv.Rule.Name)
		}
	}
	if len(drained) > 0 {
		return &refusedReload{fmt.Sprintf("rule %s would keep only drained backends (xlb backend undrain, or add a backend)", strings.Join(drained, ", "))}
	}
	return nil
}

// revivedOverrides names the CLI overrides a reload applies again: kept in
// the state file while their backend was out of the configuration (or its
// rule was), they hold again now that it is back
// (docs/design.md#the-state-overlay). A
// drain the operator forgot about must not come back silently.
// A rule whose view the reload kept (config.SameView) revives nothing.
func revivedOverrides(old, n *config.View, prior []int) []string {
	var out []string
	for i := range n.Rules {
		rv := &n.Rules[i]
		ov := priorView(old, prior[i])
		if ov != nil && config.SameView(rv, ov) {
			continue
		}
		had := map[netip.Addr]bool{}
		if ov != nil {
			for _, b := range ov.Backends {
				had[b.Addr] = true
			}
		}
		for _, b := range rv.Backends {
			if had[b.Addr] {
				continue
			}
			var what []string
			if b.DrainedSource == config.SourceCLI && b.Drained {
				what = append(what, "drained since "+b.DrainedAt.UTC().Format(time.DateTime)+" UTC")
			}
			if b.RoleSource == config.SourceCLI {
				what = append(what, "role "+b.Role.String())
			}
			if b.WeightSource == config.SourceCLI && b.HasWeight {
				what = append(what, fmt.Sprintf("weight %d", b.Weight))
			}
			if len(what) > 0 {
				out = append(out, fmt.Sprintf("rule %s backend %s is back in the configuration and its CLI override applies again: %s (xlb backend reset -r %s %s removes it)",
					rv.Rule.Name, b.Addr, strings.Join(what, ", "), rv.Rule.Name, b.Addr))
			}
		}
	}
	return out
}
