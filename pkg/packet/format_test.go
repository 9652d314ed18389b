package packet_test

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
)

func TestProtoNames(t *testing.T) {
	for s, want := range map[string]uint8{"tcp": 6, "UDP": 17, "esp": 50, "47": 47, "icmpv6": 58, "ICMP": 1} {
		if got, err := packet.ParseProto(s); err != nil || got != want {
			t.Errorf("%s: %d %v", s, got, err)
		}
	}
	for _, s := range []string{"300", "SCTPX", ""} {
		if _, err := packet.ParseProto(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	for p, want := range map[uint8]string{6: "TCP", 17: "UDP", 1: "ICMP", 58: "ICMPv6", 50: "ESP", 47: "GRE", 132: "proto-132"} {
		if got := packet.ProtoName(p); got != want {
			t.Errorf("%d: %q, want %q", p, got, want)
		}
		if n, err := packet.ParseProto(packet.ProtoName(p)); p != 132 && (err != nil || n != p) {
			t.Errorf("%d does not parse back: %d, %v", p, n, err)
		}
	}
}
