package packet_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

// diffMeta lists the fields in which got and want differ, one per line.
func diffMeta(got, want packet.Meta) string {
	var sb strings.Builder
	var walk func(prefix string, g, w reflect.Value)
	walk = func(prefix string, g, w reflect.Value) {
		if g.Kind() == reflect.Struct {
			for i := 0; i < g.NumField(); i++ {
				walk(prefix+g.Type().Field(i).Name+".", g.Field(i), w.Field(i))
			}
			return
		}
		if !g.Equal(w) {
			fmt.Fprintf(&sb, "\n  %s got %v, want %v", strings.TrimSuffix(prefix, "."), g.Interface(), w.Interface())
		}
	}
	walk("", reflect.ValueOf(got), reflect.ValueOf(want))
	return sb.String()
}

func TestParseGolden(t *testing.T) {
	for _, g := range append(goldens(), passFrames()...) {
		t.Run(g.name, func(t *testing.T) {
			got, res := packet.Parse(g.frame)
			if res != g.res {
				t.Fatalf("Parse() result = %v, want %v", res, g.res)
			}
			if g.res != packet.OK {
				return
			}
			if got != g.want {
				t.Errorf("Parse() meta differs:%s", diffMeta(got, g.want))
			}
			if got.IsICMPError() != got.HasInner {
				t.Errorf("IsICMPError() = %v, HasInner = %v", got.IsICMPError(), got.HasInner)
			}
		})
	}
}

// frame6 wraps an IPv6 payload (starting with header type nh) in Ethernet.
func frame6(nh uint8, payload []byte) []byte {
	return packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: nh}.Build(payload))
}

// frame4 wraps an IPv4 payload of protocol proto in Ethernet.
func frame4(h packettest.IPv4, payload []byte) []byte {
	if h.Src == "" {
		h.Src, h.Dst = client4, vip4
	}
	return packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), h.Build(payload))
}

func dstOpts(n int, last uint8) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		nh := packet.IPv6ExtDestination
		if i == n-1 {
			nh = last
		}
		b = packettest.Cat(b, packettest.Ext6(nh, 0))
	}
	return b
}

type malformed struct {
	name  string
	frame []byte
	want  packet.Result
}

