package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/health"
)

// probe is the last health verdict of one (rule, backend).
type probe struct {
	health      failover.Health
	weight      uint32
	weightState failover.WeightState
	lastError   string
	since       time.Time
}

type probeKey struct {
	rule string
	addr netip.Addr
}

// healthOptions are the checker's: verdicts to onHealth, the probes of
// data-path rules through dialProbe (probepath.go), and a warning when its
// bound on probes in flight makes probes late.
func (d *daemon) healthOptions() health.Options {
	return health.Options{OnChange: d.onHealth, Dial: d.dialProbe, OnLate: d.probesLate}
}

// probesLate logs, at most once a minute (health.LateReportEvery), that
// probes started late because the checker's probes in flight, each a
// socket, were at their bound: half the open-file limit, the other half
// being the control plane's (pkg/health doc.go, "Decisions").
func (d *daemon) probesLate(late uint64, maxInFlight int) {
	d.log.Warn("health probes started late since the last such line: probes in flight at their bound (half the open-file limit), checks run less often than their interval",
		"late_probes", late, "max_in_flight", maxInFlight)
}

// onHealth receives a prober's change (on a prober goroutine).
func (d *daemon) onHealth(s health.Status) {
	p := probe{health: s.Health, weight: s.Weight, weightState: s.WeightState, since: s.Since}
	if s.LastError != nil {
		p.lastError = s.LastError.Error()
	}
	d.pendingMu.Lock()
	d.pendingProbes[probeKey{s.Rule, s.Backend}] = p
	d.pendingMu.Unlock()
	select {
	case d.healthPoke <- struct{}{}:
	default:
	}
}

// applyProbes moves the parked health changes into d.probes and reports
// whether any verdict or weight changed.
func (d *daemon) applyProbes() bool {
	d.pendingMu.Lock()
	pending := d.pendingProbes
	d.pendingProbes = map[probeKey]probe{}
	d.pendingMu.Unlock()
	changed := false
	for k, p := range pending {
		if d.probers.prober(k.rule, k.addr) != k.rule {
			// Parked by a prober a reload has since handed to another
			// rule of its share group (services.go): read by nobody.
			continue
		}
		old, had := d.probes[k]
		if !had || old.health != p.health || old.weight != p.weight || old.weightState != p.weightState {
			changed = true
			d.touchVerdict(k.rule) // publish.go: the rules whose verdicts changed are computed again
			if f, ok := d.probers.followers(k); ok && f.service == "" {
				d.touchVerdict(f.rules...) // a service's rules are touched with it (publish.go)
			}
			// A first report that is still UNKNOWN (a new prober's first
			// pass learnt a weight, its healthy_threshold not yet met) is
			// no verdict: not an event, not a log line (10 000 of them at a
			// start with 10 000 probers). A key without one reads UNKNOWN.
			if old.health != p.health {
				from := ""
				if had {
					from = old.health.String()
				}
				d.healthChanged(k, from, p)
			}
		}
		d.setProbe(k, p) // and the state document's bucket (docparts.go)
		if r := d.restart; r != nil && r.changed != nil {
			r.changed[k] = struct{}{} // for the cut-over (carriedVerdicts)
		}
	}
	return changed
}

// healthChanged records a verdict change of key as an event and a log
// line. A shared verdict (services.go) names what it decides: a backend
// service's its service, and every rule of its share group that has the
// backend, with the rule whose probe decided; a verdict no other rule
// shares names its rule alone.
func (d *daemon) healthChanged(k probeKey, from string, p probe) {
	e := control.RuleEvent{Kind: eventHealth, Rule: k.rule, Backend: k.addr.String(), From: from, To: p.health.String(), Reason: p.lastError}
	attrs := []any{"rule", k.rule}
	if f, ok := d.probers.followers(k); ok {
		e.Service, e.Rules = f.service, f.rules
		attrs = []any{"rules", strings.Join(f.rules, ","), "probe_rule", k.rule}
		if f.service != "" {
			attrs = append([]any{"backend_service", f.service}, attrs...)
		}
	}
	d.events.add(e)
	// A backend going down is what an operator greps for.
	level := slog.LevelInfo
	if p.health == failover.HealthUnhealthy {
		level = slog.LevelWarn
	}
	attrs = append(attrs, "backend", k.addr, "health", p.health.String(), "weight", p.weight, "weight_state", p.weightState.String(), "error", p.lastError)
	d.log.Log(context.Background(), level, "health", attrs...)
}

