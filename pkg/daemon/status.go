package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/buildinfo"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/engine"
)

// Status implements control.API.
func (o *ops) Status(ctx context.Context) (*control.Status, error) {
	st := o.d.Status()
	rules, stale, err := o.rows(ctx, "")
	if err != nil {
		return nil, err
	}
	in := o.d.statsInputs(ctx)
	rates := in.rates
	out := &control.Status{
		Config: st.Config, Loaded: st.Loaded, XDPMode: st.XDPMode, ZeroCopy: st.ZeroCopy,
		Queues: st.Queues, Stale: stale, Rules: []control.Rule{},
		Build: control.Build{Version: buildinfo.Read().Short(), Started: o.d.started, UptimeSeconds: time.Since(o.d.started).Seconds()},
	}
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
	var tiers []control.RuleEvent
	for _, rr := range rules {
		out.Rules = append(out.Rules, o.ruleInfo(rr, in))
		if rr.state != nil {
			for _, ev := range rr.state.History {
				tiers = append(tiers, control.RuleEvent{Rule: rr.name, At: ev.At, Kind: ev.Kind.String(), From: tierName(ev.From, ev.Kind), To: tierName(ev.To, ev.Kind), Group: ev.Group, Reason: ev.Reason})
			}
		}
	}
	if out.Appliance, err = o.appliance(ctx); err != nil {
		return nil, err
	}
	out.Events = newestEvents(tiers, o.d.events.list()) // events.go
	return out, nil
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
