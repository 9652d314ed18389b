package failover

import (
	"testing"
	"time"
)

// A step of a scenario: the inputs at one moment and what to expect.
type step struct {
	after    time.Duration // clock advance before this step
	backends []Backend
	tier     Tier
	eligible string
}

func runSteps(t *testing.T, p Policy, gs []Group, steps []step) []*State {
	t.Helper()
	clk := newClock()
	var prev *State
	var out []*State
	for i, s := range steps {
		now := clk.Advance(s.after)
		st := mustCompute(t, p, gs, s.backends, prev, now)
		if st.Tier != s.tier || names(st.Eligible, false) != s.eligible {
			t.Fatalf("step %d (+%v): tier %v eligible %q, want %v %q (reason %q)", i, now.Sub(t0), st.Tier, names(st.Eligible, false), s.tier, s.eligible, st.Reason)
		}
		out = append(out, st)
		prev = st
	}
	return out
}

func pf() []Group { return []Group{primary("p"), failoverGroup("f")} }

func pfBackends(p1, p2, f1 Health) []Backend {
	return []Backend{be("p1", "p", p1), be("p2", "p", p2), be("f1", "f", f1)}
}

// Going back to the primaries waits until their condition has held for
// failback_delay (docs/design.md#eligible-backends).
func TestFailbackDelayHysteresis(t *testing.T) {
	p := DefaultPolicy()
	p.FailbackDelay = 30 * time.Second
	sts := runSteps(t, p, pf(), []step{
		{backends: pfBackends(up, up, up), tier: TierPrimary, eligible: "p1 p2"},
		{after: time.Second, backends: pfBackends(down, down, up), tier: TierFailover, eligible: "f1"},
		// primaries back: failback waits 30 s
		{after: time.Second, backends: pfBackends(up, down, up), tier: TierFailover, eligible: "f1"},
		{after: 29 * time.Second, backends: pfBackends(up, down, up), tier: TierFailover, eligible: "f1"},
		// condition broke: the wait starts again
		{after: time.Second, backends: pfBackends(down, down, up), tier: TierFailover, eligible: "f1"},
		{after: time.Second, backends: pfBackends(up, up, up), tier: TierFailover, eligible: "f1"},
		{after: 29 * time.Second, backends: pfBackends(up, up, up), tier: TierFailover, eligible: "f1"},
		{after: time.Second, backends: pfBackends(up, up, up), tier: TierPrimary, eligible: "p1 p2"},
		// switch away from primaries is immediate
		{after: time.Second, backends: pfBackends(down, down, up), tier: TierFailover, eligible: "f1"},
		// failover lost while waiting: primaries at once, no waiting
		{after: time.Second, backends: pfBackends(up, down, up), tier: TierFailover, eligible: "f1"},
		{after: time.Second, backends: pfBackends(up, down, down), tier: TierPrimary, eligible: "p1"},
	})
	if got, want := sts[2].FailbackPendingSince, t0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("pending since %v, want %v", got, want)
	}
	if got, want := sts[2].NextCompute, t0.Add(32*time.Second); !got.Equal(want) {
		t.Errorf("NextCompute %v, want %v", got, want)
	}
	if !sts[4].FailbackPendingSince.IsZero() {
		t.Errorf("pending not reset when the condition broke")
	}
	if !sts[7].FailbackPendingSince.IsZero() || len(sts[7].Events) != 1 || sts[7].Events[0].From != TierFailover || sts[7].Events[0].To != TierPrimary {
		t.Errorf("failback: pending %v, events %+v", sts[7].FailbackPendingSince, sts[7].Events)
	}
}

func TestFailbackDelayZeroIsImmediate(t *testing.T) {
	runSteps(t, DefaultPolicy(), pf(), []step{
		{backends: pfBackends(down, down, up), tier: TierFailover, eligible: "f1"},
		{after: time.Millisecond, backends: pfBackends(up, down, up), tier: TierPrimary, eligible: "p1"},
	})
}