// startHealth starts the checker on every target.
func (d *daemon) startHealth() error {
	d.prepareHealth()
	return d.startProbes()
}

// prepareHealth makes the checker, without a target, and groups the
// rules' probes (services.go), which the first publication reads.
func (d *daemon) prepareHealth() {
	d.checker = health.New(d.healthOptions())
	d.regroupProbes(nil)
}

// startProbes gives the checker a prober for every backend of every rule
// that checks health, each starting from the verdict its key has, and
// says how many probers the checked backends take: fewer than the
// backends when rules share probes (services.go). A successor calls it
// at the cut-over, not while it prepares (successor.go).
func (d *daemon) startProbes() error {
	ts := d.healthTargetsOf(nil)
	if err := d.checker.Set(ts); err != nil {
		return err
	}
	checked := 0
	for _, r := range d.cfg.Rules {
		if r.HealthCheck.Type != config.HealthNone {
			checked += r.BackendCount()
		}
	}
	d.log.Info("health checks", "targets", len(ts), "rule_backends", checked)
	return nil
}

// carriedVerdicts lists what the successor of restart r starts its
// probers from beyond the state document: the verdicts this daemon
// applied since it offered the document, overlaid with the reports its
// checker parked that the control goroutine has not applied yet. A
// parked report of a key that is no longer its group's prober is left
// out, as applyProbes would leave it.
func (d *daemon) carriedVerdicts(r *restartUnderWay) []probeState {
	out := make([]probeState, 0, len(r.changed))
	d.pendingMu.Lock()
	defer d.pendingMu.Unlock()
	for k := range r.changed {
		if _, parked := d.pendingProbes[k]; !parked {
			out = append(out, stateOf(k, d.probes[k]))
		}
	}
	for k, p := range d.pendingProbes {
		if d.probers.prober(k.rule, k.addr) != k.rule {
			continue
		}
		out = append(out, stateOf(k, p))
	}
	return out
}

// takeVerdicts applies the predecessor's carried verdicts at the cut-over
// (before startProbes, so the probers start from them), each under this
// daemon's prober of its group: a successor groups the probes afresh and
// may choose another rule of a group as its prober. A report of a rule
// or backend this daemon's configuration no longer has is dropped.
func (d *daemon) takeVerdicts(carried []probeState) {
	if len(carried) == 0 {
		return
	}
	rules := make(map[string]*config.Rule, len(d.cfg.Rules))
	for _, r := range d.cfg.Rules {
		rules[r.Name] = r
	}
	has := func(r *config.Rule, a netip.Addr) bool {
		for _, b := range r.Backends() {
			if b.Addr == a {
				return true
			}
		}
		return false
	}
	d.pendingMu.Lock()
	for _, s := range carried {
		r := rules[s.Rule]
		if r == nil || r.HealthCheck.Type == config.HealthNone || !has(r, s.Addr) {
			continue
		}
		d.pendingProbes[d.probeKeyOf(r, s.Addr)] = s.probe()
	}
	d.pendingMu.Unlock()
	d.applyProbes()
}

