package failover

import (
	"fmt"
	"testing"
	"time"
)

// Capacity scaler: 0 = no new connections (entries untouched), otherwise
// it scales the members' weights.
func TestCapacityScaler(t *testing.T) {
	g := func(name string, role Role, s float64) Group { return Group{Name: name, Role: role, CapacityScaler: s} }
	runEligible(t, []eligibleCase{
		{name: "scaler 0.5 on equal weights",
			groups:   []Group{g("a", RolePrimary, 1), g("b", RolePrimary, 0.5)},
			backends: []Backend{be("a1", "a", up), be("b1", "b", up)},
			tier:     TierPrimary, want: "a1:2 b1:1"},
		{name: "scaler 0.5 on weight 1 still works", policy: weighted,
			groups:   []Group{g("a", RolePrimary, 1), g("b", RolePrimary, 0.5)},
			backends: []Backend{be("a1", "a", up, weight(1)), be("b1", "b", up, weight(1)), be("b2", "b", up, weight(4))},
			tier:     TierPrimary, set: WeightSetHealthyWeighted, want: "a1:2 b1:1 b2:4"},
		{name: "scaler 0 takes no new connections",
			groups:   []Group{g("a", RolePrimary, 1), g("b", RolePrimary, 0)},
			backends: []Backend{be("a1", "a", up), be("b1", "b", up)},
			tier:     TierPrimary, want: "a1:1"},
		{name: "scaler 0 is not a last resort",
			groups:   []Group{g("a", RolePrimary, 1), g("b", RolePrimary, 0)},
			backends: []Backend{be("a1", "a", down), be("b1", "b", down)},
			tier:     TierLastResort, want: "a1:1"},
		{name: "scaler 0 primaries count as not usable in the ratio",
			groups:   []Group{g("a", RolePrimary, 1), g("b", RolePrimary, 0), g("f", RoleFailover, 1)},
			policy:   func(p *Policy) { p.FailoverRatio = 0.5 },
			backends: []Backend{be("a1", "a", up), be("b1", "b", up), be("b2", "b", up), be("f1", "f", up)},
			tier:     TierFailover, want: "f1:1"},
		{name: "tiny scaler keeps at least 1/1000",
			groups:   []Group{g("a", RolePrimary, 1), g("b", RolePrimary, 0.0001)},
			backends: []Backend{be("a1", "a", up), be("b1", "b", up)},
			tier:     TierPrimary, want: "a1:1000 b1:1"},
		{name: "scaler on last resort equal weights",
			groups:   []Group{g("a", RolePrimary, 0.25), g("b", RolePrimary, 0.75)},
			backends: []Backend{be("a1", "a", down), be("b1", "b", down)},
			tier:     TierLastResort, want: "a1:1 b1:3"},
	})
}

// Preferred groups are used while they have usable members, then the rest.
func TestPreferredGroups(t *testing.T) {
	gs := []Group{{Name: "cloud", Role: RolePrimary, CapacityScaler: 1}, {Name: "onprem", Role: RolePrimary, CapacityScaler: 1, Preferred: true},
		{Name: "fo", Role: RoleFailover, CapacityScaler: 1}, {Name: "fo-pref", Role: RoleFailover, CapacityScaler: 1, Preferred: true}}
	runEligible(t, []eligibleCase{
		{name: "preferred used while usable", groups: gs,
			backends: []Backend{be("c1", "cloud", up), be("o1", "onprem", up), be("o2", "onprem", down)},
			tier:     TierPrimary, want: "o1:1"},
		{name: "then the rest", groups: gs,
			backends: []Backend{be("c1", "cloud", up), be("c2", "cloud", up), be("o1", "onprem", down)},
			tier:     TierPrimary, want: "c1:1 c2:1"},
		{name: "preferred failover group", groups: gs,
			backends: []Backend{be("c1", "cloud", down), be("f1", "fo", up), be("f2", "fo-pref", up)},
			tier:     TierFailover, want: "f2:1"},
		{name: "not in last resort", groups: gs,
			backends: []Backend{be("c1", "cloud", down), be("o1", "onprem", down)},
			tier:     TierLastResort, want: "c1:1 o1:1"},
		{name: "ratio counts all primaries", groups: gs, policy: func(p *Policy) { p.FailoverRatio = 0.5 },
			backends: []Backend{be("c1", "cloud", down), be("c2", "cloud", down), be("o1", "onprem", up), be("f1", "fo", up)},
			tier:     TierFailover, want: "f1:1"},
	})
}

