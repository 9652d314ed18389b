package packet_test

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/xlbnet/xlb/pkg/packet"
)

func as16(ip net.IP) [16]byte { return [16]byte(ip.To16()) }

// TestParseAgreesWithGopacket decodes every valid golden frame with
// gopacket (test-only) and checks that Meta says the same things.
// gopacket stops at fragments (no transport layer for IPv4 first fragments
// or any IPv6 fragment), so those fields are compared only where gopacket
// decoded them.
func TestParseAgreesWithGopacket(t *testing.T) {
	for _, g := range goldens() {
		t.Run(g.name, func(t *testing.T) {
			m, res := packet.Parse(g.frame)
			if res != packet.OK {
				t.Fatalf("Parse() result = %v, want ok", res)
			}
			// gopacket goes on decoding payloads (DNS, GRE, IPIP) and may
			// fail there; only the layers compared below matter.
			p := gopacket.NewPacket(g.frame, layers.LayerTypeEthernet, gopacket.Default)
			checkAgainstGopacket(t, m, p, g.frame)
			if m.Frag != packet.FragNone {
				return
			}
			want := map[uint8]gopacket.LayerType{
				packet.ProtoTCP: layers.LayerTypeTCP, packet.ProtoUDP: layers.LayerTypeUDP,
				packet.ProtoICMP: layers.LayerTypeICMPv4, packet.ProtoICMPv6: layers.LayerTypeICMPv6,
				packet.ProtoESP: layers.LayerTypeIPSecESP, packet.ProtoGRE: layers.LayerTypeGRE,
			}[m.Proto]
			if want != 0 && p.Layer(want) == nil && p.Layer(layers.LayerTypeIPv6Fragment) == nil {
				t.Errorf("gopacket did not decode %v (error: %v)", want, p.ErrorLayer())
			}
		})
	}
}

