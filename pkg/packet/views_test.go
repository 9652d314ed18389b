package packet_test

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

// The getters are checked against frames written by the builder (which
// does not use the views); the setters are checked by writing a value and
// reading the raw bytes back.

func TestIPv4HeaderView(t *testing.T) {
	hdr := packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoUDP, TOS: 0xb8, TTL: 17, ID: 0x1234, Frag: 0x4000 | 0x2000 | 3,
		Options: []byte{1, 1, 1, 0}}.Build(packettest.UDP(1, 2))
	ip := packet.IPv4Header(hdr)
	got := []any{ip.Version(), ip.HeaderLength(), ip.TOS(), ip.TotalLength(), ip.ID(), ip.DF(), ip.MoreFragments(),
		ip.FragmentOffset(), ip.TTL(), ip.Protocol(), ip.SourceAddress(), ip.DestinationAddress(), len(ip.Options()), ip.IsChecksumValid()}
	want := []any{uint8(4), 24, uint8(0xb8), uint16(32), uint16(0x1234), true, true,
		24, uint8(17), packet.ProtoUDP, addr(client4).As4(), addr(vip4).As4(), 4, true}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("getter %d = %v, want %v", i, got[i], want[i])
		}
	}
	if c := ip.CalculateChecksum(); c != ip.Checksum() {
		t.Errorf("CalculateChecksum() = %#04x, stored %#04x", c, ip.Checksum())
	}

	ip.SetTTLWithChecksumUpdate(3)
	ip.SetTotalLengthWithChecksumUpdate(1500)
	if ip.TTL() != 3 || ip.TotalLength() != 1500 || !ip.IsChecksumValid() {
		t.Errorf("after incremental updates: TTL %d length %d checksum valid %v", ip.TTL(), ip.TotalLength(), ip.IsChecksumValid())
	}

	b := make([]byte, 20)
	ip = packet.IPv4Header(b)
	ip.SetVersionIHL(20)
	ip.SetTOS(0x10)
	ip.SetTotalLength(0x0102)
	ip.SetID(0x0304)
	ip.SetFlagsFragmentOffset(0x4000)
	ip.SetTTL(64)
	ip.SetProtocol(packet.ProtoTCP)
	ip.SetSourceAddress([4]byte{192, 0, 2, 1})
	ip.SetDestinationAddress([4]byte{203, 0, 113, 9})
	ip.SetChecksum(ip.CalculateChecksum())
	want4 := packettest.IPv4{Src: "192.0.2.1", Dst: "203.0.113.9", Proto: packet.ProtoTCP, TOS: 0x10, TTL: 64, ID: 0x0304, Frag: 0x4000, TotalLen: 0x0102}.Build(nil)
	if string(b) != string(want4) {
		t.Errorf("setters wrote % x, want % x", b, want4)
	}
}

func TestIPv6HeaderViews(t *testing.T) {
	pkt := packettest.IPv6{Src: client6, Dst: vip6, Next: packet.IPv6ExtHopByHop, TC: 0xa5, Hop: 9, Flow: 0xabcde}.Build(
		packettest.Cat(packettest.Ext6(packet.IPv6ExtAH, 1), packettest.Auth6(packet.IPv6ExtFragment), packettest.Frag6(packet.ProtoUDP, 1232, true, 0xfeedf00d), packettest.UDP(1, 2)))
	ip := packet.IPv6Header(pkt)
	if ip.Version() != 6 || ip.TrafficClass() != 0xa5 || ip.FlowLabel() != 0xabcde || ip.PayloadLength() != 16+24+8+8 ||
		ip.NextHeader() != packet.IPv6ExtHopByHop || ip.HopLimit() != 9 ||
		ip.SourceAddress() != addr(client6).As16() || ip.DestinationAddress() != addr(vip6).As16() {
		t.Errorf("IPv6 getters: % x", pkt[:40])
	}
	hbh := packet.IPv6ExtHeader(pkt[40:])
	if hbh.NextHeader() != packet.IPv6ExtAH || hbh.Length(packet.IPv6ExtHopByHop) != 16 {
		t.Errorf("hop-by-hop: next %d length %d", hbh.NextHeader(), hbh.Length(packet.IPv6ExtHopByHop))
	}
	ah := packet.IPv6ExtHeader(pkt[56:])
	if ah.NextHeader() != packet.IPv6ExtFragment || ah.Length(packet.IPv6ExtAH) != 24 {
		t.Errorf("AH: next %d length %d", ah.NextHeader(), ah.Length(packet.IPv6ExtAH))
	}
	fh := packet.IPv6FragmentHeader(pkt[80:])
	if fh.NextHeader() != packet.ProtoUDP || fh.FragmentOffset() != 1232 || !fh.MoreFragments() || fh.ID() != 0xfeedf00d {
		t.Errorf("fragment: %d %d %v %#x", fh.NextHeader(), fh.FragmentOffset(), fh.MoreFragments(), fh.ID())
	}

	b := make([]byte, 40)
	ip = packet.IPv6Header(b)
	ip.SetVersionTCFlow(0, 0xabcde)
	ip.SetTrafficClass(0xa5)
	ip.SetPayloadLength(56)
	ip.SetNextHeader(packet.IPv6ExtHopByHop)
	ip.SetHopLimit(9)
	ip.SetSourceAddress(addr(client6).As16())
	ip.SetDestinationAddress(addr(vip6).As16())
	if string(b) != string(pkt[:40]) {
		t.Errorf("setters wrote % x, want % x", b, pkt[:40])
	}
}