func malformedFrames() []malformed {
	tcpP, udpP, icmpP := packet.ProtoTCP, packet.ProtoUDP, packet.ProtoICMP
	quoted4 := packettest.IPv4{Src: vip4, Dst: client4, Proto: tcpP}.Build(packettest.TCP(80, 40000, ack))
	quoted6 := packettest.IPv6{Src: vip6, Dst: client6, Next: udpP}.Build(packettest.UDP(53, 5353, packettest.Bytes(8)...))
	return []malformed{
		{"l2-short", packettest.Eth(packet.EtherTypeIPv4)[:10], packet.DropTruncatedL2},
		{"l2-empty", nil, packet.DropTruncatedL2},
		{"l2-vlan-cut", packettest.Eth(packet.EtherTypeIPv4, 5)[:16], packet.DropTruncatedL2},
		{"l3-v4-19", packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4}.Build(nil)[:19]), packet.DropTruncatedL3},
		{"l3-v6-39", packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6}.Build(nil)[:39]), packet.DropTruncatedL3},
		{"l3-vlan-v4-0", packettest.Eth(packet.EtherTypeIPv4, 5), packet.DropTruncatedL3},
		{"l4-tcp4", frame4(packettest.IPv4{Proto: tcpP}, packettest.TCP(1, 2, syn)[:19]), packet.DropTruncatedL4},
		{"l4-udp4", frame4(packettest.IPv4{Proto: udpP}, packettest.UDP(1, 2)[:7]), packet.DropTruncatedL4},
		{"l4-icmp4", frame4(packettest.IPv4{Proto: icmpP}, packettest.ICMP(8, 0, 0)[:7]), packet.DropTruncatedL4},
		{"l4-esp4", frame4(packettest.IPv4{Proto: packet.ProtoESP}, packettest.ESP(1, 2)[:7]), packet.DropTruncatedL4},
		{"l4-gre4", frame4(packettest.IPv4{Proto: packet.ProtoGRE}, packettest.GRE(0, 0x800)[:3]), packet.DropTruncatedL4},
		{"l4-tcp6", frame6(tcpP, packettest.TCP(1, 2, syn)[:19]), packet.DropTruncatedL4},
		{"l4-icmp6", frame6(packet.ProtoICMPv6, packettest.ICMP(128, 0, 0)[:4]), packet.DropTruncatedL4},
		{"l4-tcp6-after-ext", frame6(packet.IPv6ExtDestination, packettest.Cat(packettest.Ext6(tcpP, 0), packettest.TCP(1, 2, syn)[:10])), packet.DropTruncatedL4},
		{"version-6-in-v4", frame4(packettest.IPv4{Proto: udpP, Version: 6}, packettest.UDP(1, 2)), packet.DropBadIPVersion},
		{"version-4-in-v6", packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Version: 4, Next: udpP}.Build(packettest.UDP(1, 2))), packet.DropBadIPVersion},
		{"ihl-4", frame4(packettest.IPv4{Proto: udpP, IHL: 4}, packettest.UDP(1, 2)), packet.DropIPv4IHLTooSmall},
		{"ihl-15-beyond", frame4(packettest.IPv4{Proto: udpP, IHL: 15, TotalLen: 60}, packettest.UDP(1, 2)), packet.DropIPv4IHLBeyondFrame},
		{"total-length-19", frame4(packettest.IPv4{Proto: udpP, TotalLen: 19}, packettest.UDP(1, 2)), packet.DropIPv4TotalLengthTooSmall},
		{"total-length-less-than-options", frame4(packettest.IPv4{Proto: udpP, TotalLen: 22, Options: []byte{1, 1, 1, 1}}, packettest.UDP(1, 2)), packet.DropIPv4TotalLengthTooSmall},
		{"total-length-beyond", frame4(packettest.IPv4{Proto: udpP, TotalLen: 100}, packettest.UDP(1, 2)), packet.DropIPv4TotalLengthBeyondFrame},
		{"bad-checksum", frame4(packettest.IPv4{Proto: udpP, BadSum: true}, packettest.UDP(1, 2)), packet.DropIPv4BadChecksum},
		{"v6-payload-beyond", packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: udpP, PayloadLen: 100}.Build(packettest.UDP(1, 2))), packet.DropIPv6PayloadLengthBeyondFrame},
		{"ext-9-headers", frame6(packet.IPv6ExtDestination, packettest.Cat(dstOpts(9, udpP), packettest.UDP(1, 2))), packet.DropIPv6ExtChainTooLong},
		{"ext-264-bytes", frame6(packet.IPv6ExtDestination, packettest.Cat(packettest.Ext6(udpP, 32), packettest.UDP(1, 2))), packet.DropIPv6ExtChainTooLong},
		{"ext-truncated", frame6(packet.IPv6ExtDestination, packettest.Ext6(udpP, 2)[:16]), packet.DropIPv6ExtHeaderTruncated},
		{"ext-truncated-under-8", frame6(packet.IPv6ExtRouting, packettest.Ext6(udpP, 0)[:6]), packet.DropIPv6ExtHeaderTruncated},
		{"hbh-not-first", frame6(packet.IPv6ExtDestination, packettest.Cat(packettest.Ext6(packet.IPv6ExtHopByHop, 0), packettest.Ext6(udpP, 0), packettest.UDP(1, 2))), packet.DropIPv6HopByHopMisplaced},
		{"hbh-repeated", frame6(packet.IPv6ExtHopByHop, packettest.Cat(packettest.Ext6(packet.IPv6ExtHopByHop, 0), packettest.Ext6(udpP, 0), packettest.UDP(1, 2))), packet.DropIPv6HopByHopMisplaced},
		{"frag-repeated", frame6(packet.IPv6ExtFragment, packettest.Cat(packettest.Frag6(packet.IPv6ExtFragment, 0, true, 1), packettest.Frag6(udpP, 0, true, 1), packettest.UDP(1, 2))), packet.DropIPv6FragmentRepeated},
		{"frag-repeated-after-atomic", frame6(packet.IPv6ExtFragment, packettest.Cat(packettest.Frag6(packet.IPv6ExtFragment, 0, false, 1), packettest.Frag6(udpP, 8, true, 1), packettest.UDP(1, 2))), packet.DropIPv6FragmentRepeated},
		{"frag6-chain-ext-cut", frame6(packet.IPv6ExtFragment, packettest.Cat(packettest.Frag6(packet.IPv6ExtDestination, 0, true, 1), packettest.Ext6(udpP, 3)[:16])), packet.DropIPv6FragmentChainIncomplete},
		{"frag6-chain-l4-cut", frame6(packet.IPv6ExtFragment, packettest.Cat(packettest.Frag6(tcpP, 0, true, 1), packettest.TCP(1, 2, syn)[:16])), packet.DropIPv6FragmentChainIncomplete},
		{"frag6-chain-tcp-options-cut", frame6(packet.IPv6ExtFragment, packettest.Cat(packettest.Frag6(tcpP, 0, true, 1), packettest.TCPOpt(1, 2, syn, packettest.Bytes(20))[:32])), packet.DropIPv6FragmentChainIncomplete},
		{"frag4-tcp-offset-1", frame4(packettest.IPv4{Proto: tcpP, Frag: 1}, packettest.Bytes(16)), packet.DropFragmentTiny},
		{"frag4-first-tcp-12", frame4(packettest.IPv4{Proto: tcpP, Frag: 0x2000}, packettest.TCP(1, 2, syn)[:12]), packet.DropFragmentTiny},
		{"frag4-first-tcp-options-cut", frame4(packettest.IPv4{Proto: tcpP, Frag: 0x2000}, packettest.TCPOpt(1, 2, syn, packettest.Bytes(20))[:24]), packet.DropFragmentTiny},
		{"frag4-first-udp-4", frame4(packettest.IPv4{Proto: udpP, Frag: 0x2000}, packettest.UDP(1, 2)[:4]), packet.DropFragmentTiny},
		{"frag6-tcp-offset-8", frame6(packet.IPv6ExtFragment, packettest.Cat(packettest.Frag6(tcpP, 8, true, 1), packettest.Bytes(16))), packet.DropFragmentTiny},
		{"frag4-overflow", frame4(packettest.IPv4{Proto: udpP, Frag: 0x1fff}, packettest.Bytes(16)), packet.DropFragmentOverflow},
		{"frag6-overflow", frame6(packet.IPv6ExtFragment, packettest.Cat(packettest.Frag6(udpP, 0xfff8, false, 1), packettest.Bytes(16))), packet.DropFragmentOverflow},
		{"tcp-doff-4", frame4(packettest.IPv4{Proto: tcpP}, func() []byte { b := packettest.TCP(1, 2, syn); b[12] = 4 << 4; return b }()), packet.DropBadTCPDataOffset},
		{"tcp-doff-beyond", frame4(packettest.IPv4{Proto: tcpP}, func() []byte { b := packettest.TCP(1, 2, syn); b[12] = 6 << 4; return b }()), packet.DropBadTCPDataOffset},
		{"tcp6-doff-0", frame6(tcpP, func() []byte { b := packettest.TCP(1, 2, syn); b[12] = 0; return b }()), packet.DropBadTCPDataOffset},
		{"tcp-syn-fin", frame4(packettest.IPv4{Proto: tcpP}, packettest.TCP(1, 2, syn|packet.TCPFlagFIN)), packet.DropBadTCPFlags},
		{"tcp-syn-rst", frame6(tcpP, packettest.TCP(1, 2, syn|packet.TCPFlagRST|ack)), packet.DropBadTCPFlags},
		{"tcp-null", frame4(packettest.IPv4{Proto: tcpP}, packettest.TCP(1, 2, 0)), packet.DropBadTCPFlags},
		{"tcp-only-ece-cwr", frame4(packettest.IPv4{Proto: tcpP}, packettest.TCP(1, 2, packet.TCPFlagECE|packet.TCPFlagCWR)), packet.DropBadTCPFlags},
		{"udp-length-7", frame4(packettest.IPv4{Proto: udpP}, packettest.UDPLen(1, 2, 7)), packet.DropBadUDPLength},
		{"udp-length-beyond", frame6(udpP, packettest.UDPLen(1, 2, 100, 1, 2, 3)), packet.DropBadUDPLength},
		{"udp-first-frag-length-7", frame4(packettest.IPv4{Proto: udpP, Frag: 0x2000}, packettest.UDPLen(1, 2, 7, packettest.Bytes(16)...)), packet.DropBadUDPLength},
		{"icmp4-inner-27", frame4(packettest.IPv4{Proto: icmpP, Src: router4, Dst: vip4}, packettest.ICMP(3, 4, 1400, quoted4[:27]...)), packet.DropICMPInnerTruncated},
		{"icmp4-inner-options-cut", frame4(packettest.IPv4{Proto: icmpP, Src: router4, Dst: vip4}, packettest.ICMP(11, 0, 0, packettest.IPv4{Src: vip4, Dst: client4, Proto: tcpP, Options: packettest.Bytes(8)}.Build(packettest.TCP(1, 2, ack))[:32]...)), packet.DropICMPInnerTruncated},
		{"icmp4-inner-empty", frame4(packettest.IPv4{Proto: icmpP, Src: router4, Dst: vip4}, packettest.ICMP(12, 0, 0)), packet.DropICMPInnerTruncated},
		{"icmp6-inner-47", frame6(packet.ProtoICMPv6, packettest.ICMP(2, 0, 1280, quoted6[:47]...)), packet.DropICMPInnerTruncated},
		{"icmp6-inner-ext-cut", frame6(packet.ProtoICMPv6, packettest.ICMP(1, 0, 0, packettest.IPv6{Src: vip6, Dst: client6, Next: packet.IPv6ExtDestination}.Build(packettest.Ext6(udpP, 4))[:60]...)), packet.DropICMPInnerTruncated},
		{"icmp6-inner-l4-cut", frame6(packet.ProtoICMPv6, packettest.ICMP(3, 0, 0, packettest.IPv6{Src: vip6, Dst: client6, Next: packet.IPv6ExtDestination}.Build(packettest.Cat(packettest.Ext6(udpP, 0), packettest.UDP(1, 2)))[:52]...)), packet.DropICMPInnerTruncated},
		{"icmp4-inner-version-6", frame4(packettest.IPv4{Proto: icmpP, Src: router4, Dst: vip4}, packettest.ICMP(3, 1, 0, quoted6[:48]...)), packet.DropICMPInnerMalformed},
		{"icmp4-inner-ihl-3", frame4(packettest.IPv4{Proto: icmpP, Src: router4, Dst: vip4}, packettest.ICMP(3, 1, 0, func() []byte { b := bytes.Clone(quoted4); b[0] = 0x43; return b }()...)), packet.DropICMPInnerMalformed},
		{"icmp6-inner-version-4", frame6(packet.ProtoICMPv6, packettest.ICMP(1, 0, 0, packettest.Cat(quoted4, packettest.Bytes(20))...)), packet.DropICMPInnerMalformed},
		{"icmp6-inner-hbh-misplaced", frame6(packet.ProtoICMPv6, packettest.ICMP(1, 0, 0, packettest.IPv6{Src: vip6, Dst: client6, Next: packet.IPv6ExtDestination}.Build(packettest.Cat(packettest.Ext6(packet.IPv6ExtHopByHop, 0), packettest.Ext6(udpP, 0), packettest.UDP(1, 2)))...)), packet.DropICMPInnerMalformed},
		{"frame-too-long", packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), make([]byte, packet.MaxFrameSize)), packet.DropFrameTooLong},
	}
}