func checkAgainstGopacket(t *testing.T, m packet.Meta, p gopacket.Packet, frame []byte) {
	t.Helper()
	if l, ok := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q); ok {
		tci := uint16(l.Priority)<<13 | uint16(l.VLANIdentifier)
		if l.DropEligible {
			tci |= 1 << 12
		}
		if !m.HasVLAN || m.VLANTCI != tci {
			t.Errorf("VLAN: meta (%v, %#x), gopacket %#x", m.HasVLAN, m.VLANTCI, tci)
		}
	} else if m.HasVLAN {
		t.Errorf("meta has VLAN, gopacket none")
	}

	proto := uint8(0)
	frag, fragID, fragOff := packet.FragNone, uint32(0), 0
	switch {
	case p.Layer(layers.LayerTypeIPv4) != nil:
		ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if m.Family != packet.IPv4 || m.Src != as16(ip.SrcIP) || m.Dst != as16(ip.DstIP) {
			t.Errorf("IPv4 addresses: meta %v %v→%v, gopacket %v→%v", m.Family, m.Src, m.Dst, ip.SrcIP, ip.DstIP)
		}
		if m.TTL != ip.TTL || m.TOS != ip.TOS || m.DF != (ip.Flags&layers.IPv4DontFragment != 0) {
			t.Errorf("IPv4 TTL/TOS/DF: meta %d/%#x/%v, gopacket %d/%#x/%v", m.TTL, m.TOS, m.DF, ip.TTL, ip.TOS, ip.Flags)
		}
		if m.IPOptions != (ip.IHL > 5) || int(m.L4Off-m.L3Off) != int(ip.IHL)*4 || int(m.L3End-m.L3Off) != int(ip.Length) {
			t.Errorf("IPv4 lengths: meta %+v, gopacket IHL %d length %d", m, ip.IHL, ip.Length)
		}
		proto = uint8(ip.Protocol)
		if ip.FragOffset != 0 || ip.Flags&layers.IPv4MoreFragments != 0 {
			frag, fragID, fragOff = packet.FragFirst, uint32(ip.Id), int(ip.FragOffset)*8
			if fragOff != 0 {
				frag = packet.FragNonFirst
			}
		}
	case p.Layer(layers.LayerTypeIPv6) != nil:
		ip := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		if m.Family != packet.IPv6 || m.Src != as16(ip.SrcIP) || m.Dst != as16(ip.DstIP) {
			t.Errorf("IPv6 addresses: meta %v %v→%v, gopacket %v→%v", m.Family, m.Src, m.Dst, ip.SrcIP, ip.DstIP)
		}
		if m.TTL != ip.HopLimit || m.TOS != ip.TrafficClass || int(m.L3End-m.L3Off) != 40+int(ip.Length) {
			t.Errorf("IPv6 hop limit/class/length: meta %d/%#x/%d, gopacket %d/%#x/%d", m.TTL, m.TOS, m.L3End-m.L3Off, ip.HopLimit, ip.TrafficClass, ip.Length)
		}
		// The upper-layer protocol is the next header of the last IPv6
		// header gopacket decoded.
		proto = uint8(ip.NextHeader)
		for _, l := range p.Layers() {
			switch e := l.(type) {
			case *layers.IPv6HopByHop:
				proto = uint8(e.NextHeader)
			case *layers.IPv6Destination:
				proto = uint8(e.NextHeader)
			case *layers.IPv6Routing:
				proto = uint8(e.NextHeader)
			case *layers.IPSecAH:
				proto = uint8(e.NextHeader)
			case *layers.IPv6Fragment:
				proto = uint8(e.NextHeader)
				fragOff = int(e.FragmentOffset) * 8
				if fragOff != 0 || e.MoreFragments {
					frag, fragID = packet.FragFirst, e.Identification
					if fragOff != 0 {
						frag = packet.FragNonFirst
					}
				}
			}
		}
	default:
		t.Fatalf("gopacket found no IP layer")
	}
	if m.Proto != proto {
		t.Errorf("Proto: meta %d, gopacket %d", m.Proto, proto)
	}
	if m.Frag != frag || (frag != packet.FragNone && m.FragID != fragID) {
		t.Errorf("fragment: meta %v id %#x, gopacket %v id %#x (offset %d)", m.Frag, m.FragID, frag, fragID, fragOff)
	}

	if l, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && m.Proto == packet.ProtoTCP {
		var flags uint8
		for i, set := range []bool{l.FIN, l.SYN, l.RST, l.PSH, l.ACK, l.URG, l.ECE, l.CWR} {
			if set {
				flags |= 1 << i
			}
		}
		if m.SrcPort != uint16(l.SrcPort) || m.DstPort != uint16(l.DstPort) || m.TCPFlags != flags {
			t.Errorf("TCP: meta %d→%d flags %#x, gopacket %d→%d flags %#x", m.SrcPort, m.DstPort, m.TCPFlags, l.SrcPort, l.DstPort, flags)
		}
		if int(m.L4Off)+int(l.DataOffset)*4+len(l.Payload) != int(m.L3End) {
			t.Errorf("TCP payload end: meta L3End %d, gopacket %d", m.L3End, int(m.L4Off)+int(l.DataOffset)*4+len(l.Payload))
		}
	}
	if l, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); ok && m.Proto == packet.ProtoUDP {
		if m.SrcPort != uint16(l.SrcPort) || m.DstPort != uint16(l.DstPort) {
			t.Errorf("UDP: meta %d→%d, gopacket %d→%d", m.SrcPort, m.DstPort, l.SrcPort, l.DstPort)
		}
	}
	if l, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
		if m.ICMPType != l.TypeCode.Type() || m.ICMPCode != l.TypeCode.Code() {
			t.Errorf("ICMPv4: meta %d/%d, gopacket %v", m.ICMPType, m.ICMPCode, l.TypeCode)
		}
		if (m.ICMPType == 0 || m.ICMPType == 8) && m.ICMPEchoID != l.Id {
			t.Errorf("ICMPv4 echo id: meta %#x, gopacket %#x", m.ICMPEchoID, l.Id)
		}
		if m.HasInner {
			checkInnerGopacket(t, m, l.Payload, layers.LayerTypeIPv4)
		}
	}
	if l, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		if m.ICMPType != l.TypeCode.Type() || m.ICMPCode != l.TypeCode.Code() {
			t.Errorf("ICMPv6: meta %d/%d, gopacket %v", m.ICMPType, m.ICMPCode, l.TypeCode)
		}
		if e, ok := p.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo); ok && m.ICMPEchoID != e.Identifier {
			t.Errorf("ICMPv6 echo id: meta %#x, gopacket %#x", m.ICMPEchoID, e.Identifier)
		}
		if m.HasInner {
			// gopacket's ICMPv6 payload starts with the MTU/unused word;
			// the quoted packet follows it.
			checkInnerGopacket(t, m, l.Payload[4:], layers.LayerTypeIPv6)
			if mtu := binary.BigEndian.Uint32(l.Payload); m.ICMPType == 2 && m.ICMPMTU != mtu {
				t.Errorf("ICMPv6 MTU: meta %d, gopacket %d", m.ICMPMTU, mtu)
			}
		}
	}
	if l, ok := p.Layer(layers.LayerTypeIPSecESP).(*layers.IPSecESP); ok {
		if got := packet.ESPHeader(frame[m.L4Off:]).SPI(); got != l.SPI || m.SrcPort != 0 || m.DstPort != 0 {
			t.Errorf("ESP: view SPI %#x ports %d/%d, gopacket SPI %#x", got, m.SrcPort, m.DstPort, l.SPI)
		}
	}
	if l, ok := p.Layer(layers.LayerTypeGRE).(*layers.GRE); ok {
		h := packet.GREHeader(frame[m.L4Off:])
		key, hasKey := h.Key()
		if h.Protocol() != uint16(l.Protocol) || h.Version() != l.Version || hasKey != l.KeyPresent || key != l.Key || m.SrcPort != 0 {
			t.Errorf("GRE: view proto %#x ver %d key %v/%d, gopacket %#x %d %v/%d", h.Protocol(), h.Version(), hasKey, key, uint16(l.Protocol), l.Version, l.KeyPresent, l.Key)
		}
	}
}

