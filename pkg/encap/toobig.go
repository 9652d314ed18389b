package encap

import (
	"net/netip"

	"github.com/xlbnet/xlb/pkg/packet"
)

// Quote limits of the ICMP errors we originate.
const (
	// maxReplyIPv4 is the largest ICMP error datagram (RFC 1812 §4.3.2.3:
	// as much of the original as fits in 576 bytes).
	maxReplyIPv4 = 576
	// maxReplyIPv6 is the largest ICMPv6 error packet (RFC 4443 §2.4(c):
	// as much as fits in the IPv6 minimum MTU).
	maxReplyIPv6   = MinInnerMTUIPv6
	icmpHeaderSize = 8
	// icmpTOS is the TOS of our ICMP errors: precedence "internetwork
	// control" (DSCP CS6), as Linux's icmp_send.
	icmpTOS = 0xc0
	// minMTUIPv4 is the smallest MTU an IPv4 frag-needed may announce
	// (RFC 791: every link passes 68 bytes).
	minMTUIPv4 = 68
)

// TooBigReply rewrites, in place, the frame buf[off:off+n] that Parse
// described in m into an ICMP fragmentation-needed (type 3 code 4, IPv4)
// or ICMPv6 packet-too-big (IPv6) back to the packet's source, announcing
// mtu (clamped to 68..65535 for IPv4, 1280..65535 for IPv6). The reply
// comes from the address the client sent to (the VIP, m.Dst), goes to the
// frame's source MAC from ourMAC, keeps the ingress VLAN tag, has TTL 64,
// and quotes the original packet from its IP header on, as much as fits
// in 576 (IPv4) or 1280 (IPv6) bytes. The quote is not moved: the headers
// are written in front of it, so the reply starts at newOff < off.
//
// It returns TooBig and the reply at buf[newOff:newOff+newLen], or, with
// the frame untouched, DropTooBig when RFC 1122 §3.2.2 / RFC 4443 §2.4(e)
// forbid an error about this packet (an ICMP error, a non-first fragment,
// an unspecified, loopback, multicast or broadcast source), DropNoHeadroom
// or DropBadMeta. It never allocates.
func TooBigReply(buf []byte, off, n int, m *packet.Meta, ourMAC [6]byte, mtu int, ipID uint16) (newOff, newLen int, res Result) {
	if r := checkFrame(buf, off, n, m); r != OK {
		return off, n, r
	}
	if !mayReplyICMP(m) {
		return off, n, DropTooBig
	}
	l3 := off + int(m.L3Off)
	inLen := int(m.L3End) - int(m.L3Off)
	l2 := ethHeaderSize
	if m.HasVLAN {
		l2 += vlanTagSize
	}
	var macs [12]byte
	copy(macs[0:6], buf[off+6:off+12]) // read before the headers overwrite it
	copy(macs[6:12], ourMAC[:])
	mtu = min(mtu, MaxMTU)

	if m.Family == packet.IPv4 {
		q := min(inLen, maxReplyIPv4-ipv4HeaderSize-icmpHeaderSize)
		start := l3 - icmpHeaderSize - ipv4HeaderSize - l2
		if start < 0 {
			return off, n, DropNoHeadroom
		}
		putL2(buf[start:start+l2], &macs, m, packet.EtherTypeIPv4)
		ip := packet.IPv4Header(buf[start+l2 : l3-icmpHeaderSize])
		ip.SetVersionIHL(ipv4HeaderSize)
		ip.SetTOS(icmpTOS)
		ip.SetTotalLength(uint16(ipv4HeaderSize + icmpHeaderSize + q))
		ip.SetID(ipID)
		ip.SetFlagsFragmentOffset(0)
		ip.SetTTL(DefaultTTL)
		ip.SetProtocol(packet.ProtoICMP)
		ip.SetSourceAddress([4]byte(m.Dst[12:16]))
		ip.SetDestinationAddress([4]byte(m.Src[12:16]))
		ip.SetChecksum(0)
		ip.SetChecksum(ip.CalculateChecksum())
		ic := packet.ICMPv4Header(buf[l3-icmpHeaderSize : l3])
		ic.SetType(packet.ICMPv4DstUnreachable)
		ic.SetCode(packet.ICMPv4CodeFragNeeded)
		ic.SetChecksum(0)
		ic.SetMTU(uint16(max(mtu, minMTUIPv4)))
		ic.SetChecksum(^packet.Checksum(buf[l3-icmpHeaderSize:l3+q], 0))
		return start, l2 + ipv4HeaderSize + icmpHeaderSize + q, TooBig
	}

	q := min(inLen, maxReplyIPv6-ipv6HeaderSize-icmpHeaderSize)
	start := l3 - icmpHeaderSize - ipv6HeaderSize - l2
	if start < 0 {
		return off, n, DropNoHeadroom
	}
	putL2(buf[start:start+l2], &macs, m, packet.EtherTypeIPv6)
	ip := packet.IPv6Header(buf[start+l2 : l3-icmpHeaderSize])
	ip.SetVersionTCFlow(icmpTOS, 0)
	ip.SetPayloadLength(uint16(icmpHeaderSize + q))
	ip.SetNextHeader(packet.ProtoICMPv6)
	ip.SetHopLimit(DefaultTTL)
	ip.SetSourceAddress(m.Dst)
	ip.SetDestinationAddress(m.Src)
	ic := packet.ICMPv6Header(buf[l3-icmpHeaderSize : l3])
	ic.SetType(packet.ICMPv6PacketTooBig)
	ic.SetCode(0)
	ic.SetChecksum(0)
	ic.SetMTU(uint32(max(mtu, MinInnerMTUIPv6)))
	s := packet.PseudoHeaderChecksum(packet.ProtoICMPv6, m.Dst[:], m.Src[:], uint32(icmpHeaderSize+q))
	ic.SetChecksum(^packet.Checksum(buf[l3-icmpHeaderSize:l3+q], s))
	return start, l2 + ipv6HeaderSize + icmpHeaderSize + q, TooBig
}

var broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// mayReplyICMP reports whether an ICMP error may be sent about the packet
// (RFC 1122 §3.2.2, RFC 4443 §2.4(e)).
func mayReplyICMP(m *packet.Meta) bool {
	if m.Frag == packet.FragNonFirst {
		return false
	}
	src := netip.AddrFrom16(m.Src)
	if m.Family == packet.IPv4 {
		if !src.Is4In6() {
			return false
		}
		src = src.Unmap()
		if src == broadcast4 {
			return false
		}
	}
	if src.IsUnspecified() || src.IsLoopback() || src.IsMulticast() {
		return false
	}
	switch {
	case m.Family == packet.IPv4 && m.Proto == packet.ProtoICMP:
		switch m.ICMPType {
		case packet.ICMPv4DstUnreachable, 4 /* source quench */, 5 /* redirect */, packet.ICMPv4TimeExceeded, packet.ICMPv4ParamProblem:
			return false
		}
	case m.Family == packet.IPv6 && m.Proto == packet.ProtoICMPv6:
		if m.ICMPType < 128 { // RFC 4443 §2.1: types 0..127 are errors
			return false
		}
	}
	return true
}

// TooBigReplyLen returns the length of the frame TooBigReply would build
// for m.
func TooBigReplyLen(m *packet.Meta) int {
	l2 := ethHeaderSize
	if m.HasVLAN {
		l2 += vlanTagSize
	}
	inLen := int(m.L3End) - int(m.L3Off)
	if m.Family == packet.IPv4 {
		return l2 + min(maxReplyIPv4, ipv4HeaderSize+icmpHeaderSize+inLen)
	}
	return l2 + min(maxReplyIPv6, ipv6HeaderSize+icmpHeaderSize+inLen)
}