func TestParseMalformed(t *testing.T) {
	seen := make(map[packet.Result]bool)
	for _, c := range malformedFrames() {
		t.Run(c.name, func(t *testing.T) {
			_, res := packet.Parse(c.frame)
			if res != c.want {
				t.Errorf("Parse() result = %v, want %v", res, c.want)
			}
			if res.Class() != packet.ClassDrop {
				t.Errorf("%v.Class() = %v, want drop", res, res.Class())
			}
			seen[c.want] = true
		})
	}
	// Every drop reason must have a frame that produces it.
	for r := packet.Result(0); int(r) < packet.NumResults; r++ {
		if r.Class() == packet.ClassDrop && !seen[r] {
			t.Errorf("no malformed frame for drop reason %v", r)
		}
	}
}

// truncations are the results a frame cut short (with its IP length
// fields left as they were) may produce.
var truncations = map[packet.Result]bool{
	packet.DropTruncatedL2:                  true,
	packet.DropTruncatedL3:                  true,
	packet.DropIPv4IHLBeyondFrame:           true,
	packet.DropIPv4TotalLengthBeyondFrame:   true,
	packet.DropIPv6PayloadLengthBeyondFrame: true,
}

// TestParseCutFrames cuts every golden frame at every offset. Below the
// IP packet's end the result must be a truncation drop; from there on (L2
// padding) the Meta must be unchanged. The cut slice has no spare
// capacity, so a read past its length would panic.
func TestParseCutFrames(t *testing.T) {
	for _, g := range goldens() {
		t.Run(g.name, func(t *testing.T) {
			for n := 0; n <= len(g.frame); n++ {
				f := bytes.Clone(g.frame[:n])[:n:n]
				m, res := packet.Parse(f)
				if n >= int(g.want.L3End) {
					if res != packet.OK || m != g.want {
						t.Fatalf("cut at %d (in L2 padding): result %v, meta diff:%s", n, res, diffMeta(m, g.want))
					}
					continue
				}
				if !truncations[res] {
					t.Fatalf("cut at %d of %d: result %v, want a truncation drop", n, len(g.frame), res)
				}
			}
		})
	}
}

