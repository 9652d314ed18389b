package failover

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xlbnet/xlb/hash"
)

type eligibleCase struct {
	name     string
	policy   func(*Policy)
	groups   []Group
	backends []Backend
	tier     Tier
	set      WeightSet
	want     string // eligible "name:weight", sorted by name
}

func runEligible(t *testing.T, cases []eligibleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			if tc.policy != nil {
				tc.policy(&p)
			}
			st := mustCompute(t, p, tc.groups, tc.backends, nil, t0)
			if st.Tier != tc.tier || st.WeightSet != tc.set {
				t.Errorf("tier, set = %v, %v, want %v, %v (reason %q)", st.Tier, st.WeightSet, tc.tier, tc.set, st.Reason)
			}
			if got := names(st.Eligible, true); got != tc.want {
				t.Errorf("eligible = %q, want %q", got, tc.want)
			}
			if (st.Tier == TierEmpty) != (len(st.Eligible) == 0) {
				t.Errorf("tier %v with %d eligible", st.Tier, len(st.Eligible))
			}
			for _, m := range st.Eligible {
				if b := backendState(t, st, m.Name); !b.Eligible {
					t.Errorf("%s eligible but BackendState.Eligible = false", m.Name)
				}
			}
		})
	}
}

var weighted = func(p *Policy) { p.WeightedMaglev = true }

// docs/design.md#eligible-backends without failover groups or weights: the
// usable backends; if none, every backend in service.
func TestEligibleNoFailoverNoWeights(t *testing.T) {
	a := []Group{primary("a")}
	runEligible(t, []eligibleCase{
		{name: "all healthy", groups: a, backends: []Backend{be("10.0.0.1", "a", up), be("10.0.0.2", "a", up)},
			tier: TierPrimary, want: "10.0.0.1:1 10.0.0.2:1"},
		{name: "only the healthy ones", groups: a, backends: []Backend{be("10.0.0.1", "a", down), be("10.0.0.2", "a", up), be("10.0.0.3", "a", up)},
			tier: TierPrimary, want: "10.0.0.2:1 10.0.0.3:1"},
		{name: "none healthy: all backends", groups: a, backends: []Backend{be("10.0.0.1", "a", down), be("10.0.0.2", "a", down)},
			tier: TierLastResort, want: "10.0.0.1:1 10.0.0.2:1"},
		{name: "unknown counts as not healthy", groups: a, backends: []Backend{be("10.0.0.1", "a", unknown), be("10.0.0.2", "a", up)},
			tier: TierPrimary, want: "10.0.0.2:1"},
		{name: "all unknown: all backends", groups: a, backends: []Backend{be("10.0.0.1", "a", unknown), be("10.0.0.2", "a", unknown)},
			tier: TierLastResort, want: "10.0.0.1:1 10.0.0.2:1"},
		{name: "weights ignored without WEIGHTED_MAGLEV", groups: a, backends: []Backend{be("10.0.0.1", "a", up, weight(0)), be("10.0.0.2", "a", up, weight(7))},
			tier: TierPrimary, want: "10.0.0.1:1 10.0.0.2:1"},
		{name: "drained backend leaves at once", groups: a, backends: []Backend{be("10.0.0.1", "a", up, drained(t0)), be("10.0.0.2", "a", up)},
			tier: TierPrimary, want: "10.0.0.2:1"},
		{name: "drained backend is not a last resort", groups: a, backends: []Backend{be("10.0.0.1", "a", down, drained(t0)), be("10.0.0.2", "a", down)},
			tier: TierLastResort, want: "10.0.0.2:1"},
		{name: "removed backend leaves at once", groups: a, backends: []Backend{be("10.0.0.1", "a", up, removed(t0)), be("10.0.0.2", "a", up)},
			tier: TierPrimary, want: "10.0.0.2:1"},
		{name: "all drained: empty", groups: a, backends: []Backend{be("10.0.0.1", "a", up, drained(t0))},
			tier: TierEmpty, want: ""},
		{name: "no backends: empty", groups: a, tier: TierEmpty, want: ""},
		{name: "drop_traffic_if_unhealthy needs failover groups", groups: a, policy: func(p *Policy) { p.DropTrafficIfUnhealthy = true },
			backends: []Backend{be("10.0.0.1", "a", down)}, tier: TierLastResort, want: "10.0.0.1:1"},
	})
}