// docs/design.md#draining-on-failover, connection_drain_on_failover = false:
// flush the rule's entries at each switch (and only at a switch between
// primary and failover backends).
func TestDrainOnFailoverOffFlushes(t *testing.T) {
	p := DefaultPolicy()
	p.ConnectionDrainOnFailover = false
	sts := runSteps(t, p, pf(), []step{
		{backends: pfBackends(up, up, up), tier: TierPrimary, eligible: "p1 p2"},
		{after: time.Second, backends: pfBackends(down, down, up), tier: TierFailover, eligible: "f1"},
		{after: time.Second, backends: pfBackends(up, down, up), tier: TierPrimary, eligible: "p1"},
		// primary → last resort (both primaries): no switch, no flush
		{after: time.Second, backends: pfBackends(down, down, down), tier: TierLastResort, eligible: "p1 p2"},
		// last resort (primaries) → failover: a switch
		{after: time.Second, backends: pfBackends(down, down, up), tier: TierFailover, eligible: "f1"},
		// failover → primary fallback: back on primaries, a switch
		{after: time.Second, backends: []Backend{be("p1", "p", up), be("p2", "p", down), be("f1", "f", down)}, tier: TierPrimary, eligible: "p1"},
	})
	want := []uint64{0, 1, 2, 2, 3, 4}
	for i, st := range sts {
		if st.FlushGen != want[i] {
			t.Errorf("step %d: FlushGen %d, want %d", i, st.FlushGen, want[i])
		}
		for _, b := range st.Backends {
			if b.DrainGen != 0 {
				t.Errorf("step %d: %s DrainGen %d without drain on failover", i, b.Name, b.DrainGen)
			}
		}
	}
	if ev := sts[1].Events; len(ev) != 1 || !ev[0].Switched || ev[0].From != TierPrimary || ev[0].To != TierFailover || !ev[0].At.Equal(t0.Add(time.Second)) || ev[0].Reason == "" {
		t.Errorf("switch event %+v", ev)
	}
	if ev := sts[3].Events; len(ev) != 1 || ev[0].Switched {
		t.Errorf("primary → last resort event %+v, want one, not a switch", ev)
	}
}

// A backend that was already out of the eligible set at the switch (here
// healthy with weight 0, keeping its existing connections) is bounded too.
func TestDrainOnFailoverBoundsIneligibleBackends(t *testing.T) {
	p := DefaultPolicy()
	p.WeightedMaglev = true
	bs := func(p1 Health) []Backend {
		return []Backend{be("p1", "p", p1, weight(10)), be("p2", "p", up, weight(0)), be("f1", "f", up, weight(10))}
	}
	sts := runSteps(t, p, pf(), []step{
		{backends: bs(up), tier: TierPrimary, eligible: "p1"},
		{after: time.Second, backends: bs(down), tier: TierFailover, eligible: "f1"},
	})
	p2 := backendState(t, sts[1], "p2")
	if p2.DrainReason != DrainFailover || !p2.DrainUntil.Equal(t0.Add(time.Second+DefaultFailoverDrainTimeout)) {
		t.Errorf("p2 reason %v until %v", p2.DrainReason, p2.DrainUntil)
	}
}

// Primary → empty → failover is one switch: the primaries drain from the
// moment the failover backends take over.
func TestDrainThroughEmpty(t *testing.T) {
	p := DefaultPolicy()
	p.DropTrafficIfUnhealthy = true
	sts := runSteps(t, p, pf(), []step{
		{backends: pfBackends(up, up, down), tier: TierPrimary, eligible: "p1 p2"},
		{after: time.Second, backends: pfBackends(down, down, down), tier: TierEmpty, eligible: ""},
		{after: time.Second, backends: pfBackends(down, down, up), tier: TierFailover, eligible: "f1"},
	})
	if r := backendState(t, sts[1], "p1").DrainReason; r != DrainNone {
		t.Errorf("p1 drains at primary → empty: %v", r)
	}
	if p1 := backendState(t, sts[2], "p1"); p1.DrainReason != DrainFailover || !p1.DrainUntil.Equal(t0.Add(2*time.Second+DefaultFailoverDrainTimeout)) {
		t.Errorf("p1 after empty → failover: reason %v until %v", p1.DrainReason, p1.DrainUntil)
	}
}