func groupBackends(group string, healthy, total int) []Backend {
	var out []Backend
	for i := range total {
		h := down
		if i < healthy {
			h = up
		}
		out = append(out, be(fmt.Sprintf("%s-%02d", group, i), group, h))
	}
	return out
}

func autoDrainPolicy() Policy {
	p := DefaultPolicy()
	p.AutoCapacityDrain = true
	return p
}

// Auto capacity drain: below 25 % healthy → capacity 0; undrain at ≥ 35 %
// held for 60 s.
func TestAutoCapacityDrainThresholds(t *testing.T) {
	p := autoDrainPolicy()
	gs := []Group{primary("a"), primary("b")}
	clk := newClock()
	in := func(aHealthy int) []Backend {
		return append(groupBackends("a", aHealthy, 20), groupBackends("b", 20, 20)...)
	}
	drainedAfter := func(st *State) bool { g, _ := st.Group("a"); return g.AutoDrained }

	st := mustCompute(t, p, gs, in(5), nil, clk.now) // 25 %: not below
	if drainedAfter(st) {
		t.Fatal("25 % healthy drained")
	}
	st = mustCompute(t, p, gs, in(4), st, clk.Advance(time.Second)) // 20 %
	if !drainedAfter(st) || len(st.Events) != 1 || st.Events[0].Kind != EventGroupAutoDrained || st.Events[0].Group != "a" {
		t.Fatalf("20 %% healthy: drained %v events %+v", drainedAfter(st), st.Events)
	}
	for _, m := range st.Eligible {
		if m.Group == "a" {
			t.Fatalf("member %s of an auto-drained group is eligible", m.Name)
		}
	}
	if b := backendState(t, st, "a-00"); b.InService || b.DrainGen != 0 {
		t.Errorf("auto-drained member: in service %v, drain gen %d (entries must stay)", b.InService, b.DrainGen)
	}
	st = mustCompute(t, p, gs, in(6), st, clk.Advance(time.Second)) // 30 %: stays drained
	if !drainedAfter(st) {
		t.Fatal("30 % undrained")
	}
	st = mustCompute(t, p, gs, in(7), st, clk.Advance(time.Second)) // 35 %: hold starts
	recoverAt := clk.now
	if g, _ := st.Group("a"); !g.AutoDrained || !g.RecoverSince.Equal(recoverAt) || !st.NextCompute.Equal(recoverAt.Add(AutoDrainHold)) {
		t.Fatalf("35 %%: drained %v since %v next %v", g.AutoDrained, g.RecoverSince, st.NextCompute)
	}
	st = mustCompute(t, p, gs, in(7), st, clk.Advance(59*time.Second))
	if !drainedAfter(st) {
		t.Fatal("undrained after 59 s")
	}
	st = mustCompute(t, p, gs, in(7), st, clk.Advance(time.Second))
	if drainedAfter(st) || len(st.Events) != 1 || st.Events[0].Kind != EventGroupAutoUndrained {
		t.Fatalf("after 60 s: drained %v events %+v", drainedAfter(st), st.Events)
	}
	if names(st.Eligible, false) == names(mustCompute(t, p, gs, groupBackends("b", 20, 20), nil, clk.now).Eligible, false) {
		t.Error("undrained group's healthy members not eligible")
	}

	// A dip below 35 % during the hold restarts it.
	st = mustCompute(t, p, gs, in(0), st, clk.Advance(time.Second))
	st = mustCompute(t, p, gs, in(8), st, clk.Advance(time.Second))
	st = mustCompute(t, p, gs, in(6), st, clk.Advance(30*time.Second))
	st = mustCompute(t, p, gs, in(8), st, clk.Advance(time.Second))
	st = mustCompute(t, p, gs, in(8), st, clk.Advance(59*time.Second))
	if !drainedAfter(st) {
		t.Error("hold not restarted by a dip below 35 %")
	}

	// Off: nothing drains, and a drained group is released.
	st = mustCompute(t, DefaultPolicy(), gs, in(0), st, clk.Advance(time.Second))
	if drainedAfter(st) {
		t.Error("auto capacity drain off but group drained")
	}
}