// checkInnerGopacket decodes the quoted packet of an ICMP error with
// gopacket and compares addresses, protocol and (when gopacket could decode
// the cut transport header) ports.
func checkInnerGopacket(t *testing.T, m packet.Meta, quote []byte, first gopacket.LayerType) {
	t.Helper()
	q := gopacket.NewPacket(quote, first, gopacket.Default)
	var src, dst net.IP
	var proto uint8
	if ip, ok := q.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		src, dst, proto = ip.SrcIP, ip.DstIP, uint8(ip.Protocol)
	} else if ip, ok := q.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
		src, dst, proto = ip.SrcIP, ip.DstIP, uint8(ip.NextHeader)
		if d, ok := q.Layer(layers.LayerTypeIPv6Destination).(*layers.IPv6Destination); ok {
			proto = uint8(d.NextHeader)
		}
	} else {
		t.Fatalf("gopacket found no quoted IP header")
	}
	if m.Inner.Src != as16(src) || m.Inner.Dst != as16(dst) || m.Inner.Proto != proto {
		t.Errorf("inner: meta %v→%v/%d, gopacket %v→%v/%d", m.Inner.Src, m.Inner.Dst, m.Inner.Proto, src, dst, proto)
	}
	if u, ok := q.Layer(layers.LayerTypeUDP).(*layers.UDP); ok {
		if m.Inner.SrcPort != uint16(u.SrcPort) || m.Inner.DstPort != uint16(u.DstPort) {
			t.Errorf("inner UDP: meta %d→%d, gopacket %d→%d", m.Inner.SrcPort, m.Inner.DstPort, u.SrcPort, u.DstPort)
		}
	}
	// gopacket cannot decode an 8-byte TCP header; read the ports raw.
	if proto == packet.ProtoTCP {
		off := len(quote) - 8
		if first == layers.LayerTypeIPv4 {
			off = int(quote[0]&0x0f) * 4
		}
		raw := quote[off:]
		if m.Inner.SrcPort != uint16(raw[0])<<8|uint16(raw[1]) || m.Inner.DstPort != uint16(raw[2])<<8|uint16(raw[3]) {
			t.Errorf("inner TCP ports: meta %d→%d, quote % x", m.Inner.SrcPort, m.Inner.DstPort, raw[:4])
		}
	}
}
