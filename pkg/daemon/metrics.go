package daemon

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/buildinfo"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// Metrics (pkg/metrics, client_golang): one collector whose families are
// declared below (and where their values live: bgpFamilies in
// appliance.go), filled at scrape time by collect from the workers'
// counters, the published status, the conntrack tables (through each
// worker's mailbox, bounded by a timeout) and the health checker, for the
// scopes the scrape asks for. Adding a metric: declare it with family
// (name xlb_<what>_<unit>, _total for counters) in its scope, emit it in
// collect or the collect function of its file (a rule or backend
// family's samples together), and TestMetricsLint and
// TestMetricsTextAsGathered check it on a scrape; pkg/metrics/doc has the
// rules.

// metricFamilies lists every family the daemon's collector exports; family
// appends to it, so a declaration is a registration.
var metricFamilies []*metrics.Family

func family(name, help string, kind metrics.Kind, labels ...string) *metrics.Family {
	f := metrics.NewFamily(name, help, kind, labels...)
	metricFamilies = append(metricFamilies, f)
	return f
}

// The appliance.
var (
	mBuildInfo = family("xlb_build_info", "Constant 1, labelled with the running xlb's module version and VCS revision.", metrics.Gauge, "version", "revision", "go_version")
	mInfo      = family("xlb_info", "Constant 1, labelled with how the data plane runs.", metrics.Gauge, "xdp_mode", "zerocopy", "queues")
	mStarted   = family("xlb_start_time_seconds", "When this daemon started, in seconds since the epoch (uptime: time() - this).", metrics.Gauge)
	mReloads   = family("xlb_config_reloads_total", "Configuration reloads, by result (ok, rejected).", metrics.Counter, "result")
)

// Per queue.
var (
	mRX        = family("xlb_rx_packets_total", "Frames received from the AF_XDP socket, per queue.", metrics.Counter, "queue").In(metrics.ScopeQueue)
	mTX        = family("xlb_tx_packets_total", "Frames handed to the TX ring (fragments, replies and ICMP errors included), per queue.", metrics.Counter, "queue").In(metrics.ScopeQueue)
	mVerdicts  = family("xlb_verdict_packets_total", "Received packets by what became of them (tx, reply, drop, pass), per queue; each packet counts once.", metrics.Counter, "queue", "verdict").In(metrics.ScopeQueue)
	mDrops     = family("xlb_drop_packets_total", "Packets dropped, by reason, per queue (drops only: passes are xlb_pass_packets_total).", metrics.Counter, "queue", "reason").In(metrics.ScopeQueue)
	mPasses    = family("xlb_pass_packets_total", "Frames that were not xlb's to handle (not IP, unsupported L2), by reason, per queue.", metrics.Counter, "queue", "reason").In(metrics.ScopeQueue)
	mEncap     = family("xlb_encap_results_total", "Encapsulation results, per queue.", metrics.Counter, "queue", "result").In(metrics.ScopeQueue)
	mTracked   = family("xlb_tracked_packets_total", "Packets placed by an existing connection-tracking entry, per queue.", metrics.Counter, "queue").In(metrics.ScopeQueue)
	mKernelRXD = family("xlb_kernel_rx_dropped_total", "Frames the kernel dropped before the socket (XDP_STATISTICS: rx_dropped + rx_ring_full), per queue.", metrics.Counter, "queue").In(metrics.ScopeQueue)
	mXSK       = family("xlb_xsk_events_total", "The kernel's XDP_STATISTICS of the queue's AF_XDP socket: rx_dropped, rx_invalid_descs, tx_invalid_descs, rx_ring_full, rx_fill_ring_empty, tx_ring_empty.", metrics.Counter, "queue", "event").In(metrics.ScopeQueue)
	mCTEntries = family("xlb_conntrack_entries", "Connection-tracking entries in use (expired ones until reclaimed), per queue.", metrics.Gauge, "queue").In(metrics.ScopeQueue)
	mCTCap     = family("xlb_conntrack_capacity", "Connection-tracking slots, per queue.", metrics.Gauge, "queue").In(metrics.ScopeQueue)
	mCTEvents  = family("xlb_conntrack_events_total", "Connection-tracking events (hit, miss, insert, insert_failure, evictions, expirations; new flows by kind: miss_syn, miss_non_syn, miss_other; insert_skipped by the new-entry rate; confirmed), per queue.", metrics.Counter, "queue", "event").In(metrics.ScopeQueue)
)

