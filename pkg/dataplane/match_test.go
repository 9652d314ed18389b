package dataplane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
)

func addr16(s string) [16]byte { return netip.MustParseAddr(s).As16() }

func TestMatcher(t *testing.T) {
	vip := addr16("203.0.113.10")
	vip6 := addr16("fd00:f1::10")
	rules := []RuleMatch{
		{VIP: vip, Protocol: RuleTCP, Ports: []PortRange{{80, 80}, {443, 443}, {8000, 8099}}}, // 0
		{VIP: vip, Protocol: RuleUDP, AllPorts: true},                                         // 1
		{VIP: vip, Protocol: RuleL3Default, AllPorts: true},                                   // 2
		{VIP: vip6, Protocol: RuleTCP, Ports: []PortRange{{80, 80}}},                          // 3
		{VIP: vip6, Protocol: RuleTCP, Ports: []PortRange{{22, 22}}},                          // 4
	}
	m, err := NewMatcher(rules)
	if err != nil {
		t.Fatal(err)
	}
	other := addr16("203.0.113.11")
	tests := []struct {
		name    string
		dst     [16]byte
		proto   uint8
		port    uint16
		hasPort bool
		want    int
	}{
		{"tcp port in list", vip, packet.ProtoTCP, 443, true, 0},
		{"tcp port range low edge", vip, packet.ProtoTCP, 8000, true, 0},
		{"tcp port range high edge", vip, packet.ProtoTCP, 8099, true, 0},
		{"tcp port outside falls to L3_DEFAULT", vip, packet.ProtoTCP, 8100, true, 2},
		{"tcp non-first fragment falls to L3_DEFAULT", vip, packet.ProtoTCP, 0, false, 2},
		{"udp any port", vip, packet.ProtoUDP, 53, true, 1},
		{"udp non-first fragment matches all-ports", vip, packet.ProtoUDP, 0, false, 1},
		{"esp goes to L3_DEFAULT", vip, packet.ProtoESP, 0, false, 2},
		{"icmp goes to L3_DEFAULT", vip, packet.ProtoICMP, 0, false, 2},
		{"ipv6 second rule", vip6, packet.ProtoTCP, 22, true, 4},
		{"ipv6 no L3_DEFAULT", vip6, packet.ProtoUDP, 22, true, -1},
		{"ipv6 fragment without all-ports rule", vip6, packet.ProtoTCP, 0, false, -1},
		{"not a VIP", other, packet.ProtoTCP, 80, true, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := m.Match(&tt.dst, tt.proto, tt.port, tt.hasPort); got != tt.want {
				t.Errorf("Match = %d, want %d", got, tt.want)
			}
		})
	}
	if !m.IsVIP(&vip6) || m.IsVIP(&other) {
		t.Error("IsVIP wrong")
	}
}

func TestMatcherRejectsOverlap(t *testing.T) {
	vip := addr16("203.0.113.10")
	tests := []struct {
		name  string
		rules []RuleMatch
		want  string
	}{
		{"same port twice", []RuleMatch{
			{VIP: vip, Protocol: RuleTCP, Ports: []PortRange{{80, 90}}},
			{VIP: vip, Protocol: RuleTCP, Ports: []PortRange{{90, 95}}},
		}, "also claimed"},
		{"ports and all-ports", []RuleMatch{
			{VIP: vip, Protocol: RuleUDP, Ports: []PortRange{{53, 53}}},
			{VIP: vip, Protocol: RuleUDP, AllPorts: true},
		}, "overlaps"},
		{"two L3_DEFAULT", []RuleMatch{
			{VIP: vip, Protocol: RuleL3Default, AllPorts: true},
			{VIP: vip, Protocol: RuleL3Default, AllPorts: true},
		}, "already has an L3_DEFAULT"},
		{"reversed range", []RuleMatch{
			{VIP: vip, Protocol: RuleTCP, Ports: []PortRange{{90, 80}}},
		}, "reversed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewMatcher(tt.rules)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestMatcherManyVIPs(t *testing.T) {
	var rules []RuleMatch
	for i := 0; i < 300; i++ {
		a := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}).As16()
		rules = append(rules, RuleMatch{VIP: a, Protocol: RuleTCP, Ports: []PortRange{{80, 80}}})
	}
	m, err := NewMatcher(rules)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rules {
		if got := m.Match(&r.VIP, packet.ProtoTCP, 80, true); got != i {
			t.Fatalf("rule %d: Match = %d", i, got)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { m.Match(&rules[7].VIP, packet.ProtoTCP, 80, true) }); allocs != 0 {
		t.Errorf("Match allocates %v times", allocs)
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]Reason{}
	for r := Reason(0); int(r) < NumReasons; r++ {
		s := r.String()
		if s == "" || s == "reason-unknown" || strings.HasPrefix(s, "Result(") {
			t.Errorf("Reason(%d) has no name: %q", r, s)
		}
		if prev, dup := seen[s]; dup {
			t.Errorf("Reason(%d) and Reason(%d) share the name %q", r, prev, s)
		}
		seen[s] = r
	}
}
