package failover

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// scenario decodes fuzz bytes into a valid rule and a sequence of health
// views: byte 0 policy flags, byte 1 ratio, byte 2 group count and roles,
// then 3 bytes per backend per step.
type scenario struct {
	p      Policy
	groups []Group
	steps  [][]Backend
}

func decodeScenario(data []byte) scenario {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	var s scenario
	flags := next()
	s.p = DefaultPolicy()
	s.p.WeightedMaglev = flags&1 != 0
	s.p.DropTrafficIfUnhealthy = flags&2 != 0
	s.p.ConnectionDrainOnFailover = flags&4 != 0
	s.p.AutoCapacityDrain = flags&8 != 0
	s.p.Zonal.Mode = ZonalMode(flags >> 4 % 3)
	if flags&64 != 0 {
		s.p.FailbackDelay = 10 * time.Second
	}
	s.p.ConnectionDrainingTimeout = time.Duration(flags>>7) * 30 * time.Second
	r := next()
	s.p.FailoverRatio = float64(r%5) / 4
	s.p.Zonal.SpilloverRatio = float64(r/5%3) / 2

	g := next()
	ng := 1 + int(g%4)
	for i := range ng {
		role := RolePrimary
		if i > 0 && g>>(2+i)&1 != 0 {
			role = RoleFailover
		}
		s.groups = append(s.groups, Group{Name: fmt.Sprintf("g%d", i), Role: role, Zone: fmt.Sprintf("z%d", i%2),
			CapacityScaler: []float64{1, 0.5, 0, 0.25}[(int(g>>6)+i)%4], Preferred: i == 1 && g&0x80 != 0})
	}
	nb := 1 + int(next()%12)
	for step := 0; step < 4 && len(data) > 0; step++ {
		var bs []Backend
		for i := range nb {
			h, wt, st := next(), next(), next()
			b := Backend{Name: fmt.Sprintf("10.0.0.%d", i+1), ID: uint32(i + 1), Group: s.groups[i%ng].Name,
				Health: Health(h % 3), Weight: uint32(wt) * 4, WeightState: WeightState(st % 4)}
			if b.Weight > MaxWeight {
				b.Weight = MaxWeight
			}
			if st&0x10 != 0 {
				b.Admin = AdminDrained
			}
			if st&0x20 != 0 {
				b.Removed = true
			}
			bs = append(bs, b)
		}
		s.steps = append(s.steps, bs)
	}
	return s
}

func FuzzCompute(f *testing.F) {
	f.Add([]byte{0x05, 0x02, 0x0b, 0x06, 1, 10, 0, 2, 20, 0, 1, 0, 0, 1, 5, 0, 2, 5, 0, 2, 5, 0})
	f.Add([]byte{0x0f, 0x03, 0x1f, 0x08, 1, 250, 0, 1, 3, 1, 2, 0, 0x10, 1, 7, 0x20, 0, 0, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := decodeScenario(data)
		var prev *State
		now := t0
		for i, bs := range s.steps {
			now = now.Add(7 * time.Second)
			st, err := Compute(s.p, s.groups, bs, prev, now)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			checkInvariants(t, s, st, prev)
			shuffled := slices.Clone(bs)
			slices.Reverse(shuffled)
			again, err := Compute(s.p, reversed(s.groups), shuffled, prev, now)
			if err != nil || names(again.Eligible, true) != names(st.Eligible, true) || !slices.Equal(again.Backends, st.Backends) {
				t.Fatalf("step %d: result depends on input order", i)
			}
			prev = st
		}
	})
}

func checkInvariants(t *testing.T, s scenario, st, prev *State) {
	t.Helper()
	if (st.Tier == TierEmpty) != (len(st.Eligible) == 0) {
		t.Fatalf("tier %v with %d eligible", st.Tier, len(st.Eligible))
	}
	var g uint32
	eligible := 0
	for i, m := range st.Eligible {
		if i > 0 && st.Eligible[i-1].Name >= m.Name {
			t.Fatalf("eligible not sorted or duplicated at %s", m.Name)
		}
		b := backendState(t, st, m.Name)
		if !b.InService || !b.Eligible {
			t.Fatalf("%s eligible but in service %v, eligible flag %v", m.Name, b.InService, b.Eligible)
		}
		if m.Weight == 0 {
			t.Fatalf("%s has Maglev weight 0", m.Name)
		}
		g = gcd(g, m.Weight)
		if st.Tier != TierLastResort && !m.Usable {
			t.Fatalf("tier %v with unusable member %s", st.Tier, m.Name)
		}
		if st.Tier == TierFailover && b.Role != RoleFailover || st.Tier != TierFailover && b.Role != RolePrimary {
			t.Fatalf("tier %v with %v member %s", st.Tier, b.Role, m.Name)
		}
	}
	if len(st.Eligible) > 0 && g != 1 {
		t.Fatalf("weights not reduced: gcd %d", g)
	}
	for _, b := range st.Backends {
		if b.Eligible {
			eligible++
		}
		if b.Usable && !b.InService {
			t.Fatalf("%s usable but not in service", b.Name)
		}
		if prev == nil {
			continue
		}
		if pb, ok := prev.Backend(b.Name); ok && (b.UnhealthyGen < pb.UnhealthyGen || b.DrainGen < pb.DrainGen || b.DrainFloor < pb.DrainFloor || b.DrainFloor > b.DrainGen) {
			t.Fatalf("%s generations went back: %+v after %+v", b.Name, b, *pb)
		}
	}
	if eligible != len(st.Eligible) {
		t.Fatalf("%d backends flagged eligible, %d members", eligible, len(st.Eligible))
	}
	if prev != nil && st.FlushGen < prev.FlushGen {
		t.Fatalf("FlushGen went back")
	}
	if s.p.ConnectionDrainOnFailover && st.FlushGen != 0 {
		t.Fatalf("FlushGen %d with drain on failover", st.FlushGen)
	}
	drained := 0
	for _, gs := range st.Groups {
		if gs.AutoDrained {
			drained++
		}
	}
	if drained > len(st.Groups)/2 {
		t.Fatalf("%d of %d groups auto-drained", drained, len(st.Groups))
	}
	for _, v := range st.Zones {
		for _, m := range v.Members {
			if v.Local && m.Zone != v.Zone {
				t.Fatalf("zone %s local view holds %s of zone %s", v.Zone, m.Name, m.Zone)
			}
			if slices.ContainsFunc(st.Eligible, func(e Member) bool { return e.Name == m.Name }) {
				continue
			}
			// STAY_WITHIN_ZONE falls back to the zone's backends in service
			// when none of its backends is eligible.
			zoneEligible := slices.ContainsFunc(st.Eligible, func(e Member) bool { return e.Zone == v.Zone })
			if s.p.Zonal.Mode != ZonalStayWithinZone || zoneEligible || !backendState(t, st, m.Name).InService {
				t.Fatalf("zone %s view holds %s, not eligible", v.Zone, m.Name)
			}
		}
	}
}