// Per rule and backend.
var (
	mRuleTier     = family("xlb_rule_tier", "1 for the eligible tier each rule serves from.", metrics.Gauge, "rule", "vip", "tier").In(metrics.ScopeRule)
	mRuleService  = family("xlb_rule_backend_service", "Constant 1 for each rule that names a backend service, labelled with it.", metrics.Gauge, "rule", "backend_service").In(metrics.ScopeRule)
	mRuleSwitches = family("xlb_rule_tier_switches_total", "Eligible-tier changes since start (the last 64 are in xlb status).", metrics.Counter, "rule").In(metrics.ScopeRule)
	mRulePackets  = family("xlb_rule_packets_total", "Packets the rule sent to its backends.", metrics.Counter, "rule").In(metrics.ScopeRule)
	mRuleBytes    = family("xlb_rule_bytes_total", "IP bytes (as received) the rule sent to its backends.", metrics.Counter, "rule").In(metrics.ScopeRule)
	mRuleConns    = family("xlb_rule_connections_total", "New connections the rule placed (tracked flows placed by the Maglev table).", metrics.Counter, "rule").In(metrics.ScopeRule)
	mHealthy      = family("xlb_backend_healthy", "1 when the backend's health check passes; backend_service is the rule's service (the rule's own name for a rule with its own backends), whose one probe decides for all its rules.", metrics.Gauge, "rule", "backend_service", "backend").In(metrics.ScopeBackend)
	mEligible     = family("xlb_backend_eligible", "1 when the backend takes new connections of the rule.", metrics.Gauge, "rule", "backend").In(metrics.ScopeBackend)
	mWeight       = family("xlb_backend_weight", "The weight the health check reported (0 unless its state is OK), WEIGHTED_MAGLEV rules only.", metrics.Gauge, "rule", "backend", "weight_state").In(metrics.ScopeBackend)
	mBEPackets    = family("xlb_backend_packets_total", "Packets sent to the backend, all queues.", metrics.Counter, "rule", "backend").In(metrics.ScopeBackend)
	mBEBytes      = family("xlb_backend_bytes_total", "IP bytes (as received, before encapsulation) sent to the backend, all queues.", metrics.Counter, "rule", "backend").In(metrics.ScopeBackend)
	mBEConns      = family("xlb_backend_connections_total", "New connections placed on the backend.", metrics.Counter, "rule", "backend").In(metrics.ScopeBackend)
	mBEActive     = family("xlb_backend_connections_active", "Tracked connections of the backend that have seen neither FIN nor RST (IPVS ActiveConn); for a PER_SESSION rule with a CLIENT_IP or CLIENT_IP_PROTO affinity, its sessions that carried a packet within the last 10 s (half the idle timeout if shorter).", metrics.Gauge, "rule", "backend").In(metrics.ScopeBackend)
	mBEInactive   = family("xlb_backend_connections_inactive", "Tracked connections of the backend that saw a FIN or RST, or a SYN not yet answered (IPVS InActConn); for a PER_SESSION rule with a CLIENT_IP or CLIENT_IP_PROTO affinity, its sessions idle longer than that, kept for affinity until they expire.", metrics.Gauge, "rule", "backend").In(metrics.ScopeBackend)
	mCheckLatency = family("xlb_backend_check_latency_seconds", "How long the backend's last health probe took.", metrics.Gauge, "rule", "backend_service", "backend").In(metrics.ScopeBackend)
	mCheckLast    = family("xlb_backend_check_last_timestamp_seconds", "When the backend's last health probe ended, in seconds since the epoch.", metrics.Gauge, "rule", "backend_service", "backend").In(metrics.ScopeBackend)
	mHealthSince  = family("xlb_backend_health_change_timestamp_seconds", "When the backend's health last changed, in seconds since the epoch.", metrics.Gauge, "rule", "backend_service", "backend").In(metrics.ScopeBackend)
	mHealthFlaps  = family("xlb_backend_health_changes_total", "Health changes since the backend's check started (rate() != 0: flapping).", metrics.Counter, "rule", "backend_service", "backend").In(metrics.ScopeBackend)
)