func TestFlushThroughEmpty(t *testing.T) {
	p := DefaultPolicy()
	p.ConnectionDrainOnFailover = false
	p.DropTrafficIfUnhealthy = true
	sts := runSteps(t, p, pf(), []step{
		{backends: pfBackends(up, up, down), tier: TierPrimary, eligible: "p1 p2"},
		{after: time.Second, backends: pfBackends(down, down, down), tier: TierEmpty, eligible: ""},
		{after: time.Second, backends: pfBackends(down, down, up), tier: TierFailover, eligible: "f1"},
	})
	if sts[1].FlushGen != 0 || sts[2].FlushGen != 1 {
		t.Errorf("FlushGen %d, %d; want 0, 1 (primary → empty → failover is one switch)", sts[1].FlushGen, sts[2].FlushGen)
	}
}

// docs/design.md#draining-on-failover, default true: entries stay on the
// backends that left the eligible set for at most failover_drain_timeout.
func TestDrainOnFailoverDeadlines(t *testing.T) {
	p := DefaultPolicy() // drain on failover, 10 min
	p.FailoverRatio = 0.6
	gs := pf()
	bs := func(p2 Health) []Backend {
		return []Backend{be("p1", "p", up), be("p2", "p", p2), be("f1", "f", up)}
	}
	sts := runSteps(t, p, gs, []step{
		{backends: bs(up), tier: TierPrimary, eligible: "p1 p2"},
		{after: time.Minute, backends: bs(down), tier: TierFailover, eligible: "f1"},
		{after: 15 * time.Minute, backends: bs(up), tier: TierPrimary, eligible: "p1 p2"},
	})
	before, switched, back := sts[0], sts[1], sts[2]
	if switched.FlushGen != 0 {
		t.Errorf("FlushGen %d with drain on failover", switched.FlushGen)
	}
	p1 := backendState(t, switched, "p1")
	if p1.DrainReason != DrainFailover || !p1.DrainUntil.Equal(t0.Add(11*time.Minute)) || p1.DrainGen != 1 {
		t.Fatalf("p1 after switch: reason %v until %v gen %d", p1.DrainReason, p1.DrainUntil, p1.DrainGen)
	}
	// An entry created on p1 before the switch lives until the deadline.
	entry := backendState(t, before, "p1").Stamp()
	if !entryValid(p1, entry, t0.Add(11*time.Minute-time.Nanosecond), true) {
		t.Error("entry invalid before the failover drain deadline")
	}
	if entryValid(p1, entry, t0.Add(11*time.Minute), true) {
		t.Error("entry valid at the failover drain deadline")
	}
	if f1 := backendState(t, switched, "f1"); f1.DrainGen != 0 {
		t.Errorf("f1 entered the set and got drain gen %d", f1.DrainGen)
	}
	// Failback: f1 left and drains; p1 is back and its new entries are valid.
	f1 := backendState(t, back, "f1")
	if f1.DrainReason != DrainFailover || !f1.DrainUntil.Equal(t0.Add(26*time.Minute)) {
		t.Errorf("f1 after failback: reason %v until %v", f1.DrainReason, f1.DrainUntil)
	}
	p1 = backendState(t, back, "p1")
	if !entryValid(p1, p1.Stamp(), t0.Add(time.Hour), true) {
		t.Error("new entry on p1 invalid after failback")
	}
	if entryValid(p1, entry, t0.Add(16*time.Minute), true) {
		t.Error("pre-switch entry on p1 came back after failback")
	}
	// p2, unhealthy at the switch, loses a non-persisting entry at once and
	// keeps a persisting one until the failover drain deadline.
	p2 := backendState(t, switched, "p2")
	p2Entry := backendState(t, before, "p2").Stamp()
	if entryValid(p2, p2Entry, t0.Add(time.Minute), false) {
		t.Error("entry on unhealthy p2 valid although it does not persist")
	}
	if !entryValid(p2, p2Entry, t0.Add(11*time.Minute-time.Nanosecond), true) || entryValid(p2, p2Entry, t0.Add(11*time.Minute), true) {
		t.Error("persisting entry on p2 not bounded by the failover drain deadline")
	}
	if got, want := switched.NextCompute, t0.Add(11*time.Minute); !got.Equal(want) {
		t.Errorf("NextCompute %v, want %v", got, want)
	}
}

