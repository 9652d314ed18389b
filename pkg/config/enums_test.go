package config

import (
	"testing"
)

// TestEnumNames checks that every name parses back to its value.
func TestEnumNames(t *testing.T) {
	check := func(names []string, str func(uint8) string) {
		for i, n := range names {
			v, ok := parseEnum[uint8](names, n)
			if !ok || int(v) != i || str(v) != n {
				t.Errorf("%s: parse → %d %v, String → %s", n, v, ok, str(v))
			}
		}
		if str(uint8(len(names))) != "INVALID" {
			t.Errorf("out-of-range value of %v does not print INVALID", names)
		}
	}
	check(protocolNames, func(v uint8) string { return Protocol(v).String() })
	check(affinityNames, func(v uint8) string { return Affinity(v).String() })
	check(trackingModeNames, func(v uint8) string { return TrackingMode(v).String() })
	check(persistenceNames, func(v uint8) string { return Persistence(v).String() })
	check(lbPolicyNames, func(v uint8) string { return LBPolicy(v).String() })
	check(healthCheckTypeNames, func(v uint8) string { return HealthCheckType(v).String() })
	check(encapTypeNames, func(v uint8) string { return EncapType(v).String() })
	check(roleNames, func(v uint8) string { return Role(v).String() })
	check(zonalModeNames, func(v uint8) string { return ZonalMode(v).String() })
	check(xdpModeNames, func(v uint8) string { return XDPMode(v).String() })
	check(bindModeNames, func(v uint8) string { return BindMode(v).String() })
	check(unmatchedVIPTrafficNames, func(v uint8) string { return UnmatchedVIPTraffic(v).String() })
	if r, ok := ParseRole("failover"); !ok || r != RoleFailover {
		t.Error("ParseRole(failover)")
	}
	if _, ok := ParseRole("Failover"); ok {
		t.Error("ParseRole is case-insensitive")
	}
}

func TestPortsContains(t *testing.T) {
	ps := Ports{Ranges: []PortRange{{80, 80}, {8000, 8099}}}
	for _, tc := range []struct {
		p    uint16
		want bool
	}{{79, false}, {80, true}, {81, false}, {7999, false}, {8000, true}, {8099, true}, {8100, false}} {
		if got := ps.Contains(tc.p); got != tc.want {
			t.Errorf("Contains(%d) = %v", tc.p, got)
		}
	}
	if !(Ports{All: true}).Contains(1) {
		t.Error("ALL does not contain port 1")
	}
}
