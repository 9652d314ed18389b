package packet_test

import "github.com/xlbnet/xlb/pkg/packet"

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
	quotedTCP := v4{src: vip4, dst: client4, proto: packet.ProtoTCP, fragWord: df}.
		build(tcp(80, 40000, syn|ack))[:28]
	quotedUDP6 := v6{src: vip6, dst: client6, nh: packet.ProtoUDP}.build(udp(53, 5353, bytesN(1400)...))[:48+64]
	quotedUDP4opt := v4{src: vip4, dst: client4, proto: packet.ProtoUDP,
		options: []byte{1, 1, 1, 0}}.build(udp(53, 5353, bytesN(100)...))[:24+8+16]

	return []golden{
		{
			name:  "tcp4-syn",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoTCP, tos: 0x10, fragWord: df}.build(tcp(40000, 80, syn))),
			want: m4(14, 20, 40, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.TOS, m.DF = 40000, 80, syn, 0x10, true
			}),
		},
		{
			name:  "tcp4-ack-payload",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoTCP, ttl: 3}.build(tcpOpt(40000, 443, ack|psh, []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, bytesN(100)...))),
			want: m4(14, 20, 20+32+100, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.TTL = 40000, 443, ack|psh, 3
			}),
		},
		{
			name:  "udp4-l2-padding",
			frame: pad(cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoUDP, id: 7}.build(udp(5353, 53, 1, 2))), 60),
			want: m4(14, 20, 30, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 5353, 53
			}),
		},
		{
			name:  "icmp4-echo",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoICMP}.build(icmp(8, 0, 0x12340001, bytesN(56)...))),
			want: m4(14, 20, 20+8+56, packet.ProtoICMP, func(m *packet.Meta) {
				m.ICMPType, m.ICMPEchoID = 8, 0x1234
			}),
		},
		{
			name:  "icmp4-frag-needed-tcp",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: router4, dst: vip4, proto: packet.ProtoICMP, ttl: 250}.build(icmp(3, 4, 1400, quotedTCP...))),
			want: m4(14, 20, 20+8+28, packet.ProtoICMP, func(m *packet.Meta) {
				m.Src, m.TTL = mapped(router4), 250
				m.ICMPType, m.ICMPCode, m.ICMPMTU = 3, 4, 1400
				m.Inner = packet.Tuple{Src: mapped(vip4), Dst: mapped(client4), SrcPort: 80, DstPort: 40000, Proto: packet.ProtoTCP}
				m.InnerOff, m.HasInner = 14+20+8, true
			}),
		},
		{
			name:  "icmp4-port-unreachable-udp-inner-options",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: router4, dst: vip4, proto: packet.ProtoICMP}.build(icmp(3, 3, 0, quotedUDP4opt...))),
			want: m4(14, 20, 20+8+48, packet.ProtoICMP, func(m *packet.Meta) {
				m.Src = mapped(router4)
				m.ICMPType, m.ICMPCode = 3, 3
				m.Inner = packet.Tuple{Src: mapped(vip4), Dst: mapped(client4), SrcPort: 53, DstPort: 5353, Proto: packet.ProtoUDP}
				m.InnerOff, m.HasInner = 14+20+8, true
			}),
		},
		{
			name:  "icmp4-time-exceeded-tcp",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: router4, dst: vip4, proto: packet.ProtoICMP}.build(icmp(11, 0, 0, quotedTCP...))),
			want: m4(14, 20, 20+8+28, packet.ProtoICMP, func(m *packet.Meta) {
				m.Src = mapped(router4)
				m.ICMPType = 11
				m.Inner = packet.Tuple{Src: mapped(vip4), Dst: mapped(client4), SrcPort: 80, DstPort: 40000, Proto: packet.ProtoTCP}
				m.InnerOff, m.HasInner = 14+20+8, true
			}),
		},
		{
			name:  "esp4",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoESP}.build(esp(0xdeadbeef, 1, bytesN(40)...))),
			want:  m4(14, 20, 20+8+40, packet.ProtoESP, nil),
		},
		{
			name:  "gre4",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoGRE}.build(gre(0x2000, packet.EtherTypeIPv4, cat(be32(42), bytesN(20))...))),
			want:  m4(14, 20, 20+8+20, packet.ProtoGRE, nil),
		},
		{
			name:  "frag4-first-udp",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoUDP, id: 0xbeef, fragWord: 0x2000}.build(udpLen(5000, 4500, 3000, bytesN(1472)...))),
			want: m4(14, 20, 1500, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 5000, 4500
				m.Frag, m.FragID = packet.FragFirst, 0xbeef
			}),
		},
		{
			name:  "frag4-nonfirst-udp",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoUDP, id: 0xbeef, fragWord: 185}.build(bytesN(1528))),
			want: m4(14, 20, 20+1528, packet.ProtoUDP, func(m *packet.Meta) {
				m.Frag, m.FragID = packet.FragNonFirst, 0xbeef
			}),
		},
		{
			name:  "vlan-tcp4",
			frame: cat(eth(packet.EtherTypeIPv4, 0x2064), v4{src: client4, dst: vip4, proto: packet.ProtoTCP}.build(tcp(40001, 80, ack))),
			want: m4(18, 20, 40, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags = 40001, 80, ack
				m.HasVLAN, m.VLANTCI = true, 0x2064
			}),
		},
		{
			name: "ipv4-options-tcp",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoTCP,
				options: []byte{7, 7, 4, 0, 0, 0, 0, 1}}.build(tcp(40002, 80, syn))),
			want: m4(14, 28, 48, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.IPOptions = 40002, 80, syn, true
			}),
		},
		{
			name:  "ipip4",
			frame: cat(eth(packet.EtherTypeIPv4), v4{src: client4, dst: vip4, proto: packet.ProtoIPIP}.build(v4{src: router4, dst: vip4, proto: packet.ProtoUDP}.build(udp(1, 2)))),
			want:  m4(14, 20, 48, packet.ProtoIPIP, nil),
		},
		{
			name:  "tcp6-syn",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.ProtoTCP, tc: 0xb8, flow: 0x12345}.build(tcp(40000, 80, syn))),
			want: m6(14, 0, 20, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.TOS = 40000, 80, syn, 0xb8
			}),
		},
		{
			name:  "tcp6-ack",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.ProtoTCP, hop: 1}.build(tcp(40000, 80, ack, bytesN(10)...))),
			want: m6(14, 0, 30, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags, m.TTL = 40000, 80, ack, 1
			}),
		},
		{
			name:  "udp6",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.ProtoUDP}.build(udp(5353, 53, bytesN(32)...))),
			want: m6(14, 0, 40, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 5353, 53
			}),
		},
		{
			name:  "icmp6-echo",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.ProtoICMPv6}.build(icmp(128, 0, 0x43210007, bytesN(56)...))),
			want: m6(14, 0, 64, packet.ProtoICMPv6, func(m *packet.Meta) {
				m.ICMPType, m.ICMPEchoID = 128, 0x4321
			}),
		},
		{
			name:  "icmp6-packet-too-big-udp",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: router6, dst: vip6, nh: packet.ProtoICMPv6}.build(icmp(2, 0, 1280, quotedUDP6...))),
			want: m6(14, 0, 8+112, packet.ProtoICMPv6, func(m *packet.Meta) {
				m.Src = mapped(router6)
				m.ICMPType, m.ICMPMTU = 2, 1280
				m.Inner = packet.Tuple{Src: mapped(vip6), Dst: mapped(client6), SrcPort: 53, DstPort: 5353, Proto: packet.ProtoUDP}
				m.InnerOff, m.HasInner = 14+40+8, true
			}),
		},
		{
			name: "icmp6-dst-unreachable-inner-ext-tcp",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: router6, dst: vip6, nh: packet.ProtoICMPv6}.build(icmp(1, 4, 0,
				v6{src: vip6, dst: client6, nh: packet.IPv6ExtDestination}.build(cat(ext6(packet.ProtoTCP, 0), tcp(443, 40000, ack)))[:40+8+8]...))),
			want: m6(14, 0, 8+56, packet.ProtoICMPv6, func(m *packet.Meta) {
				m.Src = mapped(router6)
				m.ICMPType, m.ICMPCode = 1, 4
				m.Inner = packet.Tuple{Src: mapped(vip6), Dst: mapped(client6), SrcPort: 443, DstPort: 40000, Proto: packet.ProtoTCP}
				m.InnerOff, m.HasInner = 14+40+8, true
			}),
		},
		{
			name:  "esp6",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.ProtoESP}.build(esp(0x01020304, 9, bytesN(24)...))),
			want:  m6(14, 0, 32, packet.ProtoESP, nil),
		},
		{
			name:  "gre6",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.ProtoGRE}.build(gre(0, packet.EtherTypeIPv6, bytesN(40)...))),
			want:  m6(14, 0, 44, packet.ProtoGRE, nil),
		},
		{
			name:  "frag6-first-udp",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.IPv6ExtFragment}.build(cat(frag6(packet.ProtoUDP, 0, true, 0xcafe0001), udpLen(5000, 4500, 3000, bytesN(1000)...)))),
			want: m6(14, 8, 8+8+1000, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 5000, 4500
				m.Frag, m.FragID = packet.FragFirst, 0xcafe0001
			}),
		},
		{
			name:  "frag6-nonfirst-udp",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.IPv6ExtFragment}.build(cat(frag6(packet.ProtoUDP, 1008, false, 0xcafe0001), bytesN(500)))),
			want: m6(14, 8, 508, packet.ProtoUDP, func(m *packet.Meta) {
				m.Frag, m.FragID = packet.FragNonFirst, 0xcafe0001
			}),
		},
		{
			name:  "frag6-atomic-tcp",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.IPv6ExtFragment}.build(cat(frag6(packet.ProtoTCP, 0, false, 77), tcp(40000, 80, ack)))),
			want: m6(14, 8, 28, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags = 40000, 80, ack
			}),
		},
		{
			name: "ipv6-hbh-dstopts-frag-udp",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.IPv6ExtHopByHop}.build(cat(
				ext6(packet.IPv6ExtDestination, 0), ext6(packet.IPv6ExtFragment, 1), frag6(packet.ProtoUDP, 0, true, 5), udpLen(7000, 53, 4000, bytesN(64)...)))),
			want: m6(14, 8+16+8, 8+16+8+8+64, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 7000, 53
				m.Frag, m.FragID = packet.FragFirst, 5
			}),
		},
		{
			name: "ipv6-routing-ah-tcp",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.IPv6ExtRouting}.build(cat(
				rt6(packet.IPv6ExtAH), ah6(packet.ProtoTCP), tcp(40000, 22, ack)))),
			want: m6(14, 24+24, 24+24+20, packet.ProtoTCP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort, m.TCPFlags = 40000, 22, ack
			}),
		},
		{
			name:  "ipv6-no-next-header",
			frame: cat(eth(packet.EtherTypeIPv6), v6{src: client6, dst: vip6, nh: packet.IPv6ExtDestination}.build(ext6(packet.IPv6NoNextHeader, 0))),
			want:  m6(14, 8, 8, packet.IPv6NoNextHeader, nil),
		},
		{
			name:  "vlan-udp6",
			frame: cat(eth(packet.EtherTypeIPv6, 0x0005), v6{src: client6, dst: vip6, nh: packet.ProtoUDP}.build(udp(1234, 443, bytesN(3)...))),
			want: m6(18, 0, 11, packet.ProtoUDP, func(m *packet.Meta) {
				m.SrcPort, m.DstPort = 1234, 443
				m.HasVLAN, m.VLANTCI = true, 5
			}),
		},
	}
}

