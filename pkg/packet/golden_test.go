package packet_test

import (
	"github.com/xlbnet/xlb/pkg/packet"

	"github.com/xlbnet/xlb/pkg/packettest"
)

const (
	client4 = "198.51.100.7"
	vip4    = "203.0.113.10"
	router4 = "192.0.2.1"
	client6 = "fd00::7"
	vip6    = "fd00:1::10"
	router6 = "fd00:2::1"

	syn = packet.TCPFlagSYN
	ack = packet.TCPFlagACK
	psh = packet.TCPFlagPSH
)

type golden struct {
	name  string
	frame []byte
	want  packet.Meta
	res   packet.Result
}

// m4 is the Meta of an IPv4 packet client4 → vip4 at l3 with header length
// hl and total length tl; f sets what differs.
func m4(l3, hl, tl int, proto uint8, f func(*packet.Meta)) packet.Meta {
	m := packet.Meta{
		Tuple:  packet.Tuple{Src: mapped(client4), Dst: mapped(vip4), Proto: proto},
		Family: packet.IPv4,
		L3Off:  uint16(l3), L4Off: uint16(l3 + hl), L3End: uint16(l3 + tl),
		TTL: 64,
	}
	if f != nil {
		f(&m)
	}
	return m
}

// m6 is the Meta of an IPv6 packet client6 → vip6 at l3 whose transport
// header starts ext bytes after the fixed header, with payload length pl.
func m6(l3, ext, pl int, proto uint8, f func(*packet.Meta)) packet.Meta {
	m := packet.Meta{
		Tuple:  packet.Tuple{Src: mapped(client6), Dst: mapped(vip6), Proto: proto},
		Family: packet.IPv6,
		L3Off:  uint16(l3), L4Off: uint16(l3 + 40 + ext), L3End: uint16(l3 + 40 + pl),
		TTL: 64,
	}
	if f != nil {
		f(&m)
	}
	return m
}