func TestTransportViews(t *testing.T) {
	th := packet.TCPHeader(packettest.TCPOpt(40000, 443, syn|ack, []byte{2, 4, 5, 0xb4}))
	if th.SourcePort() != 40000 || th.DestinationPort() != 443 || th.Sequence() != 1000 || th.Ack() != 2000 ||
		th.DataOffset() != 24 || th.Flags() != syn|ack || th.Window() != 65535 || th.Checksum() != 0 {
		t.Errorf("TCP getters: % x", []byte(th))
	}
	th.SetSourcePort(1)
	th.SetDestinationPort(2)
	th.SetChecksum(0xabcd)
	if string(th[:4]) != "\x00\x01\x00\x02" || string(th[16:18]) != "\xab\xcd" {
		t.Errorf("TCP setters: % x", []byte(th))
	}

	uh := packet.UDPHeader(packettest.UDP(5353, 53, 1, 2, 3))
	if uh.SourcePort() != 5353 || uh.DestinationPort() != 53 || uh.Length() != 11 || uh.Checksum() != 0 {
		t.Errorf("UDP getters: % x", []byte(uh))
	}
	uh.SetSourcePort(6080)
	uh.SetDestinationPort(6081)
	uh.SetLength(1400)
	uh.SetChecksum(0x1234)
	if string(uh) != string(packettest.UDPLen(6080, 6081, 1400, 1, 2, 3)[:6])+"\x12\x34\x01\x02\x03" {
		t.Errorf("UDP setters: % x", []byte(uh))
	}

	ic := packet.ICMPv4Header(packettest.ICMP(3, 4, 1400))
	if ic.Type() != 3 || ic.Code() != 4 || ic.MTU() != 1400 || ic.Checksum() != 0 || len(ic.Payload()) != 0 {
		t.Errorf("ICMPv4 getters: % x", []byte(ic))
	}
	ic.SetType(8)
	ic.SetCode(0)
	ic.SetIdent(0x1111)
	ic.SetSequence(0x2222)
	ic.SetChecksum(0x3333)
	if ic.Ident() != 0x1111 || ic.Sequence() != 0x2222 || string(ic) != string(packettest.ICMP(8, 0, 0x11112222))[:2]+"\x33\x33\x11\x11\x22\x22" {
		t.Errorf("ICMPv4 setters: % x", []byte(ic))
	}
	ic.SetMTU(576)
	if string(ic[4:]) != "\x00\x00\x02\x40" {
		t.Errorf("ICMPv4 SetMTU: % x", []byte(ic))
	}

	i6 := packet.ICMPv6Header(packettest.ICMP(2, 0, 1280, 0x60))
	if i6.Type() != 2 || i6.Code() != 0 || i6.MTU() != 1280 || i6.Payload()[0] != 0x60 {
		t.Errorf("ICMPv6 getters: % x", []byte(i6))
	}
	i6.SetType(129)
	i6.SetCode(0)
	i6.SetIdent(7)
	i6.SetSequence(8)
	i6.SetChecksum(9)
	if i6.Ident() != 7 || i6.Sequence() != 8 || i6.Checksum() != 9 || i6.Type() != 129 {
		t.Errorf("ICMPv6 setters: % x", []byte(i6))
	}
	i6.SetMTU(1500)
	if i6.MTU() != 1500 {
		t.Errorf("ICMPv6 SetMTU: % x", []byte(i6))
	}

	e := packet.ESPHeader(packettest.ESP(0xdeadbeef, 42))
	if e.SPI() != 0xdeadbeef || e.Sequence() != 42 {
		t.Errorf("ESP: % x", []byte(e))
	}

	tests := []struct {
		name     string
		hdr      []byte
		ver      uint8
		proto    uint16
		hdrLen   int
		key      uint32
		keyFound bool
	}{
		{"plain", packettest.GRE(0, packet.EtherTypeIPv4), 0, packet.EtherTypeIPv4, 4, 0, false},
		{"key", packettest.GRE(0x2000, packet.EtherTypeIPv6, packettest.BE32(77)...), 0, packet.EtherTypeIPv6, 8, 77, true},
		{"csum-key-seq", packettest.GRE(0xb000, 0x6558, packettest.Cat(packettest.BE32(0), packettest.BE32(99), packettest.BE32(1))...), 0, 0x6558, 16, 99, true},
		{"pptp", packettest.GRE(0x3001, 0x880b, packettest.Cat(packettest.BE32(5), packettest.BE32(6))...), 1, 0x880b, 12, 5, true},
	}
	for _, tt := range tests {
		g := packet.GREHeader(tt.hdr)
		key, found := g.Key()
		if g.Version() != tt.ver || g.Protocol() != tt.proto || g.HeaderLength() != tt.hdrLen || key != tt.key || found != tt.keyFound {
			t.Errorf("GRE %s: version %d proto %#x len %d key %d/%v", tt.name, g.Version(), g.Protocol(), g.HeaderLength(), key, found)
		}
	}
	g := packet.GREHeader(make([]byte, 4))
	g.SetFlagsVersion(0x2000)
	g.SetProtocol(packet.EtherTypeIPv4)
	if string(g) != "\x20\x00\x08\x00" || g.FlagsVersion() != 0x2000 {
		t.Errorf("GRE setters: % x", []byte(g))
	}
}

