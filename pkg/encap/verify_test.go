package encap_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

// Structural checks of outputs, by re-parsing them with packet.Parse and
// by sums computed here, independent of the fixtures' expected bytes.

func l2len(m *packet.Meta) int {
	if m.HasVLAN {
		return 18
	}
	return 14
}

// reparseInner parses an IP packet inside a plain Ethernet frame.
func reparseInner(t *testing.T, l3 []byte) packet.Meta {
	t.Helper()
	et := uint16(0x0800)
	if l3[0]>>4 == 6 {
		et = 0x86dd
	}
	m, r := packet.Parse(packettest.Cat(packettest.EthFrom(nextHop, ourMAC, et), l3))
	if r != packet.OK {
		t.Fatalf("inner packet does not parse: %v", r)
	}
	return m
}

func addr16(a netip.Addr) [16]byte { return a.As16() }

// verifyEncap checks an encapsulated frame out built from frame in (Meta
// m): outer headers valid and as the template says, inner bytes intact.
func verifyEncap(t *testing.T, tmpl *encap.Template, in []byte, m *packet.Meta, out []byte, innerFrom int) {
	t.Helper()
	om, r := packet.Parse(out)
	if r != packet.OK {
		t.Fatalf("output does not parse: %v", r)
	}
	if om.HasVLAN != m.HasVLAN || om.VLANTCI != m.VLANTCI {
		t.Errorf("VLAN = %v/%#x, want %v/%#x", om.HasVLAN, om.VLANTCI, m.HasVLAN, m.VLANTCI)
	}
	s := tmpl.Spec()
	if !bytes.Equal(out[0:6], s.DstMAC[:]) || !bytes.Equal(out[6:12], s.SrcMAC[:]) {
		t.Errorf("MACs = %x > %x, want %x > %x", out[6:12], out[0:6], s.SrcMAC, s.DstMAC)
	}
	inner := in[m.L3Off:m.L3End]
	if innerFrom != int(om.L3Off)+tmpl.Overhead() {
		t.Errorf("inner at %d, want L3Off %d + overhead %d", innerFrom, om.L3Off, tmpl.Overhead())
	}
	if !bytes.Equal(out[innerFrom:], inner) {
		t.Fatalf("inner packet changed or padding kept")
	}
	if im := reparseInner(t, out[innerFrom:]); im.Tuple != m.Tuple {
		t.Errorf("inner tuple = %+v, want %+v", im.Tuple, m.Tuple)
	}
	if tmpl.Kind() == encap.Direct {
		if om.Tuple != m.Tuple || int(om.L3End) != len(out) {
			t.Errorf("direct: packet changed")
		}
		return
	}
	if om.Family != tmpl.Outer() || int(om.L3End) != len(out) {
		t.Fatalf("outer family %v end %d, want %v %d", om.Family, om.L3End, tmpl.Outer(), len(out))
	}
	if om.Src != addr16(s.Src) || om.Dst != addr16(s.Dst) {
		t.Errorf("outer addresses = %x > %x", om.Src, om.Dst)
	}
	if om.TTL != 64 || om.TOS != m.TOS {
		t.Errorf("outer TTL %d TOS %#x, want 64 %#x", om.TTL, om.TOS, m.TOS)
	}
	l3 := out[om.L3Off:]
	if om.Family == packet.IPv4 {
		if l3[0] != 0x45 || om.IPOptions {
			t.Errorf("outer IPv4 version/IHL = %#x, want 0x45", l3[0])
		}
		if packettest.Sum(l3[:20]) != 0xffff {
			t.Errorf("outer IPv4 header checksum invalid")
		}
		if om.DF != m.DF || om.Frag != packet.FragNone {
			t.Errorf("outer DF %v frag %v, want DF %v unfragmented", om.DF, om.Frag, m.DF)
		}
	}
	l4 := out[om.L4Off:innerFrom]
	switch tmpl.Kind() {
	case encap.IPIP:
		want := packet.ProtoIPIP
		if m.Family == packet.IPv6 {
			want = packet.ProtoIPv6
		}
		if om.Proto != want {
			t.Errorf("outer protocol %d, want %d", om.Proto, want)
		}
	case encap.GUE:
		if om.Proto != packet.ProtoUDP || om.DstPort != s.GUEPort || om.SrcPort < 49152 {
			t.Errorf("GUE UDP %d > %d proto %d", om.SrcPort, om.DstPort, om.Proto)
		}
		if ul := binary.BigEndian.Uint16(l4[4:]); int(ul) != 8+len(inner) {
			t.Errorf("UDP length %d, want %d", ul, 8+len(inner))
		}
		csum := binary.BigEndian.Uint16(l4[6:])
		if om.Family == packet.IPv4 && csum != 0 {
			t.Errorf("IPv4 GUE checksum %#x, want 0", csum)
		}
		if om.Family == packet.IPv6 {
			seg := out[om.L4Off:]
			if csum == 0 || packettest.Sum(packettest.Pseudo(s.Src.String(), s.Dst.String(), 17, len(seg)), seg) != 0xffff {
				// Local checksum offload stands the inner TCP/UDP checksum
				// in for the segment's sum; only a wrong inner checksum
				// (which the backend would drop anyway) may spoil it.
				if !innerL4ChecksumBad(inner, m) {
					t.Errorf("IPv6 GUE checksum %#x does not verify", csum)
				}
			}
		}
	case encap.GRE:
		et := uint16(0x0800)
		if m.Family == packet.IPv6 {
			et = 0x86dd
		}
		if om.Proto != packet.ProtoGRE || len(l4) != 4 || binary.BigEndian.Uint16(l4) != 0 || binary.BigEndian.Uint16(l4[2:]) != et {
			t.Errorf("GRE header %x, want 0000%04x", l4, et)
		}
	}
}