// docs/design.md#draining-on-removal: the backend leaves the eligible set at
// once; its entries are honoured until the timeout (0 = immediately).
func TestDrainOnRemoval(t *testing.T) {
	gs := []Group{primary("a")}
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		mark    func(time.Time) func(*Backend)
		reason  DrainReason
	}{
		{"removed timeout 0", 0, removed, DrainRemoved},
		{"removed timeout 30s", 30 * time.Second, removed, DrainRemoved},
		{"drained timeout 0", 0, drained, DrainAdmin},
		{"drained timeout 1h", time.Hour, drained, DrainAdmin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.ConnectionDrainingTimeout = tc.timeout
			clk := newClock()
			st0 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", up)}, nil, clk.now)
			entry := backendState(t, st0, "a1").Stamp()
			// The command was received 2 s before Compute saw it.
			start := clk.now.Add(3 * time.Second)
			now := clk.Advance(5 * time.Second)
			st1 := mustCompute(t, p, gs, []Backend{be("a1", "a", up, tc.mark(start)), be("a2", "a", up)}, st0, now)
			if names(st1.Eligible, false) != "a2" {
				t.Fatalf("eligible %q, want a2", names(st1.Eligible, false))
			}
			a1 := backendState(t, st1, "a1")
			if a1.DrainReason != tc.reason || !a1.DepartedAt.Equal(start) || !a1.DrainUntil.Equal(start.Add(tc.timeout)) || a1.InService {
				t.Fatalf("a1: reason %v departed %v until %v in service %v", a1.DrainReason, a1.DepartedAt, a1.DrainUntil, a1.InService)
			}
			deadline := start.Add(tc.timeout)
			if tc.timeout > 0 && !entryValid(a1, entry, deadline.Add(-time.Nanosecond), true) {
				t.Error("entry invalid before the draining timeout")
			}
			if entryValid(a1, entry, deadline, true) || entryValid(a1, entry, now.Add(2*time.Hour), true) {
				t.Error("entry valid after the draining timeout")
			}
			// A later Compute keeps the deadline.
			st2 := mustCompute(t, p, gs, []Backend{be("a1", "a", up, tc.mark(start)), be("a2", "a", up)}, st1, clk.Advance(time.Second))
			if b := backendState(t, st2, "a1"); !b.DrainUntil.Equal(deadline) || b.DrainGen != a1.DrainGen {
				t.Errorf("deadline moved to %v (gen %d → %d)", b.DrainUntil, a1.DrainGen, b.DrainGen)
			}
		})
	}
}