// goldens returns valid frames of every protocol the parser knows, each
// with the Meta it must produce. Frames are rebuilt per call so tests may
// modify them.
func goldens() []golden {
	const df = 0x4000
	// The TCP SYN-ACK a backend sent (VIP → client), as quoted by a router.
	quotedTCP := packettest.IPv4{Src: vip4, Dst: client4, Proto: packet.ProtoTCP, Frag: df}.
		Build(packettest.TCP(80, 40000, syn|ack))[:28]
	quotedUDP6 := packettest.IPv6{Src: vip6, Dst: client6, Next: packet.ProtoUDP}.Build(packettest.UDP(53, 5353, packettest.Bytes(1400)...))[:48+64]
	quotedUDP4opt := packettest.IPv4{Src: vip4, Dst: client4, Proto: packet.ProtoUDP,
		Options: []byte{1, 1, 1, 0}}.Build(packettest.UDP(53, 5353, packettest.Bytes(100)...))[:24+8+16]

	return []golden{
		{
			name:  "tcp4-syn",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoTCP, TOS: 0x10, Frag: df}.Build(packettest.TCP(40000, 80, syn))),
			want: m4(14, 20, 40, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.TOS, m.DF = 40000, 80, syn, 0x10, true
			}),
		},
		{
			name:  "tcp4-ack-payload",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoTCP, TTL: 3}.Build(packettest.TCPOpt(40000, 443, ack|psh, []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, packettest.Bytes(100)...))),
			want: m4(14, 20, 20+32+100, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.TTL = 40000, 443, ack|psh, 3
			}),
		},
		{
			name:  "udp4-l2-padding",
			frame: packettest.Pad(packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoUDP, ID: 7}.Build(packettest.UDP(5353, 53, 1, 2))), 60),
			want: m4(14, 20, 30, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 5353, 53
			}),
		},
		{
			name:  "icmp4-echo",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoICMP}.Build(packettest.ICMP(8, 0, 0x12340001, packettest.Bytes(56)...))),
			want: m4(14, 20, 20+8+56, packet.ProtoICMP, func(m *packet.Meta) {
				m.ICMPType, m.ICMPEchoID = 8, 0x1234
			}),
		},
		{
			name:  "icmp4-frag-needed-tcp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: router4, Dst: vip4, Proto: packet.ProtoICMP, TTL: 250}.Build(packettest.ICMP(3, 4, 1400, quotedTCP...))),
			want: m4(14, 20, 20+8+28, packet.ProtoICMP, func(m *packet.Meta) {
				m.Src, m.TTL = mapped(router4), 250
				m.ICMPType, m.ICMPCode, m.ICMPMTU = 3, 4, 1400
				m.Inner = packet.Tuple{Src: mapped(vip4), Dst: mapped(client4), SrcPort: 80, DstPort: 40000, Proto: packet.ProtoTCP}
				m.InnerOff, m.HasInner = 14+20+8, true
			}),
		},
		{
			name:  "icmp4-port-unreachable-udp-inner-options",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: router4, Dst: vip4, Proto: packet.ProtoICMP}.Build(packettest.ICMP(3, 3, 0, quotedUDP4opt...))),
			want: m4(14, 20, 20+8+48, packet.ProtoICMP, func(m *packet.Meta) {
				m.Src = mapped(router4)
				m.ICMPType, m.ICMPCode = 3, 3
				m.Inner = packet.Tuple{Src: mapped(vip4), Dst: mapped(client4), SrcPort: 53, DstPort: 5353, Proto: packet.ProtoUDP}
				m.InnerOff, m.HasInner = 14+20+8, true
			}),
		},
		{
			name:  "icmp4-time-exceeded-tcp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: router4, Dst: vip4, Proto: packet.ProtoICMP}.Build(packettest.ICMP(11, 0, 0, quotedTCP...))),
			want: m4(14, 20, 20+8+28, packet.ProtoICMP, func(m *packet.Meta) {
				m.Src = mapped(router4)
				m.ICMPType = 11
				m.Inner = packet.Tuple{Src: mapped(vip4), Dst: mapped(client4), SrcPort: 80, DstPort: 40000, Proto: packet.ProtoTCP}
				m.InnerOff, m.HasInner = 14+20+8, true
			}),
		},
		{
			name:  "esp4",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoESP}.Build(packettest.ESP(0xdeadbeef, 1, packettest.Bytes(40)...))),
			want:  m4(14, 20, 20+8+40, packet.ProtoESP, nil),
		},
		{
			name:  "gre4",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoGRE}.Build(packettest.GRE(0x2000, packet.EtherTypeIPv4, packettest.Cat(packettest.BE32(42), packettest.Bytes(20))...))),
			want:  m4(14, 20, 20+8+20, packet.ProtoGRE, nil),
		},
		{
			name:  "frag4-first-udp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoUDP, ID: 0xbeef, Frag: 0x2000}.Build(packettest.UDPLen(5000, 4500, 3000, packettest.Bytes(1472)...))),
			want: m4(14, 20, 1500, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 5000, 4500
				m.Frag, m.FragID = packet.FragFirst, 0xbeef
			}),
		},
		{
			name:  "frag4-nonfirst-udp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoUDP, ID: 0xbeef, Frag: 185}.Build(packettest.Bytes(1528))),
			want: m4(14, 20, 20+1528, packet.ProtoUDP, func(m *packet.Meta) {
				m.Frag, m.FragID = packet.FragNonFirst, 0xbeef
			}),
		},
		{
			name:  "vlan-tcp4",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4, 0x2064), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoTCP}.Build(packettest.TCP(40001, 80, ack))),
			want: m4(18, 20, 40, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags = 40001, 80, ack
				m.HasVLAN, m.VLANTCI = true, 0x2064
			}),
		},
		{
			name: "ipv4-options-tcp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoTCP,
				Options: []byte{7, 7, 4, 0, 0, 0, 0, 1}}.Build(packettest.TCP(40002, 80, syn))),
			want: m4(14, 28, 48, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.IPOptions = 40002, 80, syn, true
			}),
		},
		{
			name:  "ipip4",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoIPIP}.Build(packettest.IPv4{Src: router4, Dst: vip4, Proto: packet.ProtoUDP}.Build(packettest.UDP(1, 2)))),
			want:  m4(14, 20, 48, packet.ProtoIPIP, nil),
		},
		{
			name:  "tcp6-syn",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.ProtoTCP, TC: 0xb8, Flow: 0x12345}.Build(packettest.TCP(40000, 80, syn))),
			want: m6(14, 0, 20, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.TOS = 40000, 80, syn, 0xb8
			}),
		},
		{
			name:  "tcp6-ack",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.ProtoTCP, Hop: 1}.Build(packettest.TCP(40000, 80, ack, packettest.Bytes(10)...))),
			want: m6(14, 0, 30, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.TTL = 40000, 80, ack, 1
			}),
		},
		{
			name:  "udp6",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.ProtoUDP}.Build(packettest.UDP(5353, 53, packettest.Bytes(32)...))),
			want: m6(14, 0, 40, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 5353, 53
			}),
		},
		{
			name:  "icmp6-echo",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.ProtoICMPv6}.Build(packettest.ICMP(128, 0, 0x43210007, packettest.Bytes(56)...))),
			want: m6(14, 0, 64, packet.ProtoICMPv6, func(m *packet.Meta) {
				m.ICMPType, m.ICMPEchoID = 128, 0x4321
			}),
		},
		{
			name:  "icmp6-packet-too-big-udp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: router6, Dst: vip6, Next: packet.ProtoICMPv6}.Build(packettest.ICMP(2, 0, 1280, quotedUDP6...))),
			want: m6(14, 0, 8+112, packet.ProtoICMPv6, func(m *packet.Meta) {
				m.Src = mapped(router6)
				m.ICMPType, m.ICMPMTU = 2, 1280
				m.Inner = packet.Tuple{Src: mapped(vip6), Dst: mapped(client6), SrcPort: 53, DstPort: 5353, Proto: packet.ProtoUDP}
				m.InnerOff, m.HasInner = 14+40+8, true
			}),
		},
		{
			name: "icmp6-dst-unreachable-inner-ext-tcp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: router6, Dst: vip6, Next: packet.ProtoICMPv6}.Build(packettest.ICMP(1, 4, 0,
				packettest.IPv6{Src: vip6, Dst: client6, Next: packet.IPv6ExtDestination}.Build(packettest.Cat(packettest.Ext6(packet.ProtoTCP, 0), packettest.TCP(443, 40000, ack)))[:40+8+8]...))),
			want: m6(14, 0, 8+56, packet.ProtoICMPv6, func(m *packet.Meta) {
				m.Src = mapped(router6)
				m.ICMPType, m.ICMPCode = 1, 4
				m.Inner = packet.Tuple{Src: mapped(vip6), Dst: mapped(client6), SrcPort: 443, DstPort: 40000, Proto: packet.ProtoTCP}
				m.InnerOff, m.HasInner = 14+40+8, true
			}),
		},
		{
			name:  "esp6",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.ProtoESP}.Build(packettest.ESP(0x01020304, 9, packettest.Bytes(24)...))),
			want:  m6(14, 0, 32, packet.ProtoESP, nil),
		},
		{
			name:  "gre6",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.ProtoGRE}.Build(packettest.GRE(0, packet.EtherTypeIPv6, packettest.Bytes(40)...))),
			want:  m6(14, 0, 44, packet.ProtoGRE, nil),
		},
		{
			name:  "frag6-first-udp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.IPv6ExtFragment}.Build(packettest.Cat(packettest.Frag6(packet.ProtoUDP, 0, true, 0xcafe0001), packettest.UDPLen(5000, 4500, 3000, packettest.Bytes(1000)...)))),
			want: m6(14, 8, 8+8+1000, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 5000, 4500
				m.Frag, m.FragID = packet.FragFirst, 0xcafe0001
			}),
		},
		{
			name:  "frag6-nonfirst-udp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.IPv6ExtFragment}.Build(packettest.Cat(packettest.Frag6(packet.ProtoUDP, 1008, false, 0xcafe0001), packettest.Bytes(500)))),
			want: m6(14, 8, 508, packet.ProtoUDP, func(m *packet.Meta) {
				m.Frag, m.FragID = packet.FragNonFirst, 0xcafe0001
			}),
		},
		{
			name:  "frag6-atomic-tcp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.IPv6ExtFragment}.Build(packettest.Cat(packettest.Frag6(packet.ProtoTCP, 0, false, 77), packettest.TCP(40000, 80, ack)))),
			want: m6(14, 8, 28, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags = 40000, 80, ack
			}),
		},
		{
			name: "ipv6-hbh-dstopts-frag-udp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.IPv6ExtHopByHop}.Build(packettest.Cat(
				packettest.Ext6(packet.IPv6ExtDestination, 0), packettest.Ext6(packet.IPv6ExtFragment, 1), packettest.Frag6(packet.ProtoUDP, 0, true, 5), packettest.UDPLen(7000, 53, 4000, packettest.Bytes(64)...)))),
			want: m6(14, 8+16+8, 8+16+8+8+64, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 7000, 53
				m.Frag, m.FragID = packet.FragFirst, 5
			}),
		},
		{
			name: "ipv6-routing-ah-tcp",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.IPv6ExtRouting}.Build(packettest.Cat(
				packettest.Routing6(packet.IPv6ExtAH, router6), packettest.Auth6(packet.ProtoTCP), packettest.TCP(40000, 22, ack)))),
			want: m6(14, 24+24, 24+24+20, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags = 40000, 22, ack
			}),
		},
		{
			name:  "ipv6-no-next-header",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.IPv6ExtDestination}.Build(packettest.Ext6(packet.IPv6NoNextHeader, 0))),
			want:  m6(14, 8, 8, packet.IPv6NoNextHeader, nil),
		},
		{
			name:  "vlan-udp6",
			frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv6, 0x0005), packettest.IPv6{Src: client6, Dst: vip6, Next: packet.ProtoUDP}.Build(packettest.UDP(1234, 443, packettest.Bytes(3)...))),
			want: m6(18, 0, 11, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 1234, 443
				m.HasVLAN, m.VLANTCI = true, 5
			}),
		},
	}
}

