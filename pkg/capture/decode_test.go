package capture

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	pt "github.com/xlbnet/xlb/pkg/packettest"
)

// gopacketSummary is the listing as gopacket decodes the frame: the
// independent decoder Summary is checked against (and what the listing
// printed before it had its own).
func gopacketSummary(data []byte) string {
	pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	var parts []string
	ls := pkt.Layers()
	cut := pkt.ErrorLayer() != nil && len(ls) >= 2
	if cut { // the layer that failed to decode, then its DecodeFailure
		ls = ls[:len(ls)-2]
	}
	for _, l := range ls {
		switch l := l.(type) {
		case *layers.IPv4:
			parts = append(parts, fmt.Sprintf("IPv4 %s > %s", l.SrcIP, l.DstIP))
		case *layers.IPv6:
			parts = append(parts, fmt.Sprintf("IPv6 %s > %s", l.SrcIP, l.DstIP))
		case *layers.TCP:
			var f []byte
			for _, x := range []struct {
				on bool
				c  byte
			}{{l.SYN, 'S'}, {l.FIN, 'F'}, {l.RST, 'R'}, {l.PSH, 'P'}, {l.ACK, '.'}} {
				if x.on {
					f = append(f, x.c)
				}
			}
			parts = append(parts, fmt.Sprintf("TCP %d > %d [%s]", l.SrcPort, l.DstPort, f))
		case *layers.UDP:
			parts = append(parts, fmt.Sprintf("UDP %d > %d", l.SrcPort, l.DstPort))
		case *layers.ICMPv4:
			parts = append(parts, "ICMP "+l.TypeCode.String())
		case *layers.ICMPv6:
			parts = append(parts, "ICMPv6 "+l.TypeCode.String())
		case *layers.GRE:
			parts = append(parts, "GRE")
		}
	}
	if len(parts) == 0 {
		if el := pkt.Layer(layers.LayerTypeEthernet); el != nil {
			return "ethertype " + el.(*layers.Ethernet).EthernetType.String()
		}
		return "undecodable frame"
	}
	if cut {
		parts = append(parts, "(cut)")
	}
	return strings.Join(parts, " | ")
}

