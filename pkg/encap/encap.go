package encap

import (
	"encoding/binary"

	"github.com/xlbnet/xlb/pkg/packet"
)

// Encap rewrites, in place, the frame buf[off:off+n] that Parse described
// in m into the packet for the template's backend. buf is the whole UMEM
// chunk: the new headers are written into the headroom in front of the
// frame, so the result starts at newOff <= off. flowHash is the flow's
// selection hash (GUE source port, IPv6 flow label); ipID is the outer
// IPv4 identification, from a per-worker counter.
//
// On OK and TooBig the packet to transmit is buf[newOff:newOff+newLen].
// On every other Result the frame is left as it was and (off, n) is
// returned. Encap never allocates and is safe for concurrent use on
// different frames.
func (t *Template) Encap(buf []byte, off, n int, m *packet.Meta, flowHash uint64, ipID uint16) (newOff, newLen int, res Result) {
	if r := t.check(buf, off, n, m); r != OK {
		return off, n, r
	}
	l3 := off + int(m.L3Off)
	end := off + int(m.L3End)
	inLen := end - l3
	if inLen+t.overhead > t.mtu {
		if m.Family == packet.IPv4 && !m.DF {
			if t.kind == Direct {
				return off, n, DropTooBig
			}
			return off, n, NeedFragments
		}
		return TooBigReply(buf, off, n, m, t.spec.SrcMAC, t.mtu-t.overhead, ipID)
	}
	if t.kind == Direct {
		// The ingress VLAN tag and the IP packet stay; L2 padding goes.
		copy(buf[off:off+12], t.macs[:])
		return off, end - off, OK
	}
	l2 := ethHeaderSize
	if m.HasVLAN {
		l2 += vlanTagSize
	}
	start := l3 - t.overhead - l2
	if start < 0 {
		return off, n, DropNoHeadroom
	}
	t.putL2(buf[start:start+l2], m)
	h := buf[start+l2 : l3]
	copy(h, t.hdr[:t.overhead])
	var ff uint16
	if m.DF {
		ff = packet.IPv4FlagDF // inner IPv4 DF; outer IPv4 implies inner IPv4
	}
	t.putIP(h, m, t.overhead-t.ipLen+inLen, t.tunnelProto(m), flowHash, ipID, ff)
	t.putTunnel(h[t.ipLen:], buf[l3:end], m, flowHash)
	return start, end - start, OK
}

// check validates the frame bounds and Meta against buf, and the inner
// family against the template. Meta comes from Parse, so a failure here is
// a caller bug; it is still a counted drop, never a panic.
func (t *Template) check(buf []byte, off, n int, m *packet.Meta) Result {
	if r := checkFrame(buf, off, n, m); r != OK {
		return r
	}
	if m.Family == packet.IPv6 && t.outer == packet.IPv4 {
		return DropFamily
	}
	return OK
}

func checkFrame(buf []byte, off, n int, m *packet.Meta) Result {
	if off < 0 || n < 0 || off > len(buf) || n > len(buf)-off {
		return DropBadMeta
	}
	if int(m.L3End) > n || m.L3Off < ethHeaderSize || m.L4Off < m.L3Off || m.L4Off > m.L3End {
		return DropBadMeta
	}
	l := int(m.L3End) - int(m.L3Off)
	switch m.Family {
	case packet.IPv4:
		if l < ipv4HeaderSize {
			return DropBadMeta
		}
	case packet.IPv6:
		if l < ipv6HeaderSize {
			return DropBadMeta
		}
	default:
		return DropBadMeta
	}
	return OK
}

// putL2 writes the template's MACs, the ingress VLAN tag if the frame had
// one, and the outer EtherType into b (14 or 18 bytes).
func (t *Template) putL2(b []byte, m *packet.Meta) {
	et := packet.EtherTypeIPv4
	if t.outer == packet.IPv6 {
		et = packet.EtherTypeIPv6
	}
	putL2(b, &t.macs, m, et)
}

func putL2(b []byte, macs *[12]byte, m *packet.Meta, et uint16) {
	copy(b[0:12], macs[:])
	if m.HasVLAN {
		binary.BigEndian.PutUint16(b[12:], packet.EtherTypeVLAN)
		binary.BigEndian.PutUint16(b[14:], m.VLANTCI)
		binary.BigEndian.PutUint16(b[16:], et)
		return
	}
	binary.BigEndian.PutUint16(b[12:], et)
}

// tunnelProto is the protocol number that follows the outer IP header.
func (t *Template) tunnelProto(m *packet.Meta) uint8 {
	switch t.kind {
	case GUE:
		return packet.ProtoUDP
	case GRE:
		return packet.ProtoGRE
	}
	if m.Family == packet.IPv6 {
		return packet.ProtoIPv6
	}
	return packet.ProtoIPIP
}