// docs/design.md#eligible-backends without failover groups, WEIGHTED_MAGLEV:
// the first non-empty of (1) healthy with weight > 0, (2) unhealthy with
// weight > 0, (3) healthy with weight 0, (4) all; 3 and 4 at equal weights.
func TestEligibleNoFailoverWeighted(t *testing.T) {
	a := []Group{primary("a")}
	runEligible(t, []eligibleCase{
		{name: "set 1 healthy weighted 1:4", policy: weighted, groups: a,
			backends: []Backend{be("a1", "a", up, weight(1)), be("a2", "a", up, weight(4)), be("a3", "a", down, weight(9))},
			tier:     TierPrimary, set: WeightSetHealthyWeighted, want: "a1:1 a2:4"},
		{name: "set 1 weights 0:2:6 give 0/25/75", policy: weighted, groups: a,
			backends: []Backend{be("a", "a", up, weight(0)), be("b", "a", up, weight(2)), be("c", "a", up, weight(6))},
			tier:     TierPrimary, set: WeightSetHealthyWeighted, want: "b:1 c:3"},
		{name: "set 2 unhealthy weighted", policy: weighted, groups: a,
			backends: []Backend{be("a1", "a", down, weight(3)), be("a2", "a", unknown, weight(6)), be("a3", "a", up, weight(0))},
			tier:     TierLastResort, set: WeightSetUnhealthyWeighted, want: "a1:1 a2:2"},
		{name: "set 3 healthy zero weight, equal", policy: weighted, groups: a,
			backends: []Backend{be("a1", "a", up, weight(0)), be("a2", "a", up, weight(0)), be("a3", "a", down, weight(0))},
			tier:     TierLastResort, set: WeightSetHealthyZero, want: "a1:1 a2:1"},
		{name: "set 4 all, equal", policy: weighted, groups: a,
			backends: []Backend{be("a1", "a", down, weight(0)), be("a2", "a", unknown, weight(0))},
			tier:     TierLastResort, set: WeightSetAll, want: "a1:1 a2:1"},
		{name: "missing weight means 0, health unaffected", policy: weighted, groups: a,
			backends: []Backend{be("a1", "a", up, weightState(WeightMissing, 500)), be("a2", "a", up, weight(5))},
			tier:     TierPrimary, set: WeightSetHealthyWeighted, want: "a2:1"},
		{name: "invalid and unavailable weights mean 0", policy: weighted, groups: a,
			backends: []Backend{be("a1", "a", up, weightState(WeightInvalid, 500)), be("a2", "a", up, weightState(WeightUnavailable, 5))},
			tier:     TierLastResort, set: WeightSetHealthyZero, want: "a1:1 a2:1"},
		{name: "all weights missing on healthy backends: equal", policy: weighted, groups: a,
			backends: []Backend{be("a1", "a", up, weightState(WeightMissing, 0)), be("a2", "a", up, weightState(WeightMissing, 0))},
			tier:     TierLastResort, set: WeightSetHealthyZero, want: "a1:1 a2:1"},
		{name: "empty", policy: weighted, groups: a, tier: TierEmpty, want: ""},
	})
}