// passFrames are frames Parse hands to the kernel.
func passFrames() []golden {
	arp := packettest.Cat(packettest.Eth(packet.EtherTypeARP), packettest.BE16(1), packettest.BE16(0x0800), []byte{6, 4}, packettest.BE16(1), packettest.Bytes(20))
	return []golden{
		{name: "arp", frame: packettest.Pad(arp, 60), res: packet.PassNonIP},
		{name: "lldp", frame: packettest.Pad(packettest.Cat(packettest.Eth(packet.EtherTypeLLDP), packettest.Bytes(20)), 60), res: packet.PassNonIP},
		{name: "ieee802.3-length", frame: packettest.Pad(packettest.Cat(packettest.Eth(46), packettest.Bytes(46)), 60), res: packet.PassNonIP},
		{name: "vlan-arp", frame: packettest.Pad(packettest.Cat(packettest.Eth(packet.EtherTypeARP, 7), packettest.Bytes(28)), 64), res: packet.PassNonIP},
		{name: "qinq-8100-8100", frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4, 1, 2), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoUDP}.Build(packettest.UDP(1, 2))), res: packet.PassUnsupportedL2},
		{name: "qinq-88a8", frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4, 0x88a80001, 2), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoUDP}.Build(packettest.UDP(1, 2))), res: packet.PassUnsupportedL2},
		{name: "qinq-9100", frame: packettest.Cat(packettest.Eth(packet.EtherTypeIPv4, 0x91000001), packettest.IPv4{Src: client4, Dst: vip4, Proto: packet.ProtoUDP}.Build(packettest.UDP(1, 2))), res: packet.PassUnsupportedL2},
	}
}