// passFrames are frames Parse hands to the kernel.
func passFrames() []golden {
	arp := cat(eth(packet.EtherTypeARP), be16(1), be16(0x0800), []byte{6, 4}, be16(1), bytesN(20))
	return []golden{
		{name: "arp", frame: pad(arp, 60), res: packet.PassNonIP},
		{name: "lldp", frame: pad(cat(eth(packet.EtherTypeLLDP), bytesN(20)), 60), res: packet.PassNonIP},
		{name: "ieee802.3-length", frame: pad(cat(eth(46), bytesN(46)), 60), res: packet.PassNonIP},
		{name: "vlan-arp", frame: pad(cat(eth(packet.EtherTypeARP, 7), bytesN(28)), 64), res: packet.PassNonIP},
		{name: "qinq-8100-8100", frame: cat(eth(packet.EtherTypeIPv4, 1, 2), v4{src: client4, dst: vip4, proto: packet.ProtoUDP}.build(udp(1, 2))), res: packet.PassUnsupportedL2},
		{name: "qinq-88a8", frame: cat(eth(packet.EtherTypeIPv4, 0x88a80001, 2), v4{src: client4, dst: vip4, proto: packet.ProtoUDP}.build(udp(1, 2))), res: packet.PassUnsupportedL2},
		{name: "qinq-9100", frame: cat(eth(packet.EtherTypeIPv4, 0x91000001), v4{src: client4, dst: vip4, proto: packet.ProtoUDP}.build(udp(1, 2))), res: packet.PassUnsupportedL2},
	}
}