// verifyTooBig checks an ICMP error built from frame in.
func verifyTooBig(t *testing.T, tmpl *encap.Template, in []byte, m *packet.Meta, out []byte) {
	t.Helper()
	om, r := packet.Parse(out)
	if r != packet.OK {
		t.Fatalf("reply does not parse: %v", r)
	}
	if !bytes.Equal(out[0:6], in[6:12]) || !bytes.Equal(out[6:12], ourMAC[:]) {
		t.Errorf("reply MACs %x > %x, want %x > %x", out[6:12], out[0:6], ourMAC, in[6:12])
	}
	if om.HasVLAN != m.HasVLAN || om.VLANTCI != m.VLANTCI {
		t.Errorf("reply VLAN = %v/%#x, want %v/%#x", om.HasVLAN, om.VLANTCI, m.HasVLAN, m.VLANTCI)
	}
	if om.Family != m.Family || om.Src != m.Dst || om.Dst != m.Src || om.TTL != 64 {
		t.Errorf("reply %v %x > %x ttl %d, want from the VIP to the client, ttl 64", om.Family, om.Src, om.Dst, om.TTL)
	}
	if !om.HasInner || om.Inner != m.Tuple {
		t.Errorf("quoted flow %+v, want %+v", om.Inner, m.Tuple)
	}
	wantMTU := tmpl.InnerMTU()
	if m.Family == packet.IPv6 {
		wantMTU = max(wantMTU, 1280)
	}
	if int(om.ICMPMTU) != wantMTU {
		t.Errorf("ICMP MTU %d, want %d", om.ICMPMTU, wantMTU)
	}
	msg := out[om.L4Off:om.L3End]
	q := msg[8:]
	if !bytes.Equal(q, in[m.L3Off:int(m.L3Off)+len(q)]) || len(q) < min(int(m.L3End-m.L3Off), 28) {
		t.Errorf("quote is not the start of the original packet")
	}
	l3len := int(om.L3End - om.L3Off)
	if om.Family == packet.IPv4 {
		if om.ICMPType != 3 || om.ICMPCode != 4 || l3len > 576 || packettest.Sum(msg) != 0xffff {
			t.Errorf("frag-needed type %d code %d len %d sum %#x", om.ICMPType, om.ICMPCode, l3len, packettest.Sum(msg))
		}
		return
	}
	src := netip.AddrFrom16(om.Src).String()
	dst := netip.AddrFrom16(om.Dst).String()
	if om.ICMPType != 2 || om.ICMPCode != 0 || l3len > 1280 || packettest.Sum(packettest.Pseudo(src, dst, 58, len(msg)), msg) != 0xffff {
		t.Errorf("packet-too-big type %d code %d len %d", om.ICMPType, om.ICMPCode, l3len)
	}
}

