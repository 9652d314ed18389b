package daemon

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/health"
)

// report is a checker's report of rule's backend a.
func report(rule, a string, h failover.Health, lastErr string) health.Status {
	s := health.Status{Key: health.Key{Rule: rule, Backend: addr(a)}, Health: h, Weight: 1}
	if lastErr != "" {
		s.LastError = errors.New(lastErr)
	}
	return s
}

// TestVerdictsAcrossCutover: the health verdicts the predecessor applied
// while its successor prepared, and the reports it parked and had not
// applied yet, cross the cut-over and reach the successor's prober of
// each group, and its probers start from them.
// The predecessor's prober of x is b (it kept b when a reload added a
// before it); the successor groups afresh and probes x from a. A report
// parked under a, which b's group no longer reads in the predecessor, is
// not carried; nor are reports of a rule or a backend the successor's
// configuration does not have.
func TestVerdictsAcrossCutover(t *testing.T) {
	x, y := "198.51.100.10", "198.51.100.11"
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newD := func(files map[string]string, probes map[probeKey]probe) *daemon {
		return &daemon{cfg: loadRules(t, files), log: quiet, probes: probes, pendingProbes: map[probeKey]probe{},
			nexthops: map[nhKey]nexthop{{addr(x), false}: {}, {addr(y), false}: {}}}
	}

	// The predecessor: b first, then a reload adds a; b stays the prober.
	pred := newD(map[string]string{"rules.d/b.toml": vipRule("203.0.113.11", "", healthGroup(x))}, map[probeKey]probe{})
	pred.regroupProbes(nil)
	pred.cfg = loadRules(t, map[string]string{
		"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup(x, y)),
		"rules.d/b.toml": vipRule("203.0.113.11", "", healthGroup(x)),
	})
	pred.regroupProbes(nil)
	if p := pred.probers.prober("a", addr(x)); p != "b" {
		t.Fatalf("the predecessor's prober of x for a is %q, want b (kept across the reload)", p)
	}
	healthy := probe{health: failover.HealthHealthy, weight: 1}
	pred.probes[probeKey{"b", addr(x)}] = healthy
	pred.probes[probeKey{"a", addr(y)}] = healthy
	doc := []probeState{{Rule: "b", Addr: addr(x), Health: failover.HealthHealthy, Weight: 1}, {Rule: "a", Addr: addr(y), Health: failover.HealthHealthy, Weight: 1}}

	// The offer went out: the predecessor serves on and applies y's
	// failure, a verdict the state document does not have.
	r := &restartUnderWay{changed: map[probeKey]struct{}{}}
	pred.restart = r
	pred.onHealth(report("a", y, failover.HealthUnhealthy, "timeout"))
	if !pred.applyProbes() || pred.probes[probeKey{"a", addr(y)}].health != failover.HealthUnhealthy {
		t.Fatalf("the predecessor did not apply y's failure while its successor prepared: %+v", pred.probes[probeKey{"a", addr(y)}])
	}
	// Then x fails, parked and not applied yet when the cut-over comes; a
	// stale report of x under a (parked before the reload) waits too.
	pred.onHealth(report("b", x, failover.HealthUnhealthy, "connection refused"))
	pred.onHealth(report("a", x, failover.HealthHealthy, ""))
	pred.onHealth(report("gone", x, failover.HealthUnhealthy, "connection refused")) // a rule the successor's configuration drops
	carried := pred.carriedVerdicts(r)
	for _, s := range carried {
		if s.Rule == "a" && s.Addr == addr(x) {
			t.Errorf("carried %+v: a does not probe x in the predecessor", s)
		}
	}
	if len(carried) != 3 {
		t.Errorf("carried %+v, want a's y, b's x and gone's x", carried)
	}
	raw, err := json.Marshal(carried) // as cutoverBody.Probes
	if err != nil {
		t.Fatal(err)
	}
	var got []probeState
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}

	// The successor, as prepareSuccessor leaves it: the document's
	// verdicts, grouped afresh (a probes x now).
	succ := newD(map[string]string{
		"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup(x, y)),
		"rules.d/b.toml": vipRule("203.0.113.11", "", healthGroup(x)),
	}, map[probeKey]probe{})
	for _, s := range doc {
		succ.probes[probeKey{s.Rule, s.Addr}] = probe{health: s.Health, weight: s.Weight}
	}
	succ.regroupProbes(nil)
	if p := succ.probers.prober("b", addr(x)); p != "a" {
		t.Fatalf("the successor's prober of x is %q, want a", p)
	}
	succ.takeVerdicts(got)
	if p := succ.probes[probeKey{"a", addr(x)}]; p.health != failover.HealthUnhealthy || p.lastError != "connection refused" {
		t.Errorf("the successor's verdict of x: %+v, want the predecessor's UNHEALTHY", p)
	}
	if _, ok := succ.probes[probeKey{"gone", addr(x)}]; ok {
		t.Errorf("a verdict of rule gone, which the successor does not have, was taken")
	}
	if p := succ.probes[probeKey{"a", addr(y)}]; p.health != failover.HealthUnhealthy || p.lastError != "timeout" {
		t.Errorf("y: %+v, want the predecessor's UNHEALTHY, applied after its document", p)
	}
	if !succ.pub.verdicts["a"] || !succ.pub.verdicts["b"] {
		t.Errorf("rules touched by the verdict %v, want a and b (both read x)", succ.pub.verdicts)
	}
	events := succ.events.list()
	if len(events) != 2 {
		t.Errorf("events %+v, want x and y HEALTHY → UNHEALTHY once each", events)
	}
	for _, e := range events {
		if e.From != "HEALTHY" || e.To != "UNHEALTHY" {
			t.Errorf("event %+v, want HEALTHY → UNHEALTHY", e)
		}
	}
	for _, tg := range succ.healthTargetsOf(nil) {
		if tg.From == nil || tg.From.Health != failover.HealthUnhealthy {
			t.Errorf("target %s %s starts from %+v, want UNHEALTHY", tg.Rule, tg.Backend, tg.From)
		}
	}
}
