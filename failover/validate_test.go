package failover

import (
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestValidateRejects(t *testing.T) {
	okGroups := func() []Group { return []Group{primary("p"), failoverGroup("f")} }
	okBackends := func() []Backend { return []Backend{be("p1", "p", up), be("f1", "f", up)} }
	cases := []struct {
		name  string
		edit  func(p *Policy, gs *[]Group, bs *[]Backend)
		wants string
	}{
		{"ratio above 1", func(p *Policy, _ *[]Group, _ *[]Backend) { p.FailoverRatio = 1.5 }, "failover ratio"},
		{"ratio NaN", func(p *Policy, _ *[]Group, _ *[]Backend) { p.FailoverRatio = math.NaN() }, "failover ratio"},
		{"negative failover drain", func(p *Policy, _ *[]Group, _ *[]Backend) { p.FailoverDrainTimeout = -time.Second }, "failover drain timeout"},
		{"negative failback delay", func(p *Policy, _ *[]Group, _ *[]Backend) { p.FailbackDelay = -time.Second }, "failback delay"},
		{"draining timeout above 3600s", func(p *Policy, _ *[]Group, _ *[]Backend) { p.ConnectionDrainingTimeout = 3601 * time.Second }, "connection draining timeout"},
		{"zonal mode", func(p *Policy, _ *[]Group, _ *[]Backend) { p.Zonal.Mode = 9 }, "zonal affinity mode"},
		{"zonal ratio", func(p *Policy, _ *[]Group, _ *[]Backend) { p.Zonal.SpilloverRatio = -0.1 }, "spillover ratio"},
		{"zonal prefix invalid", func(p *Policy, _ *[]Group, _ *[]Backend) { p.Zonal.Clients = []ClientZone{{Zone: "z"}} }, "not valid"},
		{"zonal prefix host bits", func(p *Policy, _ *[]Group, _ *[]Backend) {
			p.Zonal.Clients = []ClientZone{{Prefix: netip.MustParsePrefix("198.51.100.7/24"), Zone: "z"}}
		}, "host bits"},
		{"zonal prefix twice", func(p *Policy, _ *[]Group, _ *[]Backend) {
			pf := netip.MustParsePrefix("198.51.100.0/24")
			p.Zonal.Clients = []ClientZone{{Prefix: pf, Zone: "a"}, {Prefix: pf, Zone: "b"}}
		}, "mapped to both"},
		{"zonal prefix without zone", func(p *Policy, _ *[]Group, _ *[]Backend) {
			p.Zonal.Clients = []ClientZone{{Prefix: netip.MustParsePrefix("198.51.100.0/24")}}
		}, "has no zone"},
		{"group without name", func(_ *Policy, gs *[]Group, _ *[]Backend) { *gs = append(*gs, Group{CapacityScaler: 1}) }, "has no name"},
		{"group twice", func(_ *Policy, gs *[]Group, _ *[]Backend) { *gs = append(*gs, primary("p")) }, "defined twice"},
		{"group role", func(_ *Policy, gs *[]Group, _ *[]Backend) { (*gs)[0].Role = 7 }, "unknown role"},
		{"capacity scaler", func(_ *Policy, gs *[]Group, _ *[]Backend) { (*gs)[0].CapacityScaler = 1.01 }, "capacity scaler"},
		{"failover without primary", func(_ *Policy, gs *[]Group, bs *[]Backend) {
			*gs = []Group{failoverGroup("f")}
			*bs = []Backend{be("f1", "f", up)}
		}, "at least one primary"},
		{"too many groups", func(_ *Policy, gs *[]Group, _ *[]Backend) {
			for i := range MaxGroupsPerRole {
				*gs = append(*gs, primary("extra"+itoa3(i)))
			}
		}, "at most 50"},
		{"backend without name", func(_ *Policy, _ *[]Group, bs *[]Backend) { *bs = append(*bs, Backend{Group: "p", ID: 99}) }, "has no name"},
		{"backend twice", func(_ *Policy, _ *[]Group, bs *[]Backend) { *bs = append(*bs, be("p1", "p", up)) }, "given twice"},
		{"slot twice", func(_ *Policy, _ *[]Group, bs *[]Backend) {
			b := be("p9", "p", up)
			b.ID = (*bs)[0].ID
			*bs = append(*bs, b)
		}, "share slot"},
		{"unknown group", func(_ *Policy, _ *[]Group, bs *[]Backend) { *bs = append(*bs, be("x1", "x", up)) }, "unknown group"},
		{"health", func(_ *Policy, _ *[]Group, bs *[]Backend) { (*bs)[0].Health = 5 }, "unknown health"},
		{"weight state", func(_ *Policy, _ *[]Group, bs *[]Backend) { (*bs)[0].WeightState = 5 }, "unknown weight state"},
		{"weight above 1000", func(_ *Policy, _ *[]Group, bs *[]Backend) { (*bs)[0].Weight = 1001 }, "above 1000"},
		{"admin", func(_ *Policy, _ *[]Group, bs *[]Backend) { (*bs)[0].Admin = 5 }, "unknown admin state"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, gs, bs := DefaultPolicy(), okGroups(), okBackends()
			tc.edit(&p, &gs, &bs)
			st, err := Compute(p, gs, bs, nil, t0)
			if err == nil || st != nil {
				t.Fatalf("Compute accepted it: %v", st)
			}
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.wants) || !strings.HasPrefix(err.Error(), "compute eligible set: ") {
				t.Errorf("error %q, want ErrInvalidInput mentioning %q", err, tc.wants)
			}
		})
	}
	// The unmodified input is fine, and a weight above 1000 is fine when it
	// is not used (the state says it is invalid).
	bs := okBackends()
	bs[0].Weight, bs[0].WeightState = 5000, WeightInvalid
	if _, err := Compute(DefaultPolicy(), okGroups(), bs, nil, t0); err != nil {
		t.Errorf("valid input rejected: %v", err)
	}
}