// verifyFragments reassembles outer fragments and checks the result is
// the tunnel header followed by the intact inner packet.
func verifyFragments(t *testing.T, tmpl *encap.Template, in []byte, m *packet.Meta, frames [][]byte) {
	t.Helper()
	var payload []byte
	var id uint32
	for i, f := range frames {
		fm, r := packet.Parse(f)
		if r != packet.OK {
			t.Fatalf("fragment %d does not parse: %v", i, r)
		}
		l3 := f[fm.L3Off:fm.L3End]
		if len(l3) > tmpl.MTU() || int(fm.L3End) != len(f) {
			t.Errorf("fragment %d: %d bytes, MTU %d", i, len(l3), tmpl.MTU())
		}
		var off int
		var more bool
		var data []byte
		if fm.Family == packet.IPv4 {
			if packettest.Sum(l3[:20]) != 0xffff || l3[0] != 0x45 {
				t.Errorf("fragment %d: bad IPv4 header", i)
			}
			ff := binary.BigEndian.Uint16(l3[6:])
			off, more, data = int(ff&0x1fff)*8, ff&0x2000 != 0, l3[20:]
			if ff&0x4000 != 0 {
				t.Errorf("fragment %d has DF", i)
			}
		} else {
			if l3[6] != 44 {
				t.Fatalf("fragment %d: next header %d, want 44", i, l3[6])
			}
			fh := l3[40:48]
			w := binary.BigEndian.Uint16(fh[2:])
			off, more, data = int(w&^7), w&1 != 0, l3[48:]
		}
		if i == 0 {
			id = fm.FragID
		} else if fm.FragID != id {
			t.Errorf("fragment %d ID %#x, want %#x", i, fm.FragID, id)
		}
		if off != len(payload) || more != (i < len(frames)-1) || (more && len(data)%8 != 0) {
			t.Fatalf("fragment %d: offset %d more %v, want offset %d", i, off, more, len(payload))
		}
		payload = append(payload, data...)
	}
	inner := in[m.L3Off:m.L3End]
	x := len(payload) - len(inner)
	if x != tmpl.Overhead()-ipLen(tmpl) || !bytes.Equal(payload[x:], inner) {
		t.Fatalf("reassembled payload is not tunnel header + inner packet")
	}
	if tmpl.Kind() == encap.GUE && tmpl.Outer() == packet.IPv6 {
		s := tmpl.Spec()
		if packettest.Sum(packettest.Pseudo(s.Src.String(), s.Dst.String(), 17, len(payload)), payload) != 0xffff && !innerL4ChecksumBad(inner, m) {
			t.Errorf("reassembled GUE checksum does not verify")
		}
	}
}

func ipLen(tmpl *encap.Template) int {
	if tmpl.Outer() == packet.IPv6 {
		return 40
	}
	return 20
}

// diffGopacket decodes the output with gopacket (test-only) and compares
// outer and inner headers with the template and the input's Meta.
func diffGopacket(t *testing.T, tmpl *encap.Template, m *packet.Meta, out []byte) {
	t.Helper()
	p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v", el.Error())
	}
	s := tmpl.Spec()
	ls := p.Layers()
	i := 1
	if _, ok := ls[i].(*layers.Dot1Q); ok {
		i++
	}
	var innerData []byte
	if tmpl.Kind() != encap.Direct {
		switch o := ls[i].(type) {
		case *layers.IPv4:
			if !o.SrcIP.Equal(net.IP(s.Src.AsSlice())) || !o.DstIP.Equal(net.IP(s.Dst.AsSlice())) || o.TTL != 64 || o.TOS != m.TOS || o.IHL != 5 {
				t.Errorf("gopacket outer IPv4 %v > %v ttl %d tos %#x ihl %d", o.SrcIP, o.DstIP, o.TTL, o.TOS, o.IHL)
			}
			if (o.Flags&layers.IPv4DontFragment != 0) != m.DF || int(o.Length) != len(out)-l2len(m) {
				t.Errorf("gopacket outer IPv4 flags %v length %d", o.Flags, o.Length)
			}
		case *layers.IPv6:
			if !o.SrcIP.Equal(net.IP(s.Src.AsSlice())) || !o.DstIP.Equal(net.IP(s.Dst.AsSlice())) || o.HopLimit != 64 || o.TrafficClass != m.TOS {
				t.Errorf("gopacket outer IPv6 %v > %v hop %d tc %#x", o.SrcIP, o.DstIP, o.HopLimit, o.TrafficClass)
			}
			if int(o.Length) != len(out)-l2len(m)-40 {
				t.Errorf("gopacket outer IPv6 payload length %d", o.Length)
			}
		default:
			t.Fatalf("gopacket: outer layer %T", ls[i])
		}
		i++
		switch tmpl.Kind() {
		case encap.GUE:
			u, ok := ls[i].(*layers.UDP)
			if !ok || uint16(u.DstPort) != s.GUEPort {
				t.Fatalf("gopacket: want UDP to the GUE port, got %v", ls[i])
			}
			innerData = u.Payload
		case encap.GRE:
			g, ok := ls[i].(*layers.GRE)
			if !ok || g.ChecksumPresent || g.KeyPresent || g.SeqPresent || g.Version != 0 {
				t.Fatalf("gopacket: want a plain GRE header, got %v", ls[i])
			}
			innerData = g.Payload
		case encap.IPIP:
			innerData = ls[i-1].LayerPayload()
		}
	} else {
		innerData = ls[i-1].LayerPayload()
	}
	lt := layers.LayerTypeIPv4
	if m.Family == packet.IPv6 {
		lt = layers.LayerTypeIPv6
	}
	ip := gopacket.NewPacket(innerData, lt, gopacket.Default)
	if el := ip.ErrorLayer(); el != nil {
		t.Fatalf("gopacket inner: %v", el.Error())
	}
	var src, dst net.IP
	switch l := ip.NetworkLayer().(type) {
	case *layers.IPv4:
		src, dst = l.SrcIP, l.DstIP
	case *layers.IPv6:
		src, dst = l.SrcIP, l.DstIP
	}
	if !src.Equal(net.IP(netip.AddrFrom16(m.Src).Unmap().AsSlice())) || !dst.Equal(net.IP(netip.AddrFrom16(m.Dst).Unmap().AsSlice())) {
		t.Errorf("gopacket inner %v > %v, want %x > %x", src, dst, m.Src, m.Dst)
	}
	switch l := ip.TransportLayer().(type) {
	case *layers.TCP:
		if uint16(l.SrcPort) != m.SrcPort || uint16(l.DstPort) != m.DstPort {
			t.Errorf("gopacket inner TCP %d > %d", l.SrcPort, l.DstPort)
		}
	case *layers.UDP:
		if uint16(l.SrcPort) != m.SrcPort || uint16(l.DstPort) != m.DstPort {
			t.Errorf("gopacket inner UDP %d > %d", l.SrcPort, l.DstPort)
		}
	}
}

