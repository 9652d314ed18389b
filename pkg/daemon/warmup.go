package daemon

import (
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
)

// First round of health checks ("warm").
//
// A rule is warm once a snapshot was published whose failover input held a
// health verdict (HEALTHY or UNHEALTHY, not UNKNOWN) for every backend the
// rule checks — the verdicts as published, not merely as logged: health
// changes are coalesced into one publication per 250 ms. A rule whose
// health check is NONE is warm at its first publication. A rule that never
// gets every verdict (a backend whose probes alternate pass and fail never
// leaves UNKNOWN with thresholds ≥ 2) is warm once its warm-up deadline
// passed: the time its slowest backend needs for a verdict (first probe
// within one interval, then max(healthy, unhealthy threshold) probes of at
// most 1.1 × interval + timeout each) plus a second; that is logged with
// the backends still without a verdict.
//
// Warm is latched per rule for the process's life: a backend added to a
// warm rule by a reload does not make it cold again (the fleet got the
// same reload; withdrawing a serving VIP for it would move flows for
// nothing). A rule added by a reload starts cold.
//
// Users: the BGP announcer (bgp.go) announces a VIP only when every rule of
// it is warm, so an appliance that (re)starts computes the same tables as its
// peers before the routers send it traffic. And the start-up herd
// (docs/design.md#health-checks): until its rule is warm, no backend's
// verdict enters the rule's failover input (applyHealth), so the rule stays
// on its start-up set — every checked backend UNKNOWN, which is LAST_RESORT:
// all backends (EMPTY with drop_traffic_if_unhealthy) — and switches once, at
// the publication that makes it warm, to the set all verdicts give. Before,
// the first backend to pass took every new connection until the others
// passed. As Envoy's cluster warming, but the rule serves meanwhile (a fleet
// withdraws its VIPs instead, bgp.go). Status says so in the rule's reason.
// The fallback deadline is warm's: a verdict needs the threshold's probes, so
// "one interval plus timeout" would cut a healthy_threshold of 2 short; a
// restart carries verdicts and warm (handover.go), so a restarted daemon does
// not hold its rules again.
type warmState struct {
	since   time.Time // the rule's first computation
	warm    bool
	at      time.Time    // when it became warm
	pending []netip.Addr // backends without a verdict at the last publication
}

// warmDeadline is how long a rule with check hc waits for its backends'
// first verdicts before it is taken as warm anyway.
func warmDeadline(hc config.HealthCheck) time.Duration {
	if hc.Type == config.HealthNone {
		return 0
	}
	n := time.Duration(max(hc.HealthyThreshold, hc.UnhealthyThreshold))
	return hc.Interval + n*(hc.Interval*11/10+hc.Timeout) + time.Second
}

// warmCheck says whether rule rv would be warm with the verdicts the
// publication under way uses; it changes nothing (publish latches it once
// the snapshot is out).
func (d *daemon) warmCheck(rv *config.RuleView, rt *ruleRuntime, now time.Time) (warm bool, pending []netip.Addr) {
	if rt.warm.warm {
		return true, nil
	}
	r := rv.Rule
	if r.HealthCheck.Type != config.HealthNone {
		for _, b := range rv.Backends {
			if p, ok := d.probes[d.probeKeyOf(r, b.Addr)]; !ok || p.health == failover.HealthUnknown {
				pending = append(pending, b.Addr)
			}
		}
	}
	since := rt.warm.since
	if since.IsZero() {
		since = now
	}
	return len(pending) == 0 || now.Sub(since) >= warmDeadline(r.HealthCheck), pending
}

// latchWarm records the outcome of warmCheck for a published rule.
func (d *daemon) latchWarm(name string, rt *ruleRuntime, warm bool, pending []netip.Addr, now time.Time) {
	w := &rt.warm
	if w.since.IsZero() {
		w.since = now
	}
	w.pending = pending
	if warm && !w.warm {
		w.warm, w.at = true, now
		if len(pending) == 0 {
			d.log.Info("rule warm: every backend's first health verdict is in the published snapshot", "rule", name, "after", now.Sub(w.since).Round(time.Millisecond))
		} else {
			d.log.Warn("rule warm by deadline: backends still without a health verdict count as not healthy", "rule", name, "after", now.Sub(w.since).Round(time.Millisecond), "pending", pending)
		}
	}
}