// Frames as xlb sees and sends them, with the line each must list.
var summaryFrames = []struct {
	name, want string
	frame      []byte
	gueOnly    bool // gopacket stops at the GUE port's UDP header
}{
	{"tcp syn", "IPv4 198.51.100.7 > 203.0.113.10 | TCP 40000 > 80 [S]",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 6}.Build(pt.TCP(40000, 80, 0x02))), false},
	{"tcp flags", "IPv4 198.51.100.7 > 203.0.113.10 | TCP 40000 > 80 [FRP.]",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 6}.Build(pt.TCP(40000, 80, 0x1d, 'x'))), false},
	{"udp over vlan", "IPv4 198.51.100.7 > 203.0.113.10 | UDP 40000 > 443",
		pt.Cat(pt.Eth(0x0800, 100), pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 17}.Build(pt.UDP(40000, 443, 1, 2, 3))), false},
	{"udp over qinq", "IPv4 198.51.100.7 > 203.0.113.10 | UDP 40000 > 443",
		pt.Cat(pt.Eth(0x0800, 0x88a80064, 200), pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 17}.Build(pt.UDP(40000, 443))), false},
	{"ipv4 options", "IPv4 198.51.100.7 > 203.0.113.10 | TCP 1 > 2 [.]",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 6, Options: []byte{1, 1, 1, 0}}.Build(pt.TCP(1, 2, 0x10))), false},
	{"ipv4 fragment", "IPv4 198.51.100.7 > 203.0.113.10",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 6, Frag: 0x2000}.Build(pt.TCP(1, 2, 0x10))), false},
	{"tcp over ipv6", "IPv6 2001:db8::7 > 2001:db8:1::10 | TCP 40000 > 443 [S.]",
		pt.Cat(pt.Eth(0x86dd), pt.IPv6{Src: "2001:db8::7", Dst: "2001:db8:1::10", Next: 6}.Build(pt.TCP(40000, 443, 0x12))), false},
	{"ipv6 extension headers", "IPv6 2001:db8::7 > 2001:db8:1::10 | UDP 5 > 6",
		pt.Cat(pt.Eth(0x86dd), pt.IPv6{Src: "2001:db8::7", Dst: "2001:db8:1::10", Next: 0}.Build(pt.Cat(pt.Ext6(60, 0), pt.Ext6(17, 1), pt.UDP(5, 6)))), false},
	{"ipv6 fragment", "IPv6 2001:db8::7 > 2001:db8:1::10",
		pt.Cat(pt.Eth(0x86dd), pt.IPv6{Src: "2001:db8::7", Dst: "2001:db8:1::10", Next: 44}.Build(pt.Cat(pt.Frag6(17, 0, true, 9), pt.UDP(5, 6)))), false},
	{"ipip", "IPv4 198.18.0.2 > 10.0.1.10 | IPv4 198.51.100.7 > 203.0.113.10 | TCP 40000 > 80 [S]",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "198.18.0.2", Dst: "10.0.1.10", Proto: 4}.Build(
			pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 6}.Build(pt.TCP(40000, 80, 0x02)))), false},
	{"ipv6 in ipv6", "IPv6 fd00::2 > fd00::10 | IPv6 2001:db8::7 > 2001:db8:1::10 | UDP 40000 > 53",
		pt.Cat(pt.Eth(0x86dd), pt.IPv6{Src: "fd00::2", Dst: "fd00::10", Next: 41}.Build(
			pt.IPv6{Src: "2001:db8::7", Dst: "2001:db8:1::10", Next: 17}.Build(pt.UDP(40000, 53)))), false},
	{"gre", "IPv4 198.18.0.2 > 10.0.1.10 | GRE | IPv4 198.51.100.7 > 203.0.113.10 | TCP 40000 > 80 [.]",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "198.18.0.2", Dst: "10.0.1.10", Proto: 47}.Build(pt.GRE(0, 0x0800,
			pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 6}.Build(pt.TCP(40000, 80, 0x10))...))), false},
	{"gre with key", "IPv6 fd00::2 > fd00::10 | GRE | IPv6 2001:db8::7 > 2001:db8:1::10 | TCP 40000 > 80 [.]",
		pt.Cat(pt.Eth(0x86dd), pt.IPv6{Src: "fd00::2", Dst: "fd00::10", Next: 47}.Build(pt.GRE(0x2000, 0x86dd, pt.Cat(pt.BE32(7),
			pt.IPv6{Src: "2001:db8::7", Dst: "2001:db8:1::10", Next: 6}.Build(pt.TCP(40000, 80, 0x10)))...))), false},
	{"gue", "IPv4 198.18.0.2 > 10.0.1.10 | UDP 49200 > 6080 | IPv4 198.51.100.7 > 203.0.113.10 | TCP 40000 > 80 [S]",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "198.18.0.2", Dst: "10.0.1.10", Proto: 17}.Build(pt.UDP(49200, 6080,
			pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 6}.Build(pt.TCP(40000, 80, 0x02))...))), true},
	{"icmp echo", "IPv4 198.51.100.7 > 203.0.113.10 | ICMP EchoRequest",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 1}.Build(pt.ICMP(8, 0, 0x10001))), false},
	{"icmp frag needed", "IPv4 203.0.113.10 > 198.51.100.7 | ICMP DestinationUnreachable(FragmentationNeeded)",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "203.0.113.10", Dst: "198.51.100.7", Proto: 1}.Build(pt.ICMP(3, 4, 1400,
			pt.IPv4{Src: "198.51.100.7", Dst: "203.0.113.10", Proto: 6}.Build(pt.TCP(40000, 80, 0x10))[:28]...))), false},
	{"icmp code without a name", "IPv4 203.0.113.10 > 198.51.100.7 | ICMP TimeExceeded(Code: 7)",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "203.0.113.10", Dst: "198.51.100.7", Proto: 1}.Build(pt.ICMP(11, 7, 0))), false},
	{"icmp type without a name", "IPv4 203.0.113.10 > 198.51.100.7 | ICMP 42(1)",
		pt.Cat(pt.Eth(0x0800), pt.IPv4{Src: "203.0.113.10", Dst: "198.51.100.7", Proto: 1}.Build(pt.ICMP(42, 1, 0))), false},
	{"icmpv6 too big", "IPv6 2001:db8:1::10 > 2001:db8::7 | ICMPv6 PacketTooBig",
		pt.Cat(pt.Eth(0x86dd), pt.IPv6{Src: "2001:db8:1::10", Dst: "2001:db8::7", Next: 58}.Build(pt.ICMP(2, 0, 1280,
			pt.IPv6{Src: "2001:db8::7", Dst: "2001:db8:1::10", Next: 6}.Build(pt.TCP(40000, 80, 0x10))...))), false},
	{"icmpv6 unreachable", "IPv6 2001:db8:1::10 > 2001:db8::7 | ICMPv6 DestinationUnreachable(PortUnreachable)",
		pt.Cat(pt.Eth(0x86dd), pt.IPv6{Src: "2001:db8:1::10", Dst: "2001:db8::7", Next: 58}.Build(pt.ICMP(1, 4, 0))), false},
	{"icmpv6 neighbor solicitation", "IPv6 fd00::1 > ff02::1:ff00:2 | ICMPv6 NeighborSolicitation",
		pt.Cat(pt.Eth(0x86dd), pt.IPv6{Src: "fd00::1", Dst: "ff02::1:ff00:2", Next: 58, Hop: 255}.Build(pt.ICMP(135, 0, 0, pt.Addr("fd00::2")...))), false},
	{"arp", "ethertype ARP", pt.Cat(pt.Eth(0x0806), make([]byte, 28)), false},
	{"unknown ether type", "ethertype 0x88b5", pt.Cat(pt.Eth(0x88b5), make([]byte, 28)), false},
	{"runt", "undecodable frame", make([]byte, 13), false},
}

