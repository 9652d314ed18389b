package failover

import (
	"net/netip"
	"testing"
)

func zonalGroups() []Group {
	return []Group{
		{Name: "a", Role: RolePrimary, Zone: "zone-a", CapacityScaler: 1},
		{Name: "b", Role: RolePrimary, Zone: "zone-b", CapacityScaler: 1},
		{Name: "c", Role: RolePrimary, Zone: "zone-c", CapacityScaler: 0.5},
		{Name: "f", Role: RoleFailover, Zone: "zone-a", CapacityScaler: 1},
	}
}

// Zonal affinity (seeds 003 "Zonal affinity", implications item 20): a
// zone view narrows the eligible set to the client's zone when the zone
// has enough usable members, else spills to the whole set.
func TestZonalAffinityViews(t *testing.T) {
	clients := []ClientZone{{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Zone: "zone-a"}, {Prefix: netip.MustParsePrefix("192.0.2.0/24"), Zone: "zone-d"}}
	cases := []struct {
		name     string
		mode     ZonalMode
		ratio    float64
		drop     bool // drop_traffic_if_unhealthy
		backends []Backend
		want     map[string]string // zone → "local|spill: members"
	}{
		{name: "spill ratio 0: one usable member keeps the zone", mode: ZonalSpillCrossZone,
			backends: []Backend{be("a1", "a", up), be("a2", "a", down), be("a3", "a", down), be("b1", "b", up), be("c1", "c", up), be("c2", "c", up)},
			want: map[string]string{
				"zone-a": "local: a1:1",
				"zone-b": "local: b1:1",
				"zone-c": "local: c1:1 c2:1",
				"zone-d": "spill: a1:2 b1:2 c1:1 c2:1",
			}},
		{name: "spill ratio 0.5: 1 of 3 usable spills", mode: ZonalSpillCrossZone, ratio: 0.5,
			backends: []Backend{be("a1", "a", up), be("a2", "a", down), be("a3", "a", down), be("b1", "b", up), be("b2", "b", down), be("c1", "c", down)},
			want: map[string]string{
				"zone-a": "spill: a1:1 b1:1",
				"zone-b": "local: b1:1",
				"zone-c": "spill: a1:1 b1:1",
				"zone-d": "spill: a1:1 b1:1",
			}},
		{name: "spill: last resort members are not usable", mode: ZonalSpillCrossZone,
			backends: []Backend{be("a1", "a", down), be("b1", "b", down)},
			want: map[string]string{
				"zone-a": "spill: a1:1 b1:1",
				"zone-b": "spill: a1:1 b1:1",
				"zone-c": "spill: a1:1 b1:1",
				"zone-d": "spill: a1:1 b1:1",
			}},
		{name: "stay within zone", mode: ZonalStayWithinZone,
			backends: []Backend{be("a1", "a", up), be("b1", "b", up), be("b2", "b", up)},
			want: map[string]string{
				"zone-a": "local: a1:1",
				"zone-b": "local: b1:1 b2:1",
				"zone-c": "local: ",
				"zone-d": "local: ",
			}},
		{name: "stay within zone: unhealthy members when none is healthy", mode: ZonalStayWithinZone,
			backends: []Backend{be("a1", "a", down), be("b1", "b", down)},
			want: map[string]string{
				"zone-a": "local: a1:1",
				"zone-b": "local: b1:1",
				"zone-c": "local: ",
				"zone-d": "local: ",
			}},
		{name: "stay within zone: the zone's backends when none of them is healthy", mode: ZonalStayWithinZone,
			backends: []Backend{be("a1", "a", down), be("a2", "a", down), be("b1", "b", up), be("c1", "c", up)},
			want: map[string]string{
				"zone-a": "local: a1:1 a2:1",
				"zone-b": "local: b1:1",
				"zone-c": "local: c1:1",
				"zone-d": "local: ",
			}},
		{name: "stay within zone: nothing when drop_traffic_if_unhealthy empties the set", mode: ZonalStayWithinZone, drop: true,
			backends: []Backend{be("a1", "a", down), be("b1", "b", down), be("f1", "f", down)},
			want: map[string]string{
				"zone-a": "local: ",
				"zone-b": "local: ",
				"zone-c": "local: ",
				"zone-d": "local: ",
			}},
		{name: "failover tier: zones of the failover side", mode: ZonalSpillCrossZone,
			backends: []Backend{be("a1", "a", down), be("f1", "f", up), be("f2", "f", up)},
			want: map[string]string{
				"zone-a": "local: f1:1 f2:1",
				"zone-b": "spill: f1:1 f2:1",
				"zone-c": "spill: f1:1 f2:1",
				"zone-d": "spill: f1:1 f2:1",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.Zonal = ZonalAffinity{Mode: tc.mode, SpilloverRatio: tc.ratio, Clients: clients}
			p.DropTrafficIfUnhealthy = tc.drop
			st := mustCompute(t, p, zonalGroups(), tc.backends, nil, t0)
			if len(st.Zones) != len(tc.want) {
				t.Fatalf("%d zone views, want %d", len(st.Zones), len(tc.want))
			}
			for i, v := range st.Zones {
				if i > 0 && st.Zones[i-1].Zone >= v.Zone {
					t.Errorf("zone views not sorted: %q before %q", st.Zones[i-1].Zone, v.Zone)
				}
				kind := "spill"
				if v.Local {
					kind = "local"
				}
				if got := kind + ": " + names(v.Members, true); got != tc.want[v.Zone] {
					t.Errorf("zone %s: %q, want %q", v.Zone, got, tc.want[v.Zone])
				}
			}
		})
	}
}

func TestZonalDisabled(t *testing.T) {
	st := mustCompute(t, DefaultPolicy(), zonalGroups(), []Backend{be("a1", "a", up), be("b1", "b", up)}, nil, t0)
	if st.Zones != nil {
		t.Fatalf("zone views with zonal affinity off: %+v", st.Zones)
	}
	if got, want := names(st.Zone("zone-a"), false), "a1 b1"; got != want {
		t.Errorf("Zone(zone-a) = %q, want the default view %q", got, want)
	}
}

func TestZoneOf(t *testing.T) {
	z := ZonalAffinity{Clients: []ClientZone{
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Zone: "wide"},
		{Prefix: netip.MustParsePrefix("198.51.100.128/25"), Zone: "narrow"},
		{Prefix: netip.MustParsePrefix("fd00::/8"), Zone: "v6"},
	}}
	cases := []struct {
		addr, zone string
		ok         bool
	}{
		{"198.51.100.7", "wide", true},
		{"198.51.100.200", "narrow", true},
		{"::ffff:198.51.100.200", "narrow", true},
		{"fd00::1", "v6", true},
		{"203.0.113.1", "", false},
	}
	for _, tc := range cases {
		zone, ok := z.ZoneOf(netip.MustParseAddr(tc.addr))
		if zone != tc.zone || ok != tc.ok {
			t.Errorf("ZoneOf(%s) = %q, %v; want %q, %v", tc.addr, zone, ok, tc.zone, tc.ok)
		}
	}
}
