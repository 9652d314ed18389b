package daemon

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/engine"
)

// publishedStatus is what the daemon publishes about itself after each change.
type publishedStatus struct {
	Config   string
	Loaded   time.Time
	XDPMode  string
	ZeroCopy bool
	Queues   []int
	Rules    []ruleStatus
	// Unmatched is unmatched_vip_traffic as published (lookup).
	Unmatched config.UnmatchedVIPTraffic
}

// ruleStatus is one rule's state for `xlb status`.
type ruleStatus struct {
	Name     string
	VIP      netip.Addr
	Tier     string
	Reason   string
	State    *failover.State
	Rule     *config.Rule
	Slot     uint16
	Eligible int // members of the default eligible set
	// Warm: the first round of health checks is in the published snapshot
	// (warmup.go); Pending lists the backends without a verdict yet.
	Warm    bool
	Pending []netip.Addr
}

// ruleRuntime is what the control plane remembers of one rule between
// computations.
type ruleRuntime struct {
	slot    uint16
	prev    *failover.State
	removed map[netip.Addr]removedBackend // gone from the configuration, still draining
	cfg     *config.Rule                  // as last published
	warm    warmState                     // warmup.go
}

type removedBackend struct {
	at    time.Time
	group string
}

// publish recomputes every rule and publishes a new snapshot.
func (d *daemon) publish() error {
	now := time.Now()
	rules := make([]dataplane.Rule, 0, len(d.cfg.Rules))
	var vips []engine.VIP
	var statuses []ruleStatus
	keep := map[string]bool{}
	for i := range d.view.Rules {
		rv := &d.view.Rules[i]
		r := rv.Rule
		keep[r.Name] = true
		slot, err := d.reg.rule(r.Name)
		if err != nil {
			return err
		}
		rt := d.rules[r.Name]
		if rt == nil {
			rt = &ruleRuntime{slot: slot, removed: map[netip.Addr]removedBackend{}}
			d.rules[r.Name] = rt
		}
		warm, pending := d.warmCheck(rv, rt, now)
		groups, backends := d.ruleInput(rv, rt, warm)
		st, err := failover.Compute(policyOf(r), groups, backends, rt.prev, now)
		if err != nil {
			return fmt.Errorf("rule %s: %w", r.Name, err)
		}
		for _, ev := range st.Events {
			d.log.Info("eligible set", "rule", r.Name, "event", ev.Kind.String(), "from", ev.From.String(), "to", ev.To.String(), "group", ev.Group, "reason", ev.Reason)
		}
		// Forget removed backends once their entries are over.
		for addr := range rt.removed {
			if b, ok := st.Backend(addr.String()); ok && !b.DrainUntil.IsZero() && now.After(b.DrainUntil.Add(r.ConnectionTracking.IdleTimeout)) {
				delete(rt.removed, addr)
			}
		}
		rt.prev = st
		dr, err := dataplane.BuildRule(dataplane.RuleConfig{
			Name: r.Name, Match: matchOf(r),
			Affinity: affinities.of(r.SessionAffinity), Mode: trackingModes.of(r.ConnectionTracking.TrackingMode),
			Persistence:      persistences.of(r.ConnectionTracking.PersistenceOnUnhealthy),
			Idle:             r.ConnectionTracking.IdleTimeout,
			FragmentTracking: r.FragmentTracking,
			TableSize:        uint32(d.cfg.MaglevTableSize),
			ZoneClients:      policyOf(r).Zonal.Clients,
			SourceRanges:     r.SourceRanges,
		}, st, d.cfg.HashSeed, d.clock)
		if err != nil {
			return err
		}
		for i := range dr.Backends {
			b := &dr.Backends[i]
			if !b.Present {
				continue
			}
			if t, err := d.template(r, netip.MustParseAddr(b.Name)); err == nil {
				b.Template = t
			}
		}
		for int(slot) >= len(rules) {
			rules = append(rules, dataplane.Rule{})
		}
		rules[slot] = dr
		vips = append(vips, vipsOf(r)...)
		statuses = append(statuses, ruleStatus{Name: r.Name, VIP: r.VIP, Tier: st.Tier.String(), Reason: st.Reason, State: st, Rule: r, Slot: slot, Eligible: len(st.Eligible), Warm: warm, Pending: pending})
	}
	for name := range d.rules {
		if !keep[name] {
			delete(d.rules, name)
		}
	}
	for len(rules) < d.reg.ruleCount() {
		rules = append(rules, dataplane.Rule{})
	}
	vips = append(vips, unmatchedVIPs(d.cfg.UnmatchedVIPTraffic, vips)...)
	snap, err := dataplane.NewSnapshot(d.cfg.HashSeed, rules)
	if err != nil {
		return err
	}
	if err := d.engine.Publish(snap, vips); err != nil {
		return err
	}
	d.publishProbeRoutes(snap) // probepath.go
	for _, rs := range statuses {
		rt := d.rules[rs.Name]
		rt.cfg = rs.Rule
		d.latchWarm(rs.Name, rt, rs.Warm, rs.Pending, now)
	}
	d.mu.Lock()
	d.status = publishedStatus{Config: d.cfg.Path, Loaded: now, XDPMode: d.engine.Mode().String(), ZeroCopy: d.engine.ZeroCopy(), Queues: d.engine.Queues(), Rules: statuses, Unmatched: d.cfg.UnmatchedVIPTraffic}
	d.mu.Unlock()
	d.announce()      // bgp.go: the VIPs follow the published state
	d.storeState(nil) // systemd.go: what a restart after a crash starts from
	return nil
}

// Status returns the latest published status; safe from any goroutine.
func (d *daemon) Status() publishedStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}