// shortened are the results of a frame whose IP packet was cut and whose
// IP length fields were then fixed to match.
var shortened = map[packet.Result]bool{
	packet.OK:                              true,
	packet.DropTruncatedL4:                 true,
	packet.DropFragmentTiny:                true,
	packet.DropIPv6FragmentChainIncomplete: true,
	packet.DropIPv6ExtHeaderTruncated:      true,
	packet.DropBadUDPLength:                true,
	packet.DropBadTCPDataOffset:            true,
	packet.DropICMPInnerTruncated:          true,
}

// TestParseShortenedPackets cuts the IP packet of every golden frame at
// every offset after its fixed header and fixes the IP length (and IPv4
// checksum): the parser must then blame the right layer and, when it still
// accepts the packet, keep offsets inside it.
func TestParseShortenedPackets(t *testing.T) {
	for _, g := range goldens() {
		t.Run(g.name, func(t *testing.T) {
			l3 := int(g.want.L3Off)
			for n := int(g.want.L4Off); n <= int(g.want.L3End); n++ {
				f := bytes.Clone(g.frame[:n])[:n:n]
				if g.want.Family == packet.IPv4 {
					ip := packet.IPv4Header(f[l3:])
					ip.SetTotalLength(uint16(n - l3))
					ip.SetChecksum(ip.CalculateChecksum())
				} else {
					packet.IPv6Header(f[l3:]).SetPayloadLength(uint16(n - l3 - 40))
				}
				m, res := packet.Parse(f)
				if !shortened[res] {
					t.Fatalf("shortened to %d: result %v, want OK or a transport-layer drop", n, res)
				}
				if n == int(g.want.L3End) && (res != packet.OK || m != g.want) {
					t.Fatalf("unshortened: result %v, meta diff:%s", res, diffMeta(m, g.want))
				}
				if res != packet.OK {
					continue
				}
				if m.L3End != uint16(n) || m.L4Off != g.want.L4Off || m.Tuple.Proto != g.want.Proto || m.Src != g.want.Src {
					t.Fatalf("shortened to %d: meta diff:%s", n, diffMeta(m, g.want))
				}
			}
		})
	}
}