// Never more than 50 % of the groups: the worst healthy share drains
// first, ties by name, and groups already drained keep their place.
func TestAutoCapacityDrainCap(t *testing.T) {
	p := autoDrainPolicy()
	clk := newClock()
	gs := []Group{primary("a"), primary("b"), primary("c"), primary("d"), primary("e")}
	healthy := map[string]int{"a": 2, "b": 1, "c": 1, "d": 0, "e": 10}
	in := func() []Backend {
		var out []Backend
		for _, g := range gs {
			out = append(out, groupBackends(g.Name, healthy[g.Name], 10)...)
		}
		return out
	}
	drainedSet := func(st *State) string {
		s := ""
		for _, g := range st.Groups {
			if g.AutoDrained {
				s += g.Name
			}
		}
		return s
	}
	// 5 groups: at most 2. Candidates a 20 %, b 10 %, c 10 %, d 0 %.
	st := mustCompute(t, p, gs, in(), nil, clk.now)
	if got := drainedSet(st); got != "bd" {
		t.Fatalf("drained %q, want bd (d worst, then b before c by name)", got)
	}
	// c gets worse than b: b keeps its place.
	healthy["c"] = 0
	st = mustCompute(t, p, gs, in(), st, clk.Advance(time.Second))
	if got := drainedSet(st); got != "bd" {
		t.Fatalf("drained %q, want bd (already drained groups stay)", got)
	}
	// b recovers for 60 s: c takes the free place.
	healthy["b"] = 4
	st = mustCompute(t, p, gs, in(), st, clk.Advance(time.Second))
	st = mustCompute(t, p, gs, in(), st, clk.Advance(AutoDrainHold))
	if got := drainedSet(st); got != "cd" {
		t.Fatalf("drained %q, want cd", got)
	}
	// One group: never drained. Two groups: one.
	if got := drainedSet(mustCompute(t, p, gs[:1], groupBackends("a", 0, 10), nil, t0)); got != "" {
		t.Errorf("single group drained: %q", got)
	}
	two := append(groupBackends("a", 0, 10), groupBackends("b", 0, 10)...)
	if got := drainedSet(mustCompute(t, p, gs[:2], two, nil, t0)); got != "a" {
		t.Errorf("two groups: drained %q, want a", got)
	}
	// Fewer groups than before: the healthiest drained group is released.
	healthy = map[string]int{"a": 0, "b": 1}
	st = mustCompute(t, p, gs[:4], append(append(groupBackends("a", 0, 10), groupBackends("b", 1, 10)...), append(groupBackends("c", 10, 10), groupBackends("d", 10, 10)...)...), nil, t0)
	if got := drainedSet(st); got != "ab" {
		t.Fatalf("four groups: drained %q, want ab", got)
	}
	st = mustCompute(t, p, gs[:3], append(append(groupBackends("a", 0, 10), groupBackends("b", 1, 10)...), groupBackends("c", 10, 10)...), st, t0.Add(time.Second))
	if got := drainedSet(st); got != "a" {
		t.Errorf("three groups: drained %q, want a (b is healthier)", got)
	}
}