// docs/design.md#eligible-backends with failover groups, without weights.
func TestEligibleFailover(t *testing.T) {
	gs := []Group{primary("p"), failoverGroup("f")}
	ratio := func(r float64) func(*Policy) { return func(p *Policy) { p.FailoverRatio = r } }
	drop := func(p *Policy) { p.DropTrafficIfUnhealthy = true }
	runEligible(t, []eligibleCase{
		{name: "ratio 0: healthy primaries", groups: gs,
			backends: []Backend{be("p1", "p", up), be("p2", "p", down), be("f1", "f", up)},
			tier:     TierPrimary, want: "p1:1"},
		{name: "ratio 0: fail over only when no primary is usable", groups: gs,
			backends: []Backend{be("p1", "p", down), be("p2", "p", down), be("f1", "f", up), be("f2", "f", down)},
			tier:     TierFailover, want: "f1:1"},
		{name: "ratio 0.5: 1 of 4 primaries fails over", groups: gs, policy: ratio(0.5),
			backends: []Backend{be("p1", "p", up), be("p2", "p", down), be("p3", "p", down), be("p4", "p", down), be("f1", "f", up)},
			tier:     TierFailover, want: "f1:1"},
		{name: "ratio 0.5: 2 of 4 primaries is enough", groups: gs, policy: ratio(0.5),
			backends: []Backend{be("p1", "p", up), be("p2", "p", up), be("p3", "p", down), be("p4", "p", down), be("f1", "f", up)},
			tier:     TierPrimary, want: "p1:1 p2:1"},
		{name: "ratio 1: one primary down fails over", groups: gs, policy: ratio(1),
			backends: []Backend{be("p1", "p", up), be("p2", "p", down), be("f1", "f", up)},
			tier:     TierFailover, want: "f1:1"},
		{name: "drained primaries count as not usable", groups: gs, policy: ratio(0.5),
			backends: []Backend{be("p1", "p", up), be("p2", "p", up, drained(t0)), be("p3", "p", up, drained(t0)), be("f1", "f", up)},
			tier:     TierFailover, want: "f1:1"},
		{name: "removed primaries do not count", groups: gs, policy: ratio(0.5),
			backends: []Backend{be("p1", "p", up), be("p2", "p", up, removed(t0)), be("p3", "p", up, removed(t0)), be("f1", "f", up)},
			tier:     TierPrimary, want: "p1:1"},
		{name: "no usable failover: usable primaries", groups: gs, policy: ratio(0.75),
			backends: []Backend{be("p1", "p", up), be("p2", "p", down), be("f1", "f", down)},
			tier:     TierPrimaryFallback, want: "p1:1"},
		{name: "nothing usable: all primaries, not failover", groups: gs,
			backends: []Backend{be("p1", "p", down), be("p2", "p", unknown), be("f1", "f", down)},
			tier:     TierLastResort, want: "p1:1 p2:1"},
		{name: "nothing usable with drop_traffic_if_unhealthy: empty", groups: gs, policy: drop,
			backends: []Backend{be("p1", "p", down), be("f1", "f", down)},
			tier:     TierEmpty, want: ""},
		{name: "drop_traffic_if_unhealthy keeps usable failover", groups: gs, policy: drop,
			backends: []Backend{be("p1", "p", down), be("f1", "f", up)},
			tier:     TierFailover, want: "f1:1"},
		{name: "failover group without members", groups: gs, policy: ratio(0.9),
			backends: []Backend{be("p1", "p", up), be("p2", "p", down)},
			tier:     TierPrimaryFallback, want: "p1:1"},
	})
}

// docs/design.md#eligible-backends, failover with WEIGHTED_MAGLEV (seeds open
// question D.1):
// usable means healthy, in service and weight > 0, and the ratio counts
// those over all configured primaries.
func TestEligibleFailoverWeighted(t *testing.T) {
	gs := []Group{primary("p"), failoverGroup("f")}
	wr := func(r float64) func(*Policy) { return func(p *Policy) { p.WeightedMaglev, p.FailoverRatio = true, r } }
	runEligible(t, []eligibleCase{
		{name: "healthy weighted primaries", groups: gs, policy: wr(0),
			backends: []Backend{be("p1", "p", up, weight(100)), be("p2", "p", up, weight(300)), be("p3", "p", up, weight(0)), be("f1", "f", up, weight(5))},
			tier:     TierPrimary, want: "p1:1 p2:3"},
		{name: "weight 0 primaries fail over (patching)", groups: gs, policy: wr(0),
			backends: []Backend{be("p1", "p", up, weight(0)), be("p2", "p", up, weight(0)), be("f1", "f", up, weight(10)), be("f2", "f", up, weight(30))},
			tier:     TierFailover, want: "f1:1 f2:3"},
		{name: "ratio counts weight > 0 only", groups: gs, policy: wr(0.5),
			backends: []Backend{be("p1", "p", up, weight(1)), be("p2", "p", up, weight(0)), be("p3", "p", up, weight(0)), be("f1", "f", up, weight(1))},
			tier:     TierFailover, want: "f1:1"},
		{name: "failover weight 0 is not usable: primary fallback", groups: gs, policy: wr(0.5),
			backends: []Backend{be("p1", "p", up, weight(2)), be("p2", "p", down, weight(2)), be("p3", "p", down, weight(2)), be("f1", "f", up, weight(0))},
			tier:     TierPrimaryFallback, want: "p1:1"},
		{name: "last resort: primaries with weight > 0", groups: gs, policy: wr(0),
			backends: []Backend{be("p1", "p", down, weight(2)), be("p2", "p", down, weight(0)), be("p3", "p", up, weight(0)), be("p4", "p", down, weight(4)), be("f1", "f", down, weight(9))},
			tier:     TierLastResort, want: "p1:1 p4:2"},
		{name: "last resort: all primaries equal", groups: gs, policy: wr(0),
			backends: []Backend{be("p1", "p", down, weight(0)), be("p2", "p", up, weight(0)), be("f1", "f", down, weight(9))},
			tier:     TierLastResort, want: "p1:1 p2:1"},
	})
}