// TestSummary: each frame's line, and gopacket's decoding of the frame
// gives the same line, for the whole frame and for every length it can be
// cut to (a snap length).
func TestSummary(t *testing.T) {
	for _, tc := range summaryFrames {
		t.Run(tc.name, func(t *testing.T) {
			p := Packet{Data: tc.frame}
			if got := p.Summary(); got != tc.want {
				t.Errorf("Summary\n got %s\nwant %s", got, tc.want)
			}
			for n := len(tc.frame); n >= 0; n-- {
				got, gp := (&Packet{Data: tc.frame[:n]}).Summary(), gopacketSummary(tc.frame[:n])
				if tc.gueOnly && strings.HasPrefix(got, gp) {
					continue // ours goes on into the inner packet
				}
				if got != gp && !unknownEtherType(gp, got) && (n == len(tc.frame) || !morePartsThan(got, gp)) {
					t.Fatalf("cut to %d bytes:\n      got %s\n gopacket %s", n, got, gp)
				}
			}
		})
	}
}

// morePartsThan: a cut frame of which the listing shows more than
// gopacket, which leaves out the header before one it could not decode
// when it does not keep the failed one ("ethertype IPv4" for an IPv4
// header and an ICMP header cut short), and does not call a frame whose
// IP header holds no payload cut.
func morePartsThan(got, gp string) bool {
	parts := func(s string) []string {
		if strings.HasPrefix(s, "ethertype ") {
			return nil
		}
		return strings.Split(strings.TrimSuffix(s, " | (cut)"), " | ")
	}
	g, o := parts(gp), parts(got)
	if len(o) < len(g) {
		return false
	}
	for i := range g {
		if g[i] != o[i] {
			return false
		}
	}
	return true
}

// unknownEtherType: gopacket names an ether type it does not know
// "UnknownEthernetType", the listing gives its number.
func unknownEtherType(gp, got string) bool {
	return gp == "ethertype UnknownEthernetType" && strings.HasPrefix(got, "ethertype 0x")
}

// FuzzSummary: any frame, however malformed, gets a line and no panic.
func FuzzSummary(f *testing.F) {
	for _, tc := range summaryFrames {
		f.Add(tc.frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		got := (&Packet{Data: frame}).Summary()
		if got == "" {
			t.Fatal("empty summary")
		}
	})
}
