package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/control"
)

// parkVerdict hands d a prober's report p and applies it, without
// publishing (the health pacer holds it).
func parkVerdict(d *daemon, rule, backend string, p probe) error {
	return do(d, func() error {
		d.pendingProbes[probeKey{rule, addr(backend)}] = p
		if !d.applyProbes() {
			return fmt.Errorf("%s %s: no change applied", rule, backend)
		}
		return nil
	})
}

// statusOf is rule name's published status row.
func statusOf(t *testing.T, d *daemon, name string) *ruleStatus {
	t.Helper()
	for _, rs := range d.Status().Rules {
		if rs.Name == name {
			return rs
		}
	}
	t.Fatalf("rule %s not in the published status", name)
	return nil
}

// TestColdRuleRecountsPendingOnly: while a rule is cold, a publication of
// verdicts for some of its backends publishes the rule as it was (the
// same *dataplane.Rule and failover state: its input holds no verdict
// until it is warm) with the backends still pending; the verdict that
// makes it warm computes it, and its eligible set follows the verdicts.
func TestColdRuleRecountsPendingOnly(t *testing.T) {
	x, y, z := "198.51.100.10", "198.51.100.11", "198.51.100.12"
	d, _ := healthDaemon(t, map[string]string{
		"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup(x, y, z)),
	}, []netip.Addr{addr(x), addr(y), addr(z)})
	first := statusOf(t, d, "a")
	if first.Warm || len(first.Pending) != 3 {
		t.Fatalf("at start: warm %v, pending %v; want cold with 3 pending", first.Warm, first.Pending)
	}
	for _, step := range []struct {
		backend string
		health  failover.Health
		pending []netip.Addr
	}{
		{x, failover.HealthHealthy, []netip.Addr{addr(y), addr(z)}},
		{y, failover.HealthUnhealthy, []netip.Addr{addr(z)}},
	} {
		if err := parkVerdict(d, "a", step.backend, probe{health: step.health}); err != nil {
			t.Fatal(err)
		}
		if err := do(d, d.publish); err != nil {
			t.Fatal(err)
		}
		s := statusOf(t, d, "a")
		if s.Warm || !slices.Equal(s.Pending, step.pending) {
			t.Errorf("after %s's verdict: warm %v, pending %v; want cold, pending %v", step.backend, s.Warm, s.Pending, step.pending)
		}
		if s.Built != first.Built || s.State != first.State {
			t.Errorf("after %s's verdict: the cold rule was computed again", step.backend)
		}
	}
	if err := parkVerdict(d, "a", z, probe{health: failover.HealthHealthy}); err != nil {
		t.Fatal(err)
	}
	if err := do(d, d.publish); err != nil {
		t.Fatal(err)
	}
	s := statusOf(t, d, "a")
	if !s.Warm || len(s.Pending) != 0 {
		t.Fatalf("after every verdict: warm %v, pending %v; want warm", s.Warm, s.Pending)
	}
	if s.Built == first.Built {
		t.Fatal("the rule that turned warm was not computed again")
	}
	if s.Eligible != 2 {
		t.Errorf("eligible %d, want 2 (x and z healthy, y not)", s.Eligible)
	}
	if _, in := s.Built.Table.Slots(y); in {
		t.Errorf("the unhealthy %s has slots", y)
	}
}

// TestChangeLeavesVerdictsToHealthPublication: a reload or a CLI change
// computes the rules it changed and not those whose verdicts wait for the
// health pacer's next publication; that publication then computes them.
func TestChangeLeavesVerdictsToHealthPublication(t *testing.T) {
	x, y, z, w := "198.51.100.10", "198.51.100.11", "198.51.100.20", "198.51.100.21"
	d, dir := healthDaemon(t, map[string]string{
		"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup(x, y)),
		"rules.d/b.toml": vipRule("203.0.113.11", "", healthGroup(z)),
	}, []netip.Addr{addr(x), addr(y), addr(z), addr(w)})
	for _, v := range [][2]string{{"a", x}, {"a", y}, {"b", z}} {
		if err := parkVerdict(d, v[0], v[1], probe{health: failover.HealthHealthy}); err != nil {
			t.Fatal(err)
		}
	}
	if err := do(d, d.publish); err != nil {
		t.Fatal(err)
	}
	if !statusOf(t, d, "a").Warm || !statusOf(t, d, "b").Warm {
		t.Fatal("the rules are not warm after every verdict")
	}
	o := &ops{d: d}
	for i, step := range []struct {
		name   string
		change func() error
	}{
		{"reload adding a backend to b", func() error {
			reloadWith(t, d, dir, map[string]string{"rules.d/b.toml": vipRule("203.0.113.11", "", healthGroup(z, w))})
			return nil
		}},
		{"cli drain in b", func() error {
			_, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "b", Backend: z})
			return err
		}},
	} {
		// a's y goes down (then up): the verdict is applied and held.
		h := failover.HealthUnhealthy
		if i%2 == 1 {
			h = failover.HealthHealthy
		}
		if err := parkVerdict(d, "a", y, probe{health: h}); err != nil {
			t.Fatal(err)
		}
		before, beforeB := statusOf(t, d, "a").Built, statusOf(t, d, "b").Built
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if statusOf(t, d, "b").Built == beforeB {
			t.Errorf("%s: b, which it changed, was not computed", step.name)
		}
		if statusOf(t, d, "a").Built != before {
			t.Errorf("%s: a, whose verdict waits for the health publication, was computed", step.name)
		}
		if err := do(d, d.publish); err != nil {
			t.Fatal(err)
		}
		after := statusOf(t, d, "a").Built
		if after == before {
			t.Errorf("%s: the health publication did not compute a", step.name)
		}
		if _, in := after.Table.Slots(y); in != (h == failover.HealthHealthy) {
			t.Errorf("%s: %s in a's table %v after its verdict %s", step.name, y, in, h)
		}
	}
}

// TestFirstUnknownReportIsNoEvent: a new prober's first pass under a
// healthy_threshold above 1 reports a weight with the health still
// UNKNOWN; that is no verdict — no event — while the first verdict that
// follows is one.
func TestFirstUnknownReportIsNoEvent(t *testing.T) {
	x := "198.51.100.10"
	d, _ := healthDaemon(t, map[string]string{
		"rules.d/a.toml": vipRule("203.0.113.10", "", healthGroup(x)),
	}, []netip.Addr{addr(x)})
	health := func() []string {
		var out []string
		for _, e := range d.events.list() {
			if e.Kind == eventHealth {
				out = append(out, e.From+"→"+e.To)
			}
		}
		return out
	}
	for _, step := range []struct {
		health failover.Health
		want   string
	}{
		{failover.HealthUnknown, ""},
		{failover.HealthHealthy, "UNKNOWN→HEALTHY"},
	} {
		if err := parkVerdict(d, "a", x, probe{health: step.health, weight: 1, weightState: failover.WeightOK}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(health(), " "); got != step.want {
			t.Errorf("after a report %s: health events %q, want %q", step.health, got, step.want)
		}
	}
}