// healthTargetsOf returns the targets of the rules in only (nil: every
// rule), with the share groups' probers as they are. A target whose key
// has a verdict — carried by `xlb restart`, or moved to a new prober by a
// regrouping — starts from it (health.Target.From): a new prober starting
// from UNKNOWN reports its first pass's weight with the health UNKNOWN
// under a healthy_threshold above 1, which replaced the verdict and took
// the backend out of every rule that reads it until the next probe.
func (d *daemon) healthTargetsOf(only map[string]bool) []health.Target {
	var ts []health.Target
	for i := range d.cfg.Rules {
		r := d.cfg.Rules[i]
		if r.HealthCheck.Type == config.HealthNone || (only != nil && !only[r.Name]) {
			continue
		}
		check := checkOf(r.HealthCheck)
		dataPathHost(r, &check) // probepath.go
		for _, gb := range r.Backends() {
			if d.probeKeyOf(r, gb.Addr).rule != r.Name {
				continue // another rule of its share group probes it
			}
			t := health.Target{Key: health.Key{Rule: r.Name, Backend: gb.Addr}, Check: check}
			if p, ok := d.probes[probeKey{r.Name, gb.Addr}]; ok {
				t.From = &health.Verdict{Health: p.health, Weight: p.weight, WeightState: p.weightState, Since: p.since}
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// checkOf is the prober's view of a rule's [health_check].
func checkOf(hc config.HealthCheck) health.Check {
	return health.Check{
		Kind:               healthKinds.of(hc.Type),
		Port:               hc.Port,
		TLS:                hc.TLS,
		RequestPath:        hc.RequestPath,
		Host:               hc.Host,
		Request:            hc.Request,
		Response:           hc.Response,
		ProxyHeader:        proxyHeaders.of(hc.ProxyHeader),
		GRPCServiceName:    hc.GRPCServiceName,
		Direct:             hc.Path == config.ProbeDirect, // else through dialProbe (probepath.go)
		Interval:           hc.Interval,
		Timeout:            hc.Timeout,
		HealthyThreshold:   hc.HealthyThreshold,
		UnhealthyThreshold: hc.UnhealthyThreshold,
	}
}

// minHealthPublish is the shortest time between two recomputations caused
// by health or weight changes.
const minHealthPublish = 250 * time.Millisecond

// healthPublishShare bounds the control goroutine's time spent on
// publications caused by health verdicts: after one that took d, the next
// starts at least healthPublishShare × d after it ended, so at most
// 1 / (1 + healthPublishShare) of the time goes to them however slow a
// publication is (it grows with the rules) and however many verdicts
// arrive.
const healthPublishShare = 4

// healthPacer paces the publications that health verdicts cause. The
// first change after a quiet spell is published at once (a failing
// backend leaves the eligible set without delay); the changes that arrive
// until the next may start are held and published together then: at
// least minHealthPublish after the last one started, and at least
// healthPublishShare times its duration after it ended. A weight header
// that oscillates, or 10 000 backends' verdicts, cost one rebuild per gap.
type healthPacer struct {
	start, end time.Time // of the last health publication
}

// hold returns how long verdicts that arrive at now wait (0: publish now).
func (p *healthPacer) hold(now time.Time) time.Duration {
	next := p.start.Add(minHealthPublish)
	if n := p.end.Add(healthPublishShare * p.end.Sub(p.start)); n.After(next) {
		next = n
	}
	return max(0, next.Sub(now))
}

// published records a publication that began at start and ended at end.
func (p *healthPacer) published(start, end time.Time) { p.start, p.end = start, end }

// publishHealth publishes the verdicts applied so far (control goroutine).
func (d *daemon) publishHealth(p *healthPacer) {
	start := time.Now()
	if err := d.publish(); err != nil {
		d.log.Error("recompute after health change", "err", err)
	}
	p.published(start, time.Now())
}

// applyHealth sets the health of one backend: the prober's verdict (NONE:
// always healthy), or UNKNOWN while its next hop is unresolved, because a
// backend whose MAC is unknown cannot receive anything
// (docs/design.md#health-checks).
// Until its rule is warm (warm false) verdicts are held back: every
// checked backend is UNKNOWN, as at start (warmup.go, the start-up herd).
func (d *daemon) applyHealth(r *config.Rule, addr netip.Addr, fb *failover.Backend, warm bool) {
	if r.HealthCheck.Type == config.HealthNone {
		fb.Health, fb.Weight, fb.WeightState = failover.HealthHealthy, 0, failover.WeightMissing
	} else if p, ok := d.probes[d.probeKeyOf(r, addr)]; ok && warm {
		fb.Health, fb.Weight, fb.WeightState = p.health, p.weight, p.weightState
	} else {
		fb.Health, fb.WeightState = failover.HealthUnknown, failover.WeightUnavailable
	}
	if nh, ok := d.nexthops[nhKey{addr, r.Encap.Type == config.EncapDirect}]; !ok || nh.err != nil {
		fb.Health = failover.HealthUnknown
	}
}
