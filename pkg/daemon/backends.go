package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/health"
)

// Backends implements control.API: the backends of the rules q selects
// and pages, as Status selects them, streamed (streamRules).
func (o *ops) Backends(ctx context.Context, q control.StatusQuery) (control.RuleStream, error) {
	selected, err := selectRules(o.d.Status().Rules, q)
	if err != nil {
		return nil, err
	}
	selected = page(selected, q.Offset, q.Limit)
	return o.streamRules(ctx, selected, q.Backend, false, o.d.statsInputs(ctx, selected)), nil
}

// streamChunk is how many rules a streamed answer copies per visit to
// the control goroutine.
const streamChunk = 64

// streamRules yields the status rows of rules. Their state is copied on
// the control goroutine streamChunk rules at a time, so a long answer
// holds the control goroutine (a reload, a drain, a health verdict wait
// for it) for one chunk at most, and holds one chunk's rows in memory; a
// change published between two chunks shows in the rules after it. A
// rule gone meanwhile is left out. The chunk's rows and the rule it
// yields are built in storage reused from one chunk and rule to the next
// (ruleBuilder), so an answer of every rule makes a chunk's worth of
// garbage, not a rule's worth per rule (docs/design.md#read-commands-at-scale).
// digests asks for the rules' table digests (status shows them, backend
// list does not: the first answer after a publication computes them).
func (o *ops) streamRules(ctx context.Context, rules []*ruleStatus, backend string, digests bool, in statsInputs) control.RuleStream {
	return func(emit func(*control.Rule) error) error {
		var rows []ruleRows
		b := ruleBuilder{digests: digests}
		only := make(map[string]bool, streamChunk)
		for len(rules) > 0 {
			chunk := rules[:min(len(rules), streamChunk)]
			rules = rules[len(chunk):]
			clear(only)
			for _, rs := range chunk {
				only[rs.Name] = true
			}
			var err error
			rows, err = o.rowsOf(ctx, rows, func(r *config.Rule) bool { return only[r.Name] })
			if err != nil {
				return err
			}
			if backend != "" {
				keepBackend(rows, backend)
			}
			for i := range rows {
				if err := emit(b.build(o, &rows[i], in)); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// statsInputs is what a rule's status row is computed from: connection
// counts tallied once per request for the rules it answers, and what
// each row reads for itself (totals, the health check's status), so a
// read of one rule costs one rule's inputs, and a read of every rule no
// copy of every backend's.
type statsInputs struct {
	conns   connCounts
	bstats  []*dataplane.BackendStats // the workers' per-backend totals; nil: not counted
	rates   rateWindow                // the estimator's last window: rates
	checker *health.Checker           // nil: no health checks
}

// statsInputs reads the inputs of the rows of rules (nil: every rule).
func (d *daemon) statsInputs(ctx context.Context, rules []*ruleStatus) statsInputs {
	in := statsInputs{conns: d.countConnections(ctx, rules), rates: d.rates.latest(), checker: d.checker}
	if e := d.engine; e != nil && e.Snapshot() != nil {
		in.bstats = e.BackendStats()
	}
	return in
}

// totals are the packets, bytes and new connections sent to backend k
// since start, summed over the queues as they are now; ok false when the
// workers do not count per backend.
func (in *statsInputs) totals(k [2]uint32) (t dataplane.Totals, ok bool) {
	if in.bstats == nil {
		return t, false
	}
	for _, bs := range in.bstats {
		n := bs.Totals(uint16(k[0]), k[1])
		t.Packets += n.Packets
		t.Bytes += n.Bytes
		t.Conns += n.Conns
	}
	return t, true
}

// check is the health check status of k, if it is probed.
func (in *statsInputs) check(k probeKey) (health.Status, bool) {
	if in.checker == nil {
		return health.Status{}, false
	}
	return in.checker.StatusOf(health.Key{Rule: k.rule, Backend: k.addr})
}

// ruleInfo builds a rule's status row in storage of its own.
func (o *ops) ruleInfo(rr ruleRows, in statsInputs) control.Rule {
	b := ruleBuilder{digests: true}
	return *b.build(o, &rr, in)
}

// ruleBuilder builds status rows in storage it reuses: the Rule that build
// returns, its backends and their times are overwritten by the next build.
// A row takes no allocation of its own (TestRuleBuilderAllocs): its
// address is the string the rule's failover state holds, its times point
// into times.
type ruleBuilder struct {
	digests bool // fill TableDigest (digest.go: computed when first asked for after the rule's publication)
	rule    control.Rule
	times   []backendTimes // one per row of rule.Backends
	detail  []string
	addr    []byte // an address formatted to find its state
}

// backendTimes is where a row's optional times live.
type backendTimes struct {
	drainedAt, drainUntil, lastCheck, healthSince time.Time
}

// timeOr points at *t, which it sets to v, or is nil while v is unset (an
// absent JSON field).
func timeOr(t *time.Time, v time.Time) *time.Time {
	if v.IsZero() {
		return nil
	}
	*t = v
	return t
}

// backendState finds addr's state in st without formatting a string for
// it (its bytes go into b.addr); ok false when st has none.
func (b *ruleBuilder) backendState(st *failover.State, addr netip.Addr) (*failover.BackendState, bool) {
	if st == nil {
		return nil, false
	}
	b.addr = addr.AppendTo(b.addr[:0])
	bs := st.Backends
	// string(b.addr) in a comparison allocates nothing.
	i := sort.Search(len(bs), func(i int) bool { return bs[i].Name >= string(b.addr) })
	if i == len(bs) || bs[i].Name != string(b.addr) {
		return nil, false
	}
	return &bs[i], true
}

// build builds rr's status row: totals as the workers' counters are now,
// rates from the estimator's last window.
func (b *ruleBuilder) build(o *ops, rr *ruleRows, in statsInputs) *control.Rule {
	conns, rates := in.conns, in.rates
	r := rr.cfg
	b.rule = control.Rule{
		Name: r.Name, Service: r.Service, VIP: r.VIP.String(), Protocol: r.Protocol.String(), Ports: r.Ports.String(),
		Affinity: r.SessionAffinity.String(), Tracking: r.ConnectionTracking.TrackingMode.String(),
		Policy: r.LocalityLBPolicy.String(), Encap: r.Encap.Type.String(), Slot: int(rr.slot),
		Backends: b.rule.Backends[:0],
	}
	if b.rule.Backends == nil {
		b.rule.Backends = []control.Backend{} // "backends": [], not null
	}
	info := &b.rule
	if n := len(rr.backends); cap(b.times) < n {
		b.times = make([]backendTimes, n)
	}
	if rr.state != nil {
		info.Tier, info.Reason, info.Eligible = rr.state.Tier.String(), rr.state.Reason, len(rr.state.Eligible)
	}
	var table *hash.MaglevTable
	if snap := o.d.engine.Snapshot(); snap != nil && int(rr.slot) < len(snap.Rules) && snap.Rules[rr.slot].Present {
		table = snap.Rules[rr.slot].Table
		info.TableSize = table.Size()
		if b.digests && rr.status != nil {
			info.TableDigest = rr.status.Digest() // digest.go, computed when first asked for
		}
		if sr := snap.Rules[rr.slot]; sharedSessions(sr) { // sessions.go
			info.SessionActiveSeconds = sessionActiveWindow(sr.Idle).Duration().Seconds()
		}
	}
	info.FirstChecksDone = rr.warm
	if !rr.warm && rr.state != nil {
		info.Reason = "start-up set (" + info.Reason + "): held until every backend has its first health verdict, then switched once"
	}
	for i, br := range rr.backends {
		v := br.view
		times := &b.times[i]
		bs, inState := b.backendState(rr.state, v.Addr)
		address := ""
		if inState {
			address = bs.Name
		} else {
			address = v.Addr.String()
		}
		info.Backends = append(info.Backends, control.Backend{
			Rule: r.Name, Address: address, Group: v.Group,
			Role: v.Role.String(), RoleSource: v.RoleSource.String(),
			Admin: "IN_SERVICE", AdminSource: v.DrainedSource.String(),
			WeightConfigured: -1, WeightSource: v.WeightSource.String(),
			Tier: info.Tier, Slot: br.slot, Connections: -1, Packets: -1,
			NextHop: br.nhErr,
		})
		row := &info.Backends[len(info.Backends)-1]
		if v.Drained {
			row.Admin = "DRAINED"
			times.drainedAt = v.DrainedAt
			row.DrainedAt = &times.drainedAt
		}
		if br.removed {
			row.Admin, row.AdminSource, row.Role, row.RoleSource, row.WeightSource = "REMOVED", "config", "-", "config", "config"
		}
		if v.HasWeight {
			row.WeightConfigured = int(v.Weight)
		}
		if rr.state != nil {
			if inState {
				row.Health, row.Usable, row.Eligible = bs.Health.String(), bs.Usable, bs.Eligible
				if r.LocalityLBPolicy == config.WeightedMaglev {
					// Plain MAGLEV ignores weights: no state to report.
					row.WeightState = bs.WeightState.String()
				}
				row.DrainUntil = timeOr(&times.drainUntil, bs.DrainUntil)
			}
			for _, m := range rr.state.Eligible {
				if m.Name == row.Address {
					row.WeightEffective = m.Weight
				}
			}
		}
		detail := b.detail[:0]
		if !rr.warm && br.verdict != "" && rr.cfg.HealthCheck.Type != config.HealthNone {
			// The verdict exists but is held back (warmup.go).
			row.Health = br.verdict
			detail = append(detail, "held back until every backend of the rule has its first verdict")
		}
		pk := o.d.probeKeyOf(r, v.Addr)
		probeErr := br.probe // the error of the last verdict change
		check, probed := in.check(pk)
		if probed && check.LastError != nil {
			probeErr = check.LastError.Error() // the last probe's: a cause can change without the verdict
		}
		if probeErr != "" && row.Health != failover.HealthHealthy.String() {
			switch { // services.go: one probe decides for every rule of a share group
			case r.Service != "":
				probeErr = fmt.Sprintf("backend service %s, probed through rule %s: %s", r.Service, pk.rule, probeErr)
			case pk.rule != r.Name:
				probeErr = fmt.Sprintf("probed through rule %s (the same direct check): %s", pk.rule, probeErr)
			}
			detail = append(detail, probeErr)
		}
		row.HealthDetail = strings.Join(detail, "; ")
		b.detail = detail
		if table != nil && table.Size() > 0 {
			if n, ok := table.Slots(row.Address); ok {
				row.Share = float64(n) / float64(table.Size())
			}
		}
		k := [2]uint32{uint32(rr.slot), br.slot}
		row.ActiveConnections, row.InactiveConnections = -1, -1
		if br.present && conns.ok {
			row.ActiveConnections, row.InactiveConnections = conns.of(k)
			active, inactive := conns.tallied(k)
			row.Connections, row.SessionEntries = active+inactive, conns.shared[k]
		}
		if t, ok := in.totals(k); br.present && ok {
			row.Packets, row.Bytes, row.NewConnections = int64(t.Packets), int64(t.Bytes), int64(t.Conns)
			row.PacketsPerSec = rates.of(func(s *sample) uint64 { return s.backend[k].Packets })
			row.BytesPerSec = rates.of(func(s *sample) uint64 { return s.backend[k].Bytes })
			row.NewConnectionsPerSec = rates.of(func(s *sample) uint64 { return s.backend[k].Conns })
		}
		if probed {
			row.CheckInfo = control.CheckInfo{ProbeLatencySeconds: check.LastLatency.Seconds(), HealthChanges: check.Changes,
				LastCheck: timeOr(&times.lastCheck, check.LastProbe), HealthSince: timeOr(&times.healthSince, check.Since)}
		}
		if r.Service != "" || pk.rule != r.Name {
			row.ProbeRule = pk.rule
		}
		info.AddBackend(row)
	}
	return info
}

// timeOrNil is t for a JSON field that is absent while t is unset.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ChangeBackend implements control.API.
func (o *ops) ChangeBackend(ctx context.Context, c control.BackendChange) (*control.BackendChangeResult, error) {
	addr, err := netip.ParseAddr(c.Backend)
	if err != nil {
		return nil, control.BadRequest("%s: backend %q is not an IP address", c.Action, c.Backend)
	}
	addr = addr.Unmap()
	var res control.BackendChangeResult
	var cerr error
	err = o.d.do(ctx, func() {
		d := o.d
		if cerr = d.restartGuard(fmt.Sprintf("backend %s", c.Action)); cerr != nil {
			return
		}
		what := changeTarget(d.cfg, c.Rule) // services.go
		before, _ := d.state.Marshal()
		changed := true
		switch c.Action {
		case control.ActionMark:
			role, _ := config.ParseRole(c.Role)
			cerr = d.state.Mark(d.cfg, c.Rule, addr, role)
			res.Message = fmt.Sprintf("%s of %s marked %s", addr, what, role)
		case control.ActionDrain:
			cerr = d.state.Drain(d.cfg, c.Rule, addr, time.Now())
			res.Message = fmt.Sprintf("%s of %s drained: no new connections; tracked ones are honoured for %s", addr, what, drainingOf(d.cfg, c.Rule))
		case control.ActionUndrain:
			changed, cerr = d.state.Undrain(d.cfg, c.Rule, addr)
			res.Message = fmt.Sprintf("%s of %s back in service", addr, what)
			if !changed {
				res.Message = fmt.Sprintf("%s of %s was not drained", addr, what)
			}
		case control.ActionWeight:
			cerr = d.state.SetWeight(d.cfg, c.Rule, addr, *c.Weight)
			res.Message = fmt.Sprintf("%s of %s weight %d (overrides the health check's and the static weight)", addr, what, *c.Weight)
		case control.ActionReset:
			changed, cerr = d.state.Reset(d.cfg, c.Rule, addr)
			res.Message = fmt.Sprintf("%s of %s: overrides removed; the rule files decide again", addr, what)
			if !changed {
				res.Message = fmt.Sprintf("%s of %s had no override", addr, what)
			}
		}
		if cerr != nil {
			cerr = control.BadRequest("%v", cerr)
			return
		}
		after, _ := d.state.Marshal()
		if string(before) == string(after) {
			changed = false
		}
		if !changed {
			return
		}
		res.Changed = true
		if err := d.state.Save(d.cfg.StateFile); err != nil {
			if st, lerr := config.LoadState(d.cfg.StateFile); lerr == nil {
				d.state = st
			}
			cerr = fmt.Errorf("%s not applied: %w", c.Action, err)
			return
		}
		d.view = d.view.Reapply(d.cfg, d.state, c.Rule) // the other rules' views stay
		d.touch(c.Rule)                                 // publish.go: only this rule is computed again
		if err := d.publishConfig(); err != nil {
			cerr = fmt.Errorf("%s saved but not published: %w", c.Action, err)
			return
		}
		d.log.Info("backend changed by the CLI", "action", c.Action, "rule", c.Rule, "backend", addr.String(), "by", control.PeerFrom(ctx).String())
		d.events.add(control.RuleEvent{Kind: eventCLI, Rule: c.Rule, Backend: addr.String(), Reason: res.Message, By: control.PeerFrom(ctx).String()})
	})
	if err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	rules, err := o.rows(ctx, c.Rule)
	if err == nil {
		sel, _ := selectRules(o.d.Status().Rules, control.StatusQuery{Rule: c.Rule})
		in := o.d.statsInputs(ctx, sel)
		for _, rr := range rules {
			for _, b := range o.ruleInfo(rr, in).Backends {
				if b.Address == addr.String() {
					res.Backend = b
				}
			}
		}
	}
	return &res, nil
}

func drainingOf(cfg *config.Config, rule string) time.Duration {
	if rs := cfg.RulesOf(config.OverrideKey(cfg, rule)); len(rs) > 0 {
		return rs[0].ConnectionDrainingTimeout
	}
	return 0
}