// Deterministic output: the same inputs in any order give the same state.
func TestDeterministicOrder(t *testing.T) {
	gs := []Group{primary("p"), failoverGroup("f"), {Name: "q", Role: RolePrimary, CapacityScaler: 0.5, Zone: "z1"}}
	var bs []Backend
	for i := range 12 {
		h := up
		if i%3 == 0 {
			h = down
		}
		g := []string{"p", "f", "q"}[i%3]
		bs = append(bs, be(fmt.Sprintf("10.0.%d.%d", i%3, i), g, h, weight(uint32(i*10))))
	}
	p := DefaultPolicy()
	p.WeightedMaglev = true
	p.Zonal = ZonalAffinity{Mode: ZonalSpillCrossZone}
	want := mustCompute(t, p, gs, bs, nil, t0)
	if !slices.IsSortedFunc(want.Eligible, func(a, b Member) int { return compareNames(a.Name, b.Name) }) {
		t.Fatalf("eligible not sorted: %s", names(want.Eligible, false))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		g2, b2 := slices.Clone(gs), slices.Clone(bs)
		r.Shuffle(len(g2), func(i, j int) { g2[i], g2[j] = g2[j], g2[i] })
		r.Shuffle(len(b2), func(i, j int) { b2[i], b2[j] = b2[j], b2[i] })
		got := mustCompute(t, p, g2, b2, nil, t0)
		if names(got.Eligible, true) != names(want.Eligible, true) {
			t.Fatalf("shuffle %d: eligible %q, want %q", i, names(got.Eligible, true), names(want.Eligible, true))
		}
		if !slices.Equal(got.Backends, want.Backends) || !slices.Equal(got.Groups, want.Groups) {
			t.Fatalf("shuffle %d: backend or group states differ", i)
		}
	}
	if got := mustCompute(t, p, reversed(gs), reversed(bs), nil, t0); names(got.Eligible, true) != names(want.Eligible, true) {
		t.Fatalf("reversed: eligible %q, want %q", names(got.Eligible, true), names(want.Eligible, true))
	}
}

func compareNames(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestMaglevBackends: the Maglev table is built from the members' names,
// slots and Maglev weights, in their order.
func TestMaglevBackends(t *testing.T) {
	p := DefaultPolicy()
	p.WeightedMaglev = true
	st := mustCompute(t, p, []Group{primary("a")}, []Backend{be("a1", "a", up, weight(2)), be("a2", "a", up, weight(6)), be("a3", "a", down, weight(4))}, nil, t0)
	got := MaglevBackends(st.Eligible)
	want := []hash.Backend{
		{Name: "a1", ID: backendState(t, st, "a1").ID, Weight: 1},
		{Name: "a2", ID: backendState(t, st, "a2").ID, Weight: 3},
	}
	if !slices.Equal(got, want) {
		t.Errorf("MaglevBackends = %+v, want %+v", got, want)
	}
	if got := MaglevBackends(nil); len(got) != 0 {
		t.Errorf("MaglevBackends(nil) = %+v", got)
	}
}