func TestEthernetViews(t *testing.T) {
	f := packettest.Eth(packet.EtherTypeIPv6, 0xa00a)
	e := packet.EthernetHeader(f)
	if e.Destination() != macDst || e.Source() != macSrc || e.Type() != packet.EtherTypeVLAN {
		t.Errorf("Ethernet getters: % x", f)
	}
	v := packet.VLANTag(f[packet.EthernetMinimumSize:])
	if v.TCI() != 0xa00a || v.ID() != 0x00a || v.Type() != packet.EtherTypeIPv6 {
		t.Errorf("VLAN getters: % x", f)
	}
	b := make([]byte, 18)
	e = packet.EthernetHeader(b)
	e.SetDestination(macDst)
	e.SetSource(macSrc)
	e.SetType(packet.EtherTypeVLAN)
	v = packet.VLANTag(b[14:])
	v.SetTCI(0xa00a)
	v.SetType(packet.EtherTypeIPv6)
	if string(b) != string(f) {
		t.Errorf("setters wrote % x, want % x", b, f)
	}
}

func TestIsValidTCPFlags(t *testing.T) {
	const fin, rst, urg, ece, cwr = packet.TCPFlagFIN, packet.TCPFlagRST, packet.TCPFlagURG, packet.TCPFlagECE, packet.TCPFlagCWR
	tests := []struct {
		flags uint8
		want  bool
	}{
		{syn, true}, {syn | ack, true}, {ack, true}, {fin | ack, true}, {rst, true}, {rst | ack, true},
		{psh | ack, true}, {urg | ack, true}, {syn | ece | cwr, true}, {fin, true},
		{0, false}, {ece, false}, {cwr | ece, false}, {syn | fin, false}, {syn | rst, false}, {syn | fin | rst | psh | ack | urg, false},
	}
	for _, tt := range tests {
		if got := packet.IsValidTCPFlags(tt.flags); got != tt.want {
			t.Errorf("IsValidTCPFlags(%#02x) = %v, want %v", tt.flags, got, tt.want)
		}
	}
}
