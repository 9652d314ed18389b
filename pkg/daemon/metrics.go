package daemon

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// startMetrics serves /metrics on the configured address ("" disables
// it) until the returned function is called. A listen failure is logged
// and the daemon keeps forwarding: metrics are not worth an outage.
func (d *daemon) startMetrics() func() {
	addr := d.cfg.MetricsListen
	if addr == "" {
		return func() {}
	}
	if d.metricsLn == nil {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			d.log.Error("metrics endpoint not served", "err", fmt.Errorf("metrics listen %s: %w", addr, err))
			return func() {}
		}
		d.metricsLn = ln
	}
	d.log.Info("metrics", "listen", addr)
	return metrics.ServeListener(d.metricsLn, metrics.Handler(d.writeMetrics))
}

// writeMetrics writes the appliance's metrics (Prometheus text format).
// It runs on the scraping goroutine: it reads the workers' atomic counters,
// the published status, and the conntrack statistics through each worker's
// mailbox (bounded by a timeout, so a stuck worker cannot hang a scrape).
func (d *daemon) writeMetrics(w *metrics.Writer) {
	st := d.Status()
	qs := d.engine.Stats()
	q := func(i int) string { return strconv.Itoa(qs[i].Queue) }
	// perQueue writes a family with one sample per queue.
	perQueue := func(name string, kind metrics.Kind, help string, value func(s *queueStats) uint64) {
		w.Family(name, kind, help)
		for i := range qs {
			w.Sample(name, float64(value(&qs[i])), "queue", q(i))
		}
	}
	// perBackend writes a family with one sample per backend of each rule;
	// labels are added after rule and backend.
	perBackend := func(name string, kind metrics.Kind, help string, value func(r *ruleStatus, b *failover.BackendState) (float64, []string)) {
		w.Family(name, kind, help)
		for ri := range st.Rules {
			r := &st.Rules[ri]
			for bi := range r.State.Backends {
				b := &r.State.Backends[bi]
				v, labels := value(r, b)
				w.Sample(name, v, append([]string{"rule", r.Name, "backend", b.Name}, labels...)...)
			}
		}
	}

	w.Family("xlb_info", metrics.Gauge, "Constant 1, labelled with how the data plane runs.")
	w.Sample("xlb_info", 1, "xdp_mode", st.XDPMode, "zerocopy", strconv.FormatBool(st.ZeroCopy), "queues", strconv.Itoa(len(st.Queues)))

	perQueue("xlb_rx_packets_total", metrics.Counter, "Frames received from the AF_XDP socket, per queue.",
		func(s *queueStats) uint64 { return s.Counters.RXPackets.Load() })
	perQueue("xlb_tx_packets_total", metrics.Counter, "Frames handed to the TX ring (fragments and replies included), per queue.",
		func(s *queueStats) uint64 { return s.Counters.TXPackets.Load() })
	w.Family("xlb_verdict_packets_total", metrics.Counter, "Packets by verdict (drop, pass, tx, reply), per queue.")
	for i := range qs {
		for v := range qs[i].Counters.Verdicts {
			w.Sample("xlb_verdict_packets_total", float64(qs[i].Counters.Verdicts[v].Load()), "queue", q(i), "verdict", dataplane.Verdict(v).String())
		}
	}
	w.Family("xlb_drop_packets_total", metrics.Counter, "Packets dropped or passed, by reason, per queue.")
	for i := range qs {
		for r := range qs[i].Counters.Reasons {
			if r == int(dataplane.ReasonNone) {
				continue
			}
			w.Sample("xlb_drop_packets_total", float64(qs[i].Counters.Reasons[r].Load()), "queue", q(i), "reason", dataplane.Reason(r).String())
		}
	}
	w.Family("xlb_encap_results_total", metrics.Counter, "Encapsulation results, per queue.")
	for i := range qs {
		for r := range qs[i].Counters.Encap {
			w.Sample("xlb_encap_results_total", float64(qs[i].Counters.Encap[r].Load()), "queue", q(i), "result", encap.Result(r).String())
		}
	}
	perQueue("xlb_tracked_packets_total", metrics.Counter, "Packets placed by an existing connection-tracking entry, per queue.",
		func(s *queueStats) uint64 { return s.Counters.TrackedHit.Load() })
	perQueue("xlb_kernel_rx_dropped_total", metrics.Counter, "Frames the kernel dropped before the socket (XDP_STATISTICS: rx_dropped + rx_ring_full), per queue.",
		func(s *queueStats) uint64 { return s.Kernel.RXDropped + s.Kernel.RXRingFull })

	perQueue("xlb_conntrack_entries", metrics.Gauge, "Connection-tracking entries in use (expired ones until reclaimed), per queue.",
		func(s *queueStats) uint64 { return uint64(s.Conntrack.Len()) })
	perQueue("xlb_conntrack_capacity", metrics.Gauge, "Connection-tracking slots, per queue.",
		func(s *queueStats) uint64 { return uint64(s.Conntrack.Cap()) })
	type ctRow struct {
		queue string
		name  string
		v     uint64
	}
	var ct []ctRow
	for i := range qs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s, err := qs[i].Conntrack.Stats(ctx)
		cancel()
		if err != nil {
			continue
		}
		for _, r := range []struct {
			name string
			v    uint64
		}{
			{"hit", s.Hits}, {"miss", s.Misses}, {"insert", s.Inserts}, {"update", s.Updates},
			{"insert_failure", s.InsertFailures}, {"evicted_expired", s.EvictedExpired},
			{"evicted_unconfirmed", s.EvictedUnconfirmed}, {"evicted_lru", s.EvictedLRU},
			{"expired", s.Expired}, {"flushed", s.Flushed},
		} {
			ct = append(ct, ctRow{q(i), r.name, r.v})
		}
	}
	w.Family("xlb_conntrack_events_total", metrics.Counter, "Connection-tracking events (hit, miss, insert, insert_failure, evictions, expirations), per queue.")
	for _, r := range ct {
		w.Sample("xlb_conntrack_events_total", float64(r.v), "queue", r.queue, "event", r.name)
	}

	w.Family("xlb_rule_tier", metrics.Gauge, "1 for the eligible tier each rule serves from.")
	for _, r := range st.Rules {
		w.Sample("xlb_rule_tier", 1, "rule", r.Name, "vip", r.VIP.String(), "tier", r.Tier)
	}
	w.Family("xlb_rule_tier_switches_total", metrics.Counter, "Eligible-tier changes since start (the last 64 are in xlb status).")
	for _, r := range st.Rules {
		n := 0
		for _, ev := range r.State.History {
			if ev.Kind == failover.EventTierSwitch {
				n++
			}
		}
		w.Sample("xlb_rule_tier_switches_total", float64(n), "rule", r.Name)
	}
	perBackend("xlb_backend_healthy", metrics.Gauge, "1 when the backend's health check passes.",
		func(_ *ruleStatus, b *failover.BackendState) (float64, []string) {
			return boolValue(b.Health == failover.HealthHealthy), nil
		})
	perBackend("xlb_backend_eligible", metrics.Gauge, "1 when the backend takes new connections of the rule.",
		func(_ *ruleStatus, b *failover.BackendState) (float64, []string) { return boolValue(b.Eligible), nil })
	perBackend("xlb_backend_weight", metrics.Gauge, "The weight the health check reported (0 unless its state is OK).",
		func(_ *ruleStatus, b *failover.BackendState) (float64, []string) {
			return float64(b.Weight), []string{"weight_state", b.WeightState.String()}
		})
	perBackend("xlb_backend_packets_total", metrics.Counter, "Packets sent to the backend, all queues.",
		func(r *ruleStatus, b *failover.BackendState) (float64, []string) {
			var n uint64
			for i := range qs {
				n += qs[i].Backends.Packets(r.Slot, b.ID)
			}
			return float64(n), nil
		})
	w.Family("xlb_config_reloads_total", metrics.Counter, "Configuration reloads, by result (ok, rejected).")
	w.Sample("xlb_config_reloads_total", float64(d.reloadsOK.Load()), "result", "ok")
	w.Sample("xlb_config_reloads_total", float64(d.reloadsRejected.Load()), "result", "rejected")
	d.writeBGPMetrics(w) // appliance.go
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
