// Package packettest builds Ethernet frames for tests, two ways: Frame
// serializes a valid TCP, UDP or ICMP frame over IPv4 or IPv6, optionally
// VLAN-tagged, with gopacket; the header builders (Eth, IPv4, IPv6, TCP,
// UDP, ICMP, the IPv6 extension headers, Cat, Sum, …) write any header,
// malformed ones included, byte by byte from the RFC layouts. It must only
// be imported from tests, and it never imports pkg/packet: it is the
// independent picture the parser, the encapsulation and the XDP program
// are checked against.
package packettest

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Spec describes one frame. Zero values take sensible defaults: MACs
// SrcMAC → DstMAC, TTL 64, no payload.
type Spec struct {
	SrcMAC, DstMAC net.HardwareAddr
	VLAN           uint16 // 0: untagged
	Src, Dst       netip.Addr
	TOS            uint8
	TTL            uint8
	DF             bool
	IPID           uint16

	Proto            layers.IPProtocol // TCP, UDP, ICMPv4 or ICMPv6
	SrcPort, DstPort uint16
	SYN, ACK, FIN    bool
	RST              bool
	ICMPType         uint8
	ICMPCode         uint8
	ICMPID, ICMPSeq  uint16
	Payload          []byte
}

// Frame serializes s. It panics on a Spec gopacket cannot serialize: a
// test bug.
func Frame(s Spec) []byte {
	b, err := Build(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Build serializes s.
func Build(s Spec) ([]byte, error) {
	if s.SrcMAC == nil {
		s.SrcMAC = append(net.HardwareAddr(nil), SrcMAC[:]...)
	}
	if s.DstMAC == nil {
		s.DstMAC = append(net.HardwareAddr(nil), DstMAC[:]...)
	}
	if s.TTL == 0 {
		s.TTL = 64
	}
	v6 := s.Dst.Is6() && !s.Dst.Is4In6()
	eth := &layers.Ethernet{SrcMAC: s.SrcMAC, DstMAC: s.DstMAC, EthernetType: layers.EthernetTypeIPv4}
	if v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
	}
	ls := []gopacket.SerializableLayer{eth}
	if s.VLAN != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		t := layers.EthernetTypeIPv4
		if v6 {
			t = layers.EthernetTypeIPv6
		}
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: s.VLAN, Type: t})
	}
	var netLayer gopacket.NetworkLayer
	if v6 {
		ip := &layers.IPv6{Version: 6, TrafficClass: s.TOS, HopLimit: s.TTL, NextHeader: s.Proto,
			SrcIP: net.IP(s.Src.AsSlice()), DstIP: net.IP(s.Dst.AsSlice())}
		ls, netLayer = append(ls, ip), ip
	} else {
		ip := &layers.IPv4{Version: 4, IHL: 5, TOS: s.TOS, TTL: s.TTL, Protocol: s.Proto, Id: s.IPID,
			SrcIP: net.IP(s.Src.Unmap().AsSlice()), DstIP: net.IP(s.Dst.Unmap().AsSlice())}
		if s.DF {
			ip.Flags = layers.IPv4DontFragment
		}
		ls, netLayer = append(ls, ip), ip
	}
	switch s.Proto {
	case layers.IPProtocolTCP:
		t := &layers.TCP{SrcPort: layers.TCPPort(s.SrcPort), DstPort: layers.TCPPort(s.DstPort), SYN: s.SYN, ACK: s.ACK, FIN: s.FIN, RST: s.RST, Window: 65535, Seq: 1000}
		if s.ACK {
			t.Ack = 1
		}
		if err := t.SetNetworkLayerForChecksum(netLayer); err != nil {
			return nil, err
		}
		ls = append(ls, t)
	case layers.IPProtocolUDP:
		u := &layers.UDP{SrcPort: layers.UDPPort(s.SrcPort), DstPort: layers.UDPPort(s.DstPort)}
		if err := u.SetNetworkLayerForChecksum(netLayer); err != nil {
			return nil, err
		}
		ls = append(ls, u)
	case layers.IPProtocolICMPv4:
		ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(s.ICMPType, s.ICMPCode), Id: s.ICMPID, Seq: s.ICMPSeq})
	case layers.IPProtocolICMPv6:
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(s.ICMPType, s.ICMPCode)}
		if err := ic.SetNetworkLayerForChecksum(netLayer); err != nil {
			return nil, err
		}
		ls = append(ls, ic)
		if s.ICMPType == layers.ICMPv6TypeEchoRequest || s.ICMPType == layers.ICMPv6TypeEchoReply {
			ls = append(ls, &layers.ICMPv6Echo{Identifier: s.ICMPID, SeqNumber: s.ICMPSeq})
		}
	default:
		return nil, fmt.Errorf("packettest: protocol %v not supported", s.Proto)
	}
	ls = append(ls, gopacket.Payload(s.Payload))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		return nil, err
	}
	return append([]byte(nil), buf.Bytes()...), nil
}

// Decode decodes a frame with gopacket, for assertions on outputs.
func Decode(frame []byte) gopacket.Packet {
	return gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
}
