package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/buildinfo"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/engine"
)

// Status implements control.API.
func (o *ops) Status(ctx context.Context, q control.StatusQuery) (*control.Status, error) {
	st := o.d.Status()
	selected, err := selectRules(st.Rules, q)
	if err != nil {
		return nil, err
	}
	out := &control.Status{
		Config: st.Config, Loaded: st.Loaded, XDPMode: st.XDPMode, ZeroCopy: st.ZeroCopy,
		Queues: st.Queues, Rules: []control.Rule{}, RulesSelected: len(selected), RulesOffset: q.Offset,
		Build: control.Build{Version: buildinfo.Read().Short(), Started: o.d.started, UptimeSeconds: time.Since(o.d.started).Seconds()},
	}
	// The rule tables: only those of the page, streamed (streamRules:
	// copied on the control goroutine a chunk at a time as the reply is
	// written); a summary reads the published status alone.
	var in statsInputs
	if q.Summary {
		out.Summary = summarize(st.Rules, selected, q)
		in.rates = o.d.rates.latest()
	} else {
		rules := page(selected, q.Offset, q.Limit)
		in = o.d.statsInputs(ctx, rules)
		out.Stream = o.streamRules(ctx, rules, q.Backend, true, in)
	}
	var restart string
	if out.Stale, restart, err = o.controlLines(ctx); err != nil {
		return nil, err
	}
	if restart != "" {
		out.Warnings = append(out.Warnings, restart)
	}
	rates := in.rates
	out.Rates = control.RateInterval{Seconds: rates.seconds(), WindowSeconds: rates.nominal.Seconds()}
	if rates.ok() {
		out.Rates.At = rates.cur.at
	}
	if e := o.d.engine; e != nil {
		out.Counters.Drops, out.Counters.Passes = map[string]uint64{}, map[string]uint64{}
		for _, q := range e.Stats() {
			c := q.Counters
			out.Counters.RX += c.RXPackets.Load()
			out.Counters.TX += c.TXPackets.Load()
			out.Counters.Tracked += c.TrackedHit.Load()
			out.Counters.KernelRXD += q.Kernel.RXDropped
			out.Conntrack += q.Conntrack.Len()
			out.QueueStats = append(out.QueueStats, queueStat(&q, rates))
			for r := range c.Reasons {
				reason := dataplane.Reason(r)
				if n := c.Reasons[r].Load(); n != 0 && reason != dataplane.ReasonNone {
					if reason.Pass() {
						out.Counters.Passes[reason.String()] += n
					} else {
						out.Counters.Drops[reason.String()] += n
					}
				}
			}
		}
		out.Counters.RXPerSec = rates.of(func(s *sample) uint64 { return s.rx })
		out.Warnings = append(out.Warnings, idleQueueWarnings(out.QueueStats, out.Counters.RXPerSec, st.XDPMode, rates)...)
		ap := o.d.arenaPages() // arena_pages.go
		out.Arenas, out.ShmemTHP = arenaStats(ap), ap.Mode
		if ap.Err != nil {
			out.Warnings = append(out.Warnings, ap.Err.Error())
		}
	}
	// The selected rules' tier switches, from the published states.
	var tiers []control.RuleEvent
	for _, rs := range selected {
		if rs.State == nil {
			continue
		}
		for _, ev := range rs.State.History {
			tiers = append(tiers, control.RuleEvent{Rule: rs.Name, At: ev.At, Kind: ev.Kind.String(), From: tierName(ev.From, ev.Kind), To: tierName(ev.To, ev.Kind), Group: ev.Group, Reason: ev.Reason})
		}
		if len(tiers) >= 4*shownEvents { // only the newest are shown: a status of every rule holds a few
			tiers = keepNewest(tiers)
		}
	}
	if out.Appliance, err = o.appliance(ctx); err != nil {
		return nil, err
	}
	out.Events = newestEvents(tiers, o.d.events.list()) // events.go
	return out, nil
}

// keepNewest sorts evs by time, in place, and keeps the newest shown
// (newestEvents of evs alone, without a copy).
func keepNewest(evs []control.RuleEvent) []control.RuleEvent {
	slices.SortStableFunc(evs, func(a, b control.RuleEvent) int { return a.At.Compare(b.At) })
	return evs[:copy(evs, evs[len(evs)-min(len(evs), shownEvents):])]
}

// selectRules returns the published rules q selects, in configuration
// order.
func selectRules(rules []*ruleStatus, q control.StatusQuery) ([]*ruleStatus, error) {
	var vip, backend netip.Addr
	var err error
	if q.VIP != "" {
		if vip, err = netip.ParseAddr(q.VIP); err != nil {
			return nil, control.BadRequest("vip: %v", err)
		}
	}
	if q.Backend != "" {
		if backend, err = netip.ParseAddr(q.Backend); err != nil {
			return nil, control.BadRequest("backend: %v", err)
		}
	}
	var out []*ruleStatus
	for _, rs := range rules {
		switch {
		case q.Rule != "" && (rs.Rule == nil || !ruleOrService(rs.Rule, q.Rule)):
		case vip.IsValid() && rs.VIP != vip.Unmap():
		case backend.IsValid() && !hasBackend(rs, backend):
		default:
			out = append(out, rs)
		}
	}
	if q.Rule != "" && len(out) == 0 && !vip.IsValid() && !backend.IsValid() {
		return nil, control.BadRequest("no rule or backend service %q", q.Rule)
	}
	return out, nil
}