// putIP fills the per-packet fields of the outer IP header h, whose
// constant fields the caller copied from t.hdr: DSCP and ECN from the
// inner header (RFC 6040 normal mode copies ECN), the length of what
// follows the outer header (payload), and for IPv4 the ID, the flags and
// fragment offset word ff (DF copied from the inner header by the caller;
// MF and offset for fragments), and the checksum from the template's partial sum; for IPv6 the flow label from
// the flow hash (RFC 6438) and next header nh.
func (t *Template) putIP(h []byte, m *packet.Meta, payload int, nh uint8, flowHash uint64, ipID uint16, ff uint16) {
	if t.outer == packet.IPv6 {
		_ = h[ipv6HeaderSize-1]
		binary.BigEndian.PutUint32(h[0:], 6<<28|uint32(m.TOS)<<20|flowLabel(flowHash))
		binary.BigEndian.PutUint16(h[4:], uint16(payload))
		h[packet.IPv6NextHeaderOffset] = nh
		return
	}
	_ = h[ipv4HeaderSize-1]
	w0 := uint16(0x45)<<8 | uint16(m.TOS)
	tl := uint16(ipv4HeaderSize + payload)
	binary.BigEndian.PutUint16(h[0:], w0)
	binary.BigEndian.PutUint16(h[2:], tl)
	binary.BigEndian.PutUint16(h[4:], ipID)
	binary.BigEndian.PutUint16(h[6:], ff)
	s := t.v4Sum + uint32(w0) + uint32(tl) + uint32(ipID) + uint32(ff)
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	binary.BigEndian.PutUint16(h[packet.IPv4ChecksumOffset:], ^uint16(s))
}

// putTunnel fills the per-packet fields of the UDP or GRE header at h for
// the inner packet inner.
func (t *Template) putTunnel(h []byte, inner []byte, m *packet.Meta, flowHash uint64) {
	switch t.kind {
	case GUE:
		_ = h[udpHeaderSize-1]
		sport := guePort(flowHash)
		ul := uint16(udpHeaderSize + len(inner))
		binary.BigEndian.PutUint16(h[packet.UDPSrcPortOffset:], sport)
		binary.BigEndian.PutUint16(h[packet.UDPLengthOffset:], ul)
		if t.outer == packet.IPv6 {
			binary.BigEndian.PutUint16(h[packet.UDPChecksumOffset:], t.gueV6Checksum(inner, m, sport, ul, true))
		}
	case GRE:
		et := packet.EtherTypeIPv4
		if m.Family == packet.IPv6 {
			et = packet.EtherTypeIPv6
		}
		binary.BigEndian.PutUint16(h[packet.GREProtocolOffset:], et)
	}
}

// GUE source ports are drawn from the ephemeral range 49152..65535 (RFC
// 6335), like the kernel's fou/gue and vxlan defaults, so that the
// backend's RSS and any ECMP on the way spread flows.
const (
	guePortBase = 0xc000
	guePortMask = 0x3fff
)

// guePort folds the 64-bit flow hash into a port in 49152..65535; every
// bit of the hash reaches the result.
func guePort(h uint64) uint16 {
	h ^= h >> 32
	h ^= h >> 16
	return guePortBase | uint16(h)&guePortMask
}

// flowLabel folds the flow hash into a 20-bit IPv6 flow label (RFC 6438:
// tunnel endpoints label by the inner flow). A zero hash gives label 0,
// "unlabelled", which is still valid.
func flowLabel(h uint64) uint32 {
	h ^= h >> 40
	h ^= h >> 20
	return uint32(h) & 0xfffff
}

// gueV6Checksum returns the UDP checksum of a GUE datagram over IPv6 with
// source port sport, length ul, whose payload is the inner packet. With
// lco, TCP and UDP inner packets use local checksum offload: the sum of a
// transport segment with a valid checksum is the complement of its
// pseudo-header sum, so only the inner IP header is read.
func (t *Template) gueV6Checksum(inner []byte, m *packet.Meta, sport, ul uint16, lco bool) uint16 {
	s := packet.ChecksumCombine(t.v6Pseudo, ul) // pseudo-header length
	s = packet.ChecksumCombine(s, ul)           // UDP length field
	s = packet.ChecksumCombine(s, sport)
	s = packet.ChecksumCombine(s, innerSum(inner, m, lco))
	c := ^s
	if c == 0 {
		c = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	return c
}

// innerSum returns the folded ones' complement sum of the inner IP packet.
func innerSum(inner []byte, m *packet.Meta, lco bool) uint16 {
	l4 := int(m.L4Off) - int(m.L3Off)
	if lco && lcoEligible(inner, m, l4) {
		seg := uint32(len(inner) - l4)
		if m.Family == packet.IPv4 {
			// A verified IPv4 header sums to 0xffff, the ones' complement
			// zero: only the segment counts.
			ph := packet.PseudoHeaderChecksum(m.Proto, inner[12:16], inner[16:20], seg)
			return ^ph
		}
		// The header's addresses cancel the pseudo-header's: what is left
		// is its first 8 bytes minus protocol and segment length.
		ph := packet.ChecksumCombine(uint16(m.Proto), uint16(seg))
		return packet.ChecksumCombine(packet.Checksum(inner[:8], 0), ^ph)
	}
	return packet.Checksum(inner, 0)
}

// lcoEligible reports whether the inner packet's transport checksum can
// stand for the sum of its segment: an unfragmented TCP segment, or a UDP
// datagram with a checksum whose length fills the IP packet, right after a
// plain IPv6 header (extension headers could change the pseudo-header's
// destination) or any IPv4 header (Parse verified its checksum).
func lcoEligible(inner []byte, m *packet.Meta, l4 int) bool {
	if m.Frag != packet.FragNone {
		return false
	}
	if m.Family == packet.IPv6 && l4 != ipv6HeaderSize {
		return false
	}
	switch m.Proto {
	case packet.ProtoTCP:
		return len(inner)-l4 >= packet.TCPMinimumSize
	case packet.ProtoUDP:
		if len(inner)-l4 < udpHeaderSize {
			return false
		}
		u := packet.UDPHeader(inner[l4:])
		return u.Checksum() != 0 && int(u.Length()) == len(inner)-l4
	}
	return false
}
