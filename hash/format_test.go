package hash

import (
	"net/netip"
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
)

func TestKeyString(t *testing.T) {
	addr := netip.MustParseAddr
	k := Key{Src: addr("2001:db8::7").As16(), Dst: addr("2001:db8::10").As16(), Proto: packet.ProtoUDP, SrcPort: 5, DstPort: 53, Kind: Tuple5}
	for _, tc := range []struct {
		kind TupleKind
		want string
	}{
		{Tuple5, "UDP [2001:db8::7]:5 → [2001:db8::10]:53"},
		{Tuple3, "UDP 2001:db8::7 → 2001:db8::10"},
		{Tuple2, "2001:db8::7 → 2001:db8::10"},
		{TupleNone, "(none)"},
	} {
		k.Kind = tc.kind
		if got := k.String(); got != tc.want {
			t.Errorf("%d: %q, want %q", tc.kind, got, tc.want)
		}
	}
	// IPv4 keys are mapped into IPv6 and printed unmapped.
	v4 := Key{Src: addr("198.51.100.7").As16(), Dst: addr("203.0.113.10").As16(), Proto: packet.ProtoTCP, SrcPort: 40000, DstPort: 80, Kind: Tuple5}
	if got, want := v4.String(), "TCP 198.51.100.7:40000 → 203.0.113.10:80"; got != want {
		t.Errorf("v4: %q, want %q", got, want)
	}
}

func TestEnumStrings(t *testing.T) {
	for a, want := range map[Affinity]string{AffinityNone: "NONE", AffinityClientIPPortProto: "CLIENT_IP_PORT_PROTO", AffinityClientIPProto: "CLIENT_IP_PROTO", AffinityClientIP: "CLIENT_IP", 9: "Affinity(9)"} {
		if a.String() != want {
			t.Errorf("%d: %q, want %q", a, a.String(), want)
		}
	}
	for m, want := range map[TrackingMode]string{PerConnection: "PER_CONNECTION", PerSession: "PER_SESSION", 7: "TrackingMode(7)"} {
		if m.String() != want {
			t.Errorf("%d: %q, want %q", m, m.String(), want)
		}
	}
}