func TestUndrain(t *testing.T) {
	p := DefaultPolicy()
	p.ConnectionDrainingTimeout = time.Minute
	gs := []Group{primary("a")}
	clk := newClock()
	st0 := mustCompute(t, p, gs, []Backend{be("a1", "a", up)}, nil, clk.now)
	old := backendState(t, st0, "a1").Stamp()
	st1 := mustCompute(t, p, gs, []Backend{be("a1", "a", up, drained(time.Time{}))}, st0, clk.Advance(time.Second))
	if st1.Tier != TierEmpty || !backendState(t, st1, "a1").DrainUntil.Equal(t0.Add(61*time.Second)) {
		t.Fatalf("drain with zero time: tier %v until %v", st1.Tier, backendState(t, st1, "a1").DrainUntil)
	}
	st2 := mustCompute(t, p, gs, []Backend{be("a1", "a", up)}, st1, clk.Advance(2*time.Minute))
	a1 := backendState(t, st2, "a1")
	if names(st2.Eligible, false) != "a1" || a1.Admin != AdminActive || !a1.InService {
		t.Fatalf("undrain: eligible %q", names(st2.Eligible, false))
	}
	if entryValid(a1, old, clk.now, true) {
		t.Error("entry from before the drain came back after undrain")
	}
	if !entryValid(a1, a1.Stamp(), clk.now.Add(time.Hour), true) {
		t.Error("new entry invalid after undrain")
	}
	// A second drain with timeout 0: the entries of the undrained period end now.
	p.ConnectionDrainingTimeout = 0
	fresh := a1.Stamp()
	st3 := mustCompute(t, p, gs, []Backend{be("a1", "a", up, removed(clk.now))}, st2, clk.now)
	a1 = backendState(t, st3, "a1")
	if entryValid(a1, fresh, clk.now, true) || entryValid(a1, old, clk.now, true) {
		t.Error("entries valid after removal with timeout 0")
	}
}

// Two overlapping departures: an admin drain with timeout 0 during a
// failover drain ends the old entries at once (the earlier deadline wins).
func TestAdminDrainDuringFailoverDrain(t *testing.T) {
	p := DefaultPolicy()
	gs := pf()
	clk := newClock()
	st0 := mustCompute(t, p, gs, pfBackends(up, down, up), nil, clk.now)
	entry := backendState(t, st0, "p1").Stamp()
	st2 := mustCompute(t, p, gs, []Backend{be("p1", "p", down), be("p2", "p", down), be("f1", "f", up)}, st0, clk.Advance(time.Second))
	if st2.Tier != TierFailover || backendState(t, st2, "p1").DrainReason != DrainFailover {
		t.Fatalf("tier %v, p1 %v", st2.Tier, backendState(t, st2, "p1").DrainReason)
	}
	now := clk.Advance(time.Second)
	st3 := mustCompute(t, p, gs, []Backend{be("p1", "p", down, drained(now)), be("p2", "p", down), be("f1", "f", up)}, st2, now)
	p1 := backendState(t, st3, "p1")
	if p1.DrainReason != DrainAdmin || !p1.DrainUntil.Equal(clk.now) {
		t.Fatalf("p1 reason %v until %v, want ADMIN now", p1.DrainReason, p1.DrainUntil)
	}
	if entryValid(p1, entry, clk.now, true) {
		t.Error("entry valid after an admin drain with timeout 0")
	}
}