func itoa3(i int) string { return string(rune('a'+i/26)) + string(rune('a'+i%26)) }

func TestEventsAndHistory(t *testing.T) {
	p := DefaultPolicy()
	gs := pf()
	clk := newClock()
	st := mustCompute(t, p, gs, pfBackends(up, up, up), nil, clk.now)
	if len(st.Events) != 1 || st.Events[0].From != TierNone || st.Events[0].To != TierPrimary || st.Events[0].Switched {
		t.Fatalf("first events %+v", st.Events)
	}
	for i := range MaxHistory + 10 {
		h := up
		if i%2 == 0 {
			h = down
		}
		st = mustCompute(t, p, gs, pfBackends(h, h, up), st, clk.Advance(time.Second))
		if len(st.Events) != 1 || !st.Events[0].Switched || !st.Events[0].At.Equal(clk.now) {
			t.Fatalf("step %d: events %+v", i, st.Events)
		}
	}
	if len(st.History) != MaxHistory {
		t.Fatalf("history %d events, want %d", len(st.History), MaxHistory)
	}
	if last := st.History[len(st.History)-1]; last != st.Events[0] {
		t.Errorf("last history event %+v, want %+v", last, st.Events[0])
	}
	if !st.History[0].At.Before(st.History[1].At) {
		t.Error("history not oldest first")
	}
	// No change, no event.
	st2 := mustCompute(t, p, gs, pfBackends(up, up, up), st, clk.Advance(time.Second))
	if st.Tier == st2.Tier && len(st2.Events) != 0 {
		t.Errorf("events without a change: %+v", st2.Events)
	}
}

func TestStrings(t *testing.T) {
	cases := []struct{ got, want string }{
		{TierPrimaryFallback.String(), "PRIMARY_FALLBACK"},
		{Tier(99).String(), "INVALID"},
		{WeightMissing.String(), "MISSING_WEIGHT"},
		{WeightUnavailable.String(), "UNAVAILABLE_WEIGHT"},
		{PersistAlways.String(), "ALWAYS_PERSIST"},
		{ZonalSpillCrossZone.String(), "ZONAL_AFFINITY_SPILL_CROSS_ZONE"},
		{HealthUnknown.String(), "UNKNOWN"},
		{AdminDrained.String(), "DRAINED"},
		{RoleFailover.String(), "FAILOVER"},
		{WeightSetHealthyZero.String(), "HEALTHY_ZERO_WEIGHT"},
		{DrainRemoved.String(), "REMOVED"},
		{EventGroupAutoDrained.String(), "GROUP_AUTO_DRAINED"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("String() = %q, want %q", tc.got, tc.want)
		}
	}
}