// innerL4ChecksumBad reports whether inner (the IP packet of m) is an
// unfragmented TCP or UDP packet whose own transport checksum is wrong.
func innerL4ChecksumBad(inner []byte, m *packet.Meta) bool {
	if m.Frag != packet.FragNone || (m.Proto != packet.ProtoTCP && m.Proto != packet.ProtoUDP) {
		return false
	}
	seg := inner[m.L4Off-m.L3Off:]
	if m.Proto == packet.ProtoUDP && len(seg) >= 8 && binary.BigEndian.Uint16(seg[6:]) == 0 {
		return false
	}
	a, b := netip.AddrFrom16(m.Src).Unmap().String(), netip.AddrFrom16(m.Dst).Unmap().String()
	return packettest.Sum(packettest.Pseudo(a, b, m.Proto, len(seg)), seg) != 0xffff
}

// diffGopacketReply decodes an ICMP too-big reply with gopacket and
// compares type, code, MTU, addresses and the quoted packet's addresses.
func diffGopacketReply(t *testing.T, m *packet.Meta, out []byte, mtu int) {
	t.Helper()
	p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v", el.Error())
	}
	client := net.IP(netip.AddrFrom16(m.Src).Unmap().AsSlice())
	vip := net.IP(netip.AddrFrom16(m.Dst).Unmap().AsSlice())
	var quote []byte
	lt := layers.LayerTypeIPv4
	switch ipl := p.NetworkLayer().(type) {
	case *layers.IPv4:
		ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		if !ok || !ipl.SrcIP.Equal(vip) || !ipl.DstIP.Equal(client) {
			t.Fatalf("gopacket: want ICMPv4 from %v to %v, got %v", vip, client, p)
		}
		if ic.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeFragmentationNeeded) || int(ic.Seq) != mtu {
			t.Errorf("gopacket: %v mtu %d, want frag-needed mtu %d", ic.TypeCode, ic.Seq, mtu)
		}
		quote = ic.Payload
	case *layers.IPv6:
		ic, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
		if !ok || !ipl.SrcIP.Equal(vip) || !ipl.DstIP.Equal(client) {
			t.Fatalf("gopacket: want ICMPv6 from %v to %v, got %v", vip, client, p)
		}
		if ic.TypeCode != layers.CreateICMPv6TypeCode(layers.ICMPv6TypePacketTooBig, 0) || int(binary.BigEndian.Uint32(ic.Payload)) != mtu {
			t.Errorf("gopacket: %v, want packet-too-big mtu %d", ic.TypeCode, mtu)
		}
		quote = ic.Payload[4:]
		lt = layers.LayerTypeIPv6
	default:
		t.Fatalf("gopacket: no IP layer in %v", p)
	}
	q := gopacket.NewPacket(quote, lt, gopacket.Default)
	switch l := q.NetworkLayer().(type) {
	case *layers.IPv4:
		if !l.SrcIP.Equal(client) || !l.DstIP.Equal(vip) {
			t.Errorf("gopacket: quoted %v > %v", l.SrcIP, l.DstIP)
		}
	case *layers.IPv6:
		if !l.SrcIP.Equal(client) || !l.DstIP.Equal(vip) {
			t.Errorf("gopacket: quoted %v > %v", l.SrcIP, l.DstIP)
		}
	default:
		t.Errorf("gopacket: quote does not decode as IP")
	}
}