// Unhealthy generations: an entry created before its backend went
// unhealthy is invalid after recovery unless it persists; an entry created
// while the backend was unhealthy (a replacement in last resort) survives
// recovery.
func TestUnhealthyGeneration(t *testing.T) {
	p := DefaultPolicy()
	gs := []Group{primary("a")}
	clk := newClock()
	st0 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", up)}, nil, clk.now)
	beforeA1 := backendState(t, st0, "a1").Stamp()

	st1 := mustCompute(t, p, gs, []Backend{be("a1", "a", down), be("a2", "a", up)}, st0, clk.Advance(time.Second))
	a1 := backendState(t, st1, "a1")
	if a1.UnhealthyGen != 1 {
		t.Fatalf("UnhealthyGen %d after healthy → unhealthy, want 1", a1.UnhealthyGen)
	}
	if entryValid(a1, beforeA1, clk.now, false) {
		t.Error("entry valid on unhealthy backend without persistence")
	}
	if !entryValid(a1, beforeA1, clk.now, true) {
		t.Error("persisting entry invalid on unhealthy backend")
	}
	// The replacement goes to a2 and is stamped there.
	replacement := backendState(t, st1, "a2").Stamp()

	st2 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", up)}, st1, clk.Advance(time.Second))
	if a1 := backendState(t, st2, "a1"); a1.UnhealthyGen != 1 || entryValid(a1, beforeA1, clk.now, false) {
		t.Errorf("after recovery: gen %d, the removed entry came back", a1.UnhealthyGen)
	}
	if !entryValid(backendState(t, st2, "a2"), replacement, clk.now, false) {
		t.Error("replacement entry invalid after the old backend recovered")
	}

	// All down: nothing to divert to, so the entries stay; last resort
	// entries on a1 survive its recovery.
	st3 := mustCompute(t, p, gs, []Backend{be("a1", "a", down), be("a2", "a", down)}, st2, clk.Advance(time.Second))
	lastResort := backendState(t, st3, "a1").Stamp()
	st4 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", down)}, st3, clk.Advance(time.Second))
	if !entryValid(backendState(t, st4, "a1"), lastResort, clk.now, false) {
		t.Error("entry created while unhealthy invalid after recovery")
	}
	if g := backendState(t, st4, "a1").UnhealthyGen; g != 1 {
		t.Errorf("a1 UnhealthyGen %d, want 1 (it failed while nothing was healthy, and recovered first)", g)
	}
	if g := backendState(t, st4, "a2").UnhealthyGen; g != 1 {
		t.Errorf("a2 UnhealthyGen %d, want 1 (still down when a1 came back: its flows now divert)", g)
	}

	// Healthy → unknown counts (while a2 is healthy); unknown → unhealthy does not.
	st5 := mustCompute(t, p, gs, []Backend{be("a1", "a", unknown), be("a2", "a", up)}, st4, clk.Advance(time.Second))
	st6 := mustCompute(t, p, gs, []Backend{be("a1", "a", down), be("a2", "a", up)}, st5, clk.Advance(time.Second))
	if g5, g6 := backendState(t, st5, "a1").UnhealthyGen, backendState(t, st6, "a1").UnhealthyGen; g5 != 2 || g6 != 2 {
		t.Errorf("UnhealthyGen %d, %d; want 2, 2", g5, g6)
	}
	// A new backend starts at generation 0 whatever its health.
	if g := backendState(t, mustCompute(t, p, gs, []Backend{be("a9", "a", down)}, st6, clk.now), "a9").UnhealthyGen; g != 0 {
		t.Errorf("new backend UnhealthyGen %d", g)
	}
}