// startMetrics serves /metrics on the configured address ("" disables
// it) until the returned function is called. A listen failure is logged
// and the daemon keeps forwarding: metrics are not worth an outage.
func (d *daemon) startMetrics() func() {
	addr := d.cfg.MetricsListen
	if addr == "" {
		return func() {}
	}
	reg, err := d.metricsRegistry()
	if err != nil {
		d.log.Error("metrics endpoint not served", "err", err)
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
	d.metricsMu.Lock()
	d.metricsStop = metrics.ServeListener(d.metricsLn, metrics.Handler(reg, d.log))
	d.metricsMu.Unlock()
	// A reload may move the endpoint (reloadkeys.go): stop whichever serves.
	return func() {
		d.metricsMu.Lock()
		defer d.metricsMu.Unlock()
		if d.metricsStop != nil {
			d.metricsStop()
			d.metricsStop = nil
		}
	}
}

// metricsRegistry is the daemon's collector with the Go and process
// collectors.
func (d *daemon) metricsRegistry() (*metrics.Registry, error) {
	return metrics.NewRegistry(metrics.NewCollector(metricFamilies, d.collect))
}

// collect writes one scrape: the families of the scopes it asks for, on
// the scraping goroutine, without a lock the control goroutine holds
// while it works (which locks: pkg/metrics/doc.go, Decisions).
func (d *daemon) collect(s metrics.Sink) {
	var st publishedStatus
	if s.Wants(metrics.ScopeAppliance | metrics.ScopeRule | metrics.ScopeBackend) {
		st = d.Status()
	}
	if s.Wants(metrics.ScopeAppliance) {
		bi := buildinfo.Read()
		s.Add(mBuildInfo, 1, bi.Version, bi.Revision, bi.GoVersion)
		s.Add(mInfo, 1, st.XDPMode, strconv.FormatBool(st.ZeroCopy), strconv.Itoa(len(st.Queues)))
		s.Add(mStarted, float64(d.started.UnixNano())/1e9)
		s.Add(mReloads, float64(d.reloadsOK.Load()), "ok")
		s.Add(mReloads, float64(d.reloadsRejected.Load()), "rejected")
	}
	if d.engine != nil {
		if s.Wants(metrics.ScopeQueue) {
			d.collectQueues(s)
		}
		if s.Wants(metrics.ScopeAppliance) {
			collectArenaPages(s, d.arenaPages()) // arena_pages.go
		}
	}
	if s.Wants(metrics.ScopeRule | metrics.ScopeBackend) {
		d.collectRules(s, &st)
	}
	if s.Wants(metrics.ScopeAppliance) {
		d.collectBGP(s)   // appliance.go
		d.collectFleet(s) // fleet.go
	}
}

// collectQueues writes the per-queue families.
func (d *daemon) collectQueues(s metrics.Sink) {
	for _, qs := range d.engine.Stats() {
		q, c, k := strconv.Itoa(qs.Queue), qs.Counters, qs.Kernel
		s.Add(mRX, float64(c.RXPackets.Load()), q)
		s.Add(mTX, float64(c.TXPackets.Load()), q)
		for v := range c.Verdicts {
			s.Add(mVerdicts, float64(c.Verdicts[v].Load()), q, dataplane.Verdict(v).String())
		}
		for r := range c.Reasons {
			switch reason := dataplane.Reason(r); {
			case reason == dataplane.ReasonNone:
			case reason.Pass():
				s.Add(mPasses, float64(c.Reasons[r].Load()), q, reason.String())
			default:
				s.Add(mDrops, float64(c.Reasons[r].Load()), q, reason.String())
			}
		}
		for r := range c.Encap {
			s.Add(mEncap, float64(c.Encap[r].Load()), q, encap.Result(r).String())
		}
		s.Add(mTracked, float64(c.TrackedHit.Load()), q)
		s.Add(mKernelRXD, float64(k.RXDropped+k.RXRingFull), q)
		for _, e := range []struct {
			name string
			v    uint64
		}{
			{"rx_dropped", k.RXDropped}, {"rx_invalid_descs", k.RXInvalidDescs}, {"tx_invalid_descs", k.TXInvalidDescs},
			{"rx_ring_full", k.RXRingFull}, {"rx_fill_ring_empty", k.RXFillRingEmpty}, {"tx_ring_empty", k.TXRingEmptyDescs},
		} {
			s.Add(mXSK, float64(e.v), q, e.name)
		}
		s.Add(mCTEntries, float64(qs.Conntrack.Len()), q)
		s.Add(mCTCap, float64(qs.Conntrack.Cap()), q)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cs, err := qs.Conntrack.Stats(ctx)
		cancel()
		if err != nil {
			continue
		}
		for _, e := range []struct {
			name string
			v    uint64
		}{
			{"hit", cs.Hits}, {"miss", cs.Misses}, {"insert", cs.Inserts}, {"update", cs.Updates},
			{"insert_failure", cs.InsertFailures}, {"evicted_expired", cs.EvictedExpired},
			{"evicted_unconfirmed", cs.EvictedUnconfirmed}, {"evicted_lru", cs.EvictedLRU},
			{"expired", cs.Expired}, {"flushed", cs.Flushed},
			// Flood defences: new flows by kind (a non-SYN spike means
			// flows are losing their state), refused by the rate limit,
			// confirmed by their next packet.
			{"miss_syn", cs.MissSYN}, {"miss_non_syn", cs.MissNonSYN}, {"miss_other", cs.MissOther},
			{"insert_skipped", cs.InsertSkipped}, {"confirmed", cs.Confirmed},
		} {
			s.Add(mCTEvents, float64(e.v), q, e.name)
		}
	}
}

// collectRules writes the per-rule and per-backend families. Each
// family's samples go out together (the text exposition wants them so,
// and metrics.Handler writes them as they come), so it makes a pass over
// the rules, or their backends, per family; a pass reads only what its
// family needs. The per-rule totals are summed in a first pass over the
// backends, so a rule's totals and its backends' are read a few
// milliseconds apart, not at once.
func (d *daemon) collectRules(s metrics.Sink, st *publishedStatus) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rules := st.Rules
	in := statsInputs{checker: d.checker}
	if s.Wants(metrics.ScopeBackend) {
		in = d.statsInputs(ctx, nil) // backends.go: the connection tally of every rule
	} else if e := d.engine; e != nil && e.Snapshot() != nil {
		in.bstats = e.BackendStats() // the totals alone
	}
	if s.Wants(metrics.ScopeRule) {
		for _, r := range rules {
			s.Add(mRuleTier, 1, r.Name, r.VIP.String(), r.Tier)
		}
		for _, r := range rules {
			if r.Rule != nil && r.Rule.Service != "" {
				s.Add(mRuleService, 1, r.Name, r.Rule.Service)
			}
		}
		for _, r := range rules {
			n := 0
			for _, ev := range r.State.History {
				if ev.Kind == failover.EventTierSwitch {
					n++
				}
			}
			s.Add(mRuleSwitches, float64(n), r.Name)
		}
		totals := make([]dataplane.Totals, len(rules))
		for ri, r := range rules {
			for bi := range r.State.Backends {
				t, _ := in.totals([2]uint32{uint32(r.Slot), r.State.Backends[bi].ID})
				totals[ri].Packets, totals[ri].Bytes, totals[ri].Conns = totals[ri].Packets+t.Packets, totals[ri].Bytes+t.Bytes, totals[ri].Conns+t.Conns
			}
		}
		for ri, r := range rules {
			s.Add(mRulePackets, float64(totals[ri].Packets), r.Name)
		}
		for ri, r := range rules {
			s.Add(mRuleBytes, float64(totals[ri].Bytes), r.Name)
		}
		for ri, r := range rules {
			s.Add(mRuleConns, float64(totals[ri].Conns), r.Name)
		}
	}
	if !s.Wants(metrics.ScopeBackend) {
		return
	}
	each := func(fn func(r *ruleStatus, b *failover.BackendState, service string)) {
		for _, r := range rules {
			service := r.Name // a rule with its own backends is its own service
			if r.Rule != nil {
				service = r.Rule.ServiceName()
			}
			for bi := range r.State.Backends {
				fn(r, &r.State.Backends[bi], service)
			}
		}
	}
	each(func(r *ruleStatus, b *failover.BackendState, service string) {
		s.Add(mHealthy, boolValue(b.Health == failover.HealthHealthy), r.Name, service, b.Name)
	})
	each(func(r *ruleStatus, b *failover.BackendState, _ string) {
		s.Add(mEligible, boolValue(b.Eligible), r.Name, b.Name)
	})
	each(func(r *ruleStatus, b *failover.BackendState, _ string) {
		if r.Rule == nil || r.Rule.LocalityLBPolicy == config.WeightedMaglev { // plain MAGLEV has no weights to report
			s.Add(mWeight, float64(b.Weight), r.Name, b.Name, b.WeightState.String())
		}
	})
	for _, f := range []*metrics.Family{mBEPackets, mBEBytes, mBEConns} {
		each(func(r *ruleStatus, b *failover.BackendState, _ string) {
			t, _ := in.totals([2]uint32{uint32(r.Slot), b.ID})
			v := t.Packets
			switch f {
			case mBEBytes:
				v = t.Bytes
			case mBEConns:
				v = t.Conns
			}
			s.Add(f, float64(v), r.Name, b.Name)
		})
	}
	if in.conns.ok {
		for _, f := range []*metrics.Family{mBEActive, mBEInactive} {
			each(func(r *ruleStatus, b *failover.BackendState, _ string) {
				active, inactive := in.conns.of([2]uint32{uint32(r.Slot), b.ID})
				if f == mBEInactive {
					active = inactive
				}
				s.Add(f, float64(active), r.Name, b.Name)
			})
		}
	}
	if in.checker == nil {
		return
	}
	// The health checks' status, read once per backend (the checker's lock
	// for a lookup each) for the four families that show it: 32 bytes a
	// backend, as the connection tally.
	n := 0
	for _, r := range rules {
		n += len(r.State.Backends)
	}
	checks := make([]checkValues, 0, n)
	each(func(r *ruleStatus, b *failover.BackendState, _ string) {
		addr, _ := netip.ParseAddr(b.Name)
		pk := probeKey{r.Name, addr}
		if r.Rule != nil {
			pk = d.probeKeyOf(r.Rule, addr) // services.go
		}
		var c checkValues
		if hs, ok := in.check(pk); ok && !hs.LastProbe.IsZero() {
			c = checkValues{hs.LastLatency.Seconds(), float64(hs.LastProbe.UnixNano()) / 1e9, float64(hs.Since.UnixNano()) / 1e9, float64(hs.Changes)}
		}
		checks = append(checks, c)
	})
	for fi, f := range []*metrics.Family{mCheckLatency, mCheckLast, mHealthSince, mHealthFlaps} {
		i := 0
		each(func(r *ruleStatus, b *failover.BackendState, service string) {
			c := &checks[i]
			i++
			if c[1] != 0 { // probed
				s.Add(f, c[fi], r.Name, service, b.Name)
			}
		})
	}
}

// checkValues are a backend's health check figures as the families show
// them: the last probe's latency and end, when the health last changed,
// and the changes; zero before the first probe.
type checkValues [4]float64

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
