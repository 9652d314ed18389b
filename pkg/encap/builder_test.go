package encap_test

import (
	"encoding/binary"
	"net/netip"
)

// A test-only packet builder that writes headers byte by byte from the RFC
// layouts and sums checksums with its own loop, independently of
// pkg/packet's views and of the code under test, so that a wrong offset or
// a wrong sum cannot hide in both.

var (
	ourMAC    = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01} // the appliance
	routerMAC = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0xfe} // sent the client's frame
	nextHop   = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x10} // towards the backend
)

const (
	client4 = "198.51.100.7"
	vip4    = "203.0.113.10"
	self4   = "192.0.2.1"
	back4   = "192.0.2.10"
	client6 = "fd00:c::7"
	vip6    = "fd00:f::10"
	self6   = "fd00:b::1"
	back6   = "fd00:b::10"
)

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func ip(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

// sum is a plain RFC 1071 ones' complement sum of the given parts, folded,
// not complemented; parts are concatenated before summing.
func sum(parts ...[]byte) uint16 {
	b := cat(parts...)
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// eth builds an Ethernet header, with an 802.1Q tag when vlan >= 0.
func eth(dst, src [6]byte, et uint16, vlan int) []byte {
	b := cat(dst[:], src[:])
	if vlan >= 0 {
		b = cat(b, be16(0x8100), be16(uint16(vlan)))
	}
	return cat(b, be16(et))
}

// v4h describes an IPv4 header.
type v4h struct {
	src, dst string
	proto    uint8
	tos, ttl uint8
	id       uint16
	ff       uint16 // flags and fragment offset
}

func (h v4h) build(payload []byte) []byte {
	ttl := h.ttl
	if ttl == 0 {
		ttl = 64
	}
	b := cat([]byte{0x45, h.tos}, be16(uint16(20+len(payload))), be16(h.id), be16(h.ff), []byte{ttl, h.proto, 0, 0}, ip(h.src), ip(h.dst))
	binary.BigEndian.PutUint16(b[10:], ^sum(b))
	return cat(b, payload)
}

// v6h describes an IPv6 header.
type v6h struct {
	src, dst string
	nh       uint8
	tc, hop  uint8
	flow     uint32
}

func (h v6h) build(payload []byte) []byte {
	hop := h.hop
	if hop == 0 {
		hop = 64
	}
	b := cat(be32(6<<28|uint32(h.tc)<<20|h.flow&0xfffff), be16(uint16(len(payload))), []byte{h.nh, hop}, ip(h.src), ip(h.dst))
	return cat(b, payload)
}

// pseudo returns bytes that sum like the TCP/UDP/ICMPv6 pseudo-header for
// src, dst, proto and length n < 65536: the IPv4 layout (RFC 768); the IPv6
// one (RFC 8200 §8.1) differs only in zero words and word order.
func pseudo(src, dst string, proto uint8, n int) []byte {
	return cat(ip(src), ip(dst), []byte{0, proto}, be16(uint16(n)))
}

// tcpSeg builds a TCP segment with a valid checksum for src -> dst.
func tcpSeg(src, dst string, sport, dport uint16, flags uint8, payload []byte) []byte {
	b := cat(be16(sport), be16(dport), be32(1000), be32(2000), []byte{5 << 4, flags}, be16(65535), be16(0), be16(0), payload)
	binary.BigEndian.PutUint16(b[16:], ^sum(pseudo(src, dst, 6, len(b)), b))
	return b
}

// udpDgram builds a UDP datagram with a valid checksum (zero when noSum).
func udpDgram(src, dst string, sport, dport uint16, payload []byte, noSum bool) []byte {
	b := cat(be16(sport), be16(dport), be16(uint16(8+len(payload))), be16(0), payload)
	if !noSum {
		c := ^sum(pseudo(src, dst, 17, len(b)), b)
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(b[6:], c)
	}
	return b
}

// icmpMsg builds an ICMP (v6: with pseudo) message with a valid checksum.
func icmpMsg(typ, code uint8, rest uint32, body []byte, v6src, v6dst string) []byte {
	b := cat([]byte{typ, code, 0, 0}, be32(rest), body)
	var c uint16
	if v6src != "" {
		c = ^sum(pseudo(v6src, v6dst, 58, len(b)), b)
	} else {
		c = ^sum(b)
	}
	binary.BigEndian.PutUint16(b[2:], c)
	return b
}

func bytesN(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// headroom is the room in front of every test frame, as in a UMEM chunk.
const headroom = 256

// chunk returns a UMEM-like buffer holding frame at offset headroom, with
// spare room after it, and the frame's (off, n).
func chunk(frame []byte) (buf []byte, off, n int) {
	buf = make([]byte, headroom+len(frame)+64)
	copy(buf[headroom:], frame)
	return buf, headroom, len(frame)
}