// NEVER_PERSIST connections "are always diverted to newly selected healthy
// backends (unless all backends are unhealthy)": a backend that fails while
// nothing else is healthy keeps its entries (there is nowhere better to go),
// until a healthy backend appears; and when its own recovery comes first,
// nothing ever moves. Failover groups and weighted sets count "healthy" in
// the eligible set.
func TestNothingHealthyKeepsFlows(t *testing.T) {
	clk := newClock()
	valid := func(st *State, name string, s Stamp) bool {
		return entryValid(backendState(t, st, name), s, clk.now, false)
	}
	t.Run("last backend to fail keeps its flows until another recovers", func(t *testing.T) {
		p, gs := DefaultPolicy(), []Group{primary("a")}
		st0 := mustCompute(t, p, gs, []Backend{be("a1", "a", down), be("a2", "a", up)}, nil, clk.now)
		onA2 := backendState(t, st0, "a2").Stamp()
		st1 := mustCompute(t, p, gs, []Backend{be("a1", "a", down), be("a2", "a", down)}, st0, clk.Advance(time.Second))
		if !valid(st1, "a2", onA2) {
			t.Fatal("a2's flow dropped while no backend is healthy")
		}
		lastResortA1 := backendState(t, st1, "a1").Stamp() // a new flow placed in last resort
		st2 := mustCompute(t, p, gs, []Backend{be("a1", "a", down), be("a2", "a", down)}, st1, clk.Advance(time.Second))
		if !valid(st2, "a2", onA2) || !valid(st2, "a1", lastResortA1) {
			t.Fatal("flows dropped while still nothing is healthy")
		}
		st3 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", down)}, st2, clk.Advance(time.Second))
		if valid(st3, "a2", onA2) {
			t.Error("a2's flow kept on unhealthy a2 after a1 recovered")
		}
		if !valid(st3, "a1", lastResortA1) {
			t.Error("last-resort flow on a1 dropped when a1 itself recovered")
		}
	})
	t.Run("own recovery first: the flow never moves", func(t *testing.T) {
		p, gs := DefaultPolicy(), []Group{primary("a")}
		st0 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", down)}, nil, clk.now)
		onA1 := backendState(t, st0, "a1").Stamp()
		st1 := mustCompute(t, p, gs, []Backend{be("a1", "a", down), be("a2", "a", down)}, st0, clk.Advance(time.Second))
		st2 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", down)}, st1, clk.Advance(time.Second))
		st3 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", up)}, st2, clk.Advance(time.Second))
		for i, st := range []*State{st1, st2, st3} {
			if !valid(st, "a1", onA1) {
				t.Errorf("step %d: a1's flow dropped", i+1)
			}
		}
	})
	t.Run("failover backends are somewhere to go", func(t *testing.T) {
		p, gs := DefaultPolicy(), []Group{primary("p"), failoverGroup("f")}
		st0 := mustCompute(t, p, gs, []Backend{be("p1", "p", up), be("f1", "f", up)}, nil, clk.now)
		onP1 := backendState(t, st0, "p1").Stamp()
		st1 := mustCompute(t, p, gs, []Backend{be("p1", "p", down), be("f1", "f", up)}, st0, clk.Advance(time.Second))
		if valid(st1, "p1", onP1) {
			t.Error("p1's flow kept while failover backend f1 is healthy")
		}
	})
	t.Run("drop_traffic_if_unhealthy: nothing eligible, nothing diverted", func(t *testing.T) {
		p, gs := DefaultPolicy(), []Group{primary("p"), failoverGroup("f")}
		p.DropTrafficIfUnhealthy = true
		st0 := mustCompute(t, p, gs, []Backend{be("p1", "p", up), be("f1", "f", down)}, nil, clk.now)
		onP1 := backendState(t, st0, "p1").Stamp()
		st1 := mustCompute(t, p, gs, []Backend{be("p1", "p", down), be("f1", "f", down)}, st0, clk.Advance(time.Second))
		if st1.Tier != TierEmpty || !valid(st1, "p1", onP1) {
			t.Errorf("tier %v, p1's flow valid %v; want EMPTY and kept", st1.Tier, valid(st1, "p1", onP1))
		}
	})
	t.Run("weighted: healthy backends at weight 0 are somewhere to go", func(t *testing.T) {
		p, gs := DefaultPolicy(), []Group{primary("a")}
		p.WeightedMaglev = true
		st0 := mustCompute(t, p, gs, []Backend{be("a1", "a", up, weight(5)), be("a2", "a", up, weight(0))}, nil, clk.now)
		onA1 := backendState(t, st0, "a1").Stamp()
		st1 := mustCompute(t, p, gs, []Backend{be("a1", "a", down, weight(0)), be("a2", "a", up, weight(0))}, st0, clk.Advance(time.Second))
		if st1.WeightSet != WeightSetHealthyZero || valid(st1, "a1", onA1) {
			t.Errorf("weight set %v, a1's flow valid %v; want HEALTHY_ZERO_WEIGHT and diverted", st1.WeightSet, valid(st1, "a1", onA1))
		}
	})
}

func TestEntryValidAllocs(t *testing.T) {
	st := mustCompute(t, DefaultPolicy(), []Group{primary("a")}, []Backend{be("a1", "a", up)}, nil, t0)
	g := backendState(t, st, "a1").Gens()
	s := g.Stamp() + 1 // an older drain generation: every comparison runs
	var sink bool
	if n := testing.AllocsPerRun(100, func() { sink = g.Valid(s, false, true) }); n != 0 {
		t.Errorf("Gens.Valid allocates %v times per call", n)
	}
	_ = sink
}

