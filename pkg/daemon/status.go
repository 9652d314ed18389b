package daemon

import (
	"context"
	"slices"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
)

// Status implements control.API.
func (o *ops) Status(ctx context.Context) (*control.Status, error) {
	st := o.d.Status()
	rules, stale, err := o.rows(ctx, "")
	if err != nil {
		return nil, err
	}
	live, rates := o.d.takeSample(), o.d.rates.latest()
	conns := o.countConnections(ctx)
	out := &control.Status{
		Config: st.Config, Loaded: st.Loaded, XDPMode: st.XDPMode, ZeroCopy: st.ZeroCopy,
		Queues: st.Queues, Stale: stale, Rules: []control.Rule{},
	}
	out.Rates = control.RateInterval{Seconds: rates.seconds(), WindowSeconds: rates.nominal.Seconds()}
	if rates.ok() {
		out.Rates.At = rates.cur.at
	}
	if e := o.d.engine; e != nil {
		out.Counters.Drops = map[string]uint64{}
		for _, q := range e.Stats() {
			c := q.Counters
			out.Counters.RX += c.RXPackets.Load()
			out.Counters.TX += c.TXPackets.Load()
			out.Counters.Tracked += c.TrackedHit.Load()
			out.Counters.KernelRXD += q.Kernel.RXDropped
			out.Conntrack += q.Conntrack.Len()
			for r := range c.Reasons {
				if n := c.Reasons[r].Load(); n != 0 && dataplane.Reason(r) != dataplane.ReasonNone {
					out.Counters.Drops[dataplane.Reason(r).String()] += n
				}
			}
		}
		out.Counters.RXPerSec = rates.of(func(s *sample) uint64 { return s.rx })
	}
	for _, rr := range rules {
		out.Rules = append(out.Rules, o.ruleInfo(rr, conns, live, rates))
		if rr.state != nil {
			for _, ev := range rr.state.History {
				out.Events = append(out.Events, control.RuleEvent{Rule: rr.name, At: ev.At, Kind: ev.Kind.String(), From: tierName(ev.From, ev.Kind), To: tierName(ev.To, ev.Kind), Group: ev.Group, Reason: ev.Reason})
			}
		}
	}
	if out.Appliance, err = o.appliance(ctx); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out.Events, func(a, b control.RuleEvent) int { return a.At.Compare(b.At) })
	if len(out.Events) > 20 {
		out.Events = out.Events[len(out.Events)-20:]
	}
	return out, nil
}

func tierName(t failover.Tier, k failover.EventKind) string {
	if k != failover.EventTierSwitch {
		return ""
	}
	return t.String()
}