func hasBackend(rs *ruleStatus, addr netip.Addr) bool {
	if rs.State == nil {
		return false
	}
	_, ok := rs.State.Backend(addr.Unmap().String())
	return ok
}

// page is rules[offset:offset+limit] within bounds (limit 0: to the end).
func page[T any](rules []T, offset, limit int) []T {
	if offset >= len(rules) {
		return nil
	}
	rules = rules[offset:]
	if limit > 0 && limit < len(rules) {
		rules = rules[:limit]
	}
	return rules
}

// keepBackend leaves each rule's row of the backend addr only.
func keepBackend(rules []ruleRows, addr string) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return
	}
	for i := range rules {
		rules[i].backends = slices.DeleteFunc(rules[i].backends, func(b backendRow) bool { return b.view.Addr != a.Unmap() })
	}
}

// summarize counts every rule and lists the selected ones that need
// attention, paged as q pages the rule tables.
func summarize(all, selected []*ruleStatus, q control.StatusQuery) *control.StatusSummary {
	sum := &control.StatusSummary{Tiers: map[string]int{}, Health: map[string]int{}}
	for _, rs := range all {
		c := &rs.Counts
		sum.Rules++
		sum.Tiers[rs.Tier]++
		if !rs.Warm {
			sum.Cold++
		}
		sum.Backends += c.backends
		sum.Drained += c.drained
		sum.Eligible += c.eligible
		for h, n := range c.health {
			if n > 0 {
				sum.Health[failover.Health(h).String()] += n
			}
		}
	}
	var attention []control.RuleLine
	for _, rs := range selected {
		c := &rs.Counts
		unhealthy := c.health[failover.HealthUnknown] + c.health[failover.HealthUnhealthy]
		if rs.Tier == failover.TierPrimary.String() && rs.Warm && unhealthy == 0 {
			continue
		}
		attention = append(attention, control.RuleLine{Name: rs.Name, VIP: rs.VIP.String(), Tier: rs.Tier, Reason: rs.Reason,
			Backends: c.backends, Eligible: rs.Eligible, Unhealthy: unhealthy, Warm: rs.Warm})
	}
	sum.AttentionTotal = len(attention)
	sum.Attention = page(attention, q.Offset, q.Limit)
	return sum
}

// controlLines copies, on the control goroutine, the state overrides
// that match nothing and the line of a restart under way ("" when none).
func (o *ops) controlLines(ctx context.Context) (stale []string, restart string, err error) {
	err = o.d.do(ctx, func() {
		for _, s := range o.d.view.Stale {
			stale = append(stale, s.String())
		}
		if r := o.d.restart; r != nil {
			restart = fmt.Sprintf("a restart is under way since %s (successor pid %d, %s so far): reloads and backend changes are refused until it is done",
				r.started.Format("15:04:05"), r.pid, time.Since(r.started).Round(100*time.Millisecond))
		}
	})
	return stale, restart, err
}

// queueStat is one queue's row of status: packets, rates, drops, and the
// kernel's statistics of its socket.
func queueStat(q *engine.QueueStats, rates rateWindow) control.QueueStat {
	c, qid := q.Counters, q.Queue
	drops, passes := dropsOf(c)
	k := q.Kernel
	return control.QueueStat{
		Queue: qid, RXPackets: c.RXPackets.Load(), TXPackets: c.TXPackets.Load(),
		RXPerSec: rates.of(func(s *sample) uint64 { return s.queueRX[qid] }),
		QueueTraffic: control.QueueTraffic{
			TXPerSec: rates.of(func(s *sample) uint64 { return s.queueTX[qid] }),
			Drops:    drops, Passes: passes,
			DropsPerSec: rates.of(func(s *sample) uint64 { return s.queueDrops[qid] }),
			XSK: control.XSK{RXDropped: k.RXDropped, RXInvalidDescs: k.RXInvalidDescs, TXInvalidDescs: k.TXInvalidDescs,
				RXRingFull: k.RXRingFull, RXFillRingEmpty: k.RXFillRingEmpty, TXRingEmpty: k.TXRingEmptyDescs},
		},
	}
}

func tierName(t failover.Tier, k failover.EventKind) string {
	if k != failover.EventTierSwitch {
		return ""
	}
	return t.String()
}

// idleLoad is the appliance's packet rate above which a bound queue that
// received nothing over a whole window is worth a warning.
const idleLoad = 100

// idleQueueWarnings warns about every bound queue that received nothing
// over the last window while the appliance received at least idleLoad
// packets/s: its flows never reach xlb's socket on that queue (generic XDP
// on veth delivers everything on queue 0; a NIC's RSS may leave a queue
// out).
func idleQueueWarnings(qs []control.QueueStat, total float64, xdpMode string, rates rateWindow) []string {
	if !rates.ok() || total < idleLoad || len(qs) < 2 {
		return nil
	}
	var out []string
	for _, q := range qs {
		if q.RXPerSec > 0 {
			continue
		}
		why := "the NIC's receive hashing (RSS) sends it no flow: check its indirection table (ethtool -x) and the number of client flows"
		if xdpMode == "generic" {
			why = "the XDP program runs in generic mode, where a veth delivers every packet on queue 0 (the log at start says why native mode was refused)"
		}
		out = append(out, fmt.Sprintf("queue %d received nothing over the last %s while the appliance received %.0f packets/s: %s", q.Queue, rates.nominal, total, why))
	}
	return out
}