func TestParseAllocs(t *testing.T) {
	frames := append(goldens(), passFrames()...)
	for _, c := range malformedFrames() {
		frames = append(frames, golden{name: c.name, frame: c.frame})
	}
	for _, g := range frames {
		var sink packet.Meta
		allocs := testing.AllocsPerRun(100, func() {
			sink, _ = packet.Parse(g.frame)
		})
		if allocs != 0 {
			t.Errorf("%s: Parse allocates %v times per call, want 0", g.name, allocs)
		}
		if allocs := testing.AllocsPerRun(100, func() { packet.ParseInto(g.frame, &sink) }); allocs != 0 {
			t.Errorf("%s: ParseInto allocates %v times per call, want 0", g.name, allocs)
		}
	}
}

func TestResultNames(t *testing.T) {
	seen := map[string]packet.Result{}
	for r := packet.Result(0); int(r) < packet.NumResults; r++ {
		s := r.String()
		if s == "" || s == "unknown" || strings.ContainsAny(s, " _ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Errorf("Result(%d).String() = %q, want a lower-case metric label", r, s)
		}
		if prev, dup := seen[s]; dup {
			t.Errorf("Result(%d) and Result(%d) share the label %q", prev, r, s)
		}
		seen[s] = r
	}
	if got := packet.Result(packet.NumResults).String(); got != "unknown" {
		t.Errorf("out-of-range String() = %q, want unknown", got)
	}
	tests := []struct {
		r    packet.Result
		want packet.Class
	}{
		{packet.OK, packet.ClassOK},
		{packet.PassNonIP, packet.ClassPass},
		{packet.PassUnsupportedL2, packet.ClassPass},
		{packet.DropTruncatedL3, packet.ClassDrop},
		{packet.DropFrameTooLong, packet.ClassDrop},
		{packet.Result(200), packet.ClassDrop},
	}
	for _, tt := range tests {
		if got := tt.r.Class(); got != tt.want {
			t.Errorf("%v.Class() = %v, want %v", tt.r, got, tt.want)
		}
		if got := tt.r.IsDrop(); got != (tt.want == packet.ClassDrop) {
			t.Errorf("%v.IsDrop() = %v", tt.r, got)
		}
	}
	if packet.ClassOK.String() != "ok" || packet.ClassPass.String() != "pass" || packet.ClassDrop.String() != "drop" {
		t.Errorf("Class names = %v %v %v", packet.ClassOK, packet.ClassPass, packet.ClassDrop)
	}
}