// Overlapping departures: an admin drain with a longer timeout during a
// failover drain does not extend the older entries beyond the failover
// deadline.
func TestOverlappingDeparturesKeepEarlierDeadline(t *testing.T) {
	p := DefaultPolicy()
	p.ConnectionDrainingTimeout = time.Hour
	gs := pf()
	clk := newClock()
	st0 := mustCompute(t, p, gs, pfBackends(up, down, up), nil, clk.now)
	entry := backendState(t, st0, "p1").Stamp()
	st1 := mustCompute(t, p, gs, pfBackends(down, down, up), st0, clk.Advance(time.Second))
	failoverDeadline := clk.now.Add(DefaultFailoverDrainTimeout)
	now := clk.Advance(time.Minute)
	st2 := mustCompute(t, p, gs, []Backend{be("p1", "p", down, drained(now)), be("p2", "p", down), be("f1", "f", up)}, st1, now)
	p1 := backendState(t, st2, "p1")
	if !p1.DrainUntil.Equal(failoverDeadline) || p1.DrainGen != 2 {
		t.Fatalf("p1 until %v gen %d, want %v gen 2", p1.DrainUntil, p1.DrainGen, failoverDeadline)
	}
	if entryValid(p1, entry, failoverDeadline, true) {
		t.Error("entry outlived the failover drain deadline")
	}
}

// After a drain whose deadline passed and an undrain, a second drain gives
// the entries of the undrained period the new timeout, but not the entries
// from before the first drain (DrainFloor).
func TestRedrainKeepsExpiredEntriesDead(t *testing.T) {
	p := DefaultPolicy()
	p.ConnectionDrainingTimeout = time.Minute
	gs := []Group{primary("a")}
	clk := newClock()
	st := mustCompute(t, p, gs, []Backend{be("a1", "a", up)}, nil, clk.now)
	old := backendState(t, st, "a1").Stamp()
	now := clk.Advance(time.Second)
	st = mustCompute(t, p, gs, []Backend{be("a1", "a", up, drained(now))}, st, now)
	st = mustCompute(t, p, gs, []Backend{be("a1", "a", up)}, st, clk.Advance(2*time.Minute))
	mid := backendState(t, st, "a1").Stamp()
	now = clk.Advance(time.Minute)
	st = mustCompute(t, p, gs, []Backend{be("a1", "a", up, drained(now))}, st, now)
	a1 := backendState(t, st, "a1")
	if a1.DrainFloor != 1 || a1.DrainGen != 2 {
		t.Fatalf("floor %d gen %d, want 1, 2", a1.DrainFloor, a1.DrainGen)
	}
	if !entryValid(a1, mid, now.Add(30*time.Second), true) {
		t.Error("entry of the undrained period invalid during the second drain")
	}
	if entryValid(a1, old, now.Add(30*time.Second), true) {
		t.Error("entry from before the first drain came back with the second drain")
	}
}

func TestPreferredWithoutFailover(t *testing.T) {
	gs := []Group{primary("cloud"), {Name: "onprem", Role: RolePrimary, CapacityScaler: 1, Preferred: true}}
	runEligible(t, []eligibleCase{
		{name: "preferred used while usable", groups: gs,
			backends: []Backend{be("c1", "cloud", up), be("o1", "onprem", up)},
			tier:     TierPrimary, want: "o1:1"},
		{name: "weighted set 1 narrowed", groups: gs, policy: weighted,
			backends: []Backend{be("c1", "cloud", up, weight(5)), be("o1", "onprem", up, weight(0)), be("o2", "onprem", up, weight(3))},
			tier:     TierPrimary, set: WeightSetHealthyWeighted, want: "o2:1"},
		{name: "then the rest", groups: gs,
			backends: []Backend{be("c1", "cloud", up), be("o1", "onprem", down)},
			tier:     TierPrimary, want: "c1:1"},
	})
}
