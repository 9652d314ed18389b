package packet_test

import (
	"encoding/binary"
	"net/netip"

	"github.com/xlbnet/xlb/pkg/packet"
)

// A small test-only frame builder. It writes headers byte by byte from the
// RFC layouts, independently of the views under test, so that a mistake in
// a view's offset constant cannot hide in the fixtures.

var (
	macDst = [6]byte{0x02, 0, 0, 0, 0, 0x02}
	macSrc = [6]byte{0x02, 0, 0, 0, 0, 0x01}
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

// eth returns an Ethernet header with EtherType et, preceded by 802.1Q tags
// (TPID 0x8100 unless the tag's high 16 bits give another TPID) when
// tags are given.
func eth(et uint16, tags ...uint32) []byte {
	b := cat(macDst[:], macSrc[:])
	for _, t := range tags {
		tpid := uint16(t >> 16)
		if tpid == 0 {
			tpid = packet.EtherTypeVLAN
		}
		b = cat(b, be16(tpid), be16(uint16(t)))
	}
	return cat(b, be16(et))
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// mapped returns the Meta form of an address: IPv4 as ::ffff:a.b.c.d.
func mapped(s string) [16]byte { return addr(s).As16() }

// v4 describes an IPv4 header to build.
type v4 struct {
	src, dst string
	proto    uint8
	tos, ttl uint8
	id       uint16
	fragWord uint16 // flags and fragment offset, raw
	options  []byte // appended after the 20 bytes; a multiple of 4
	ihl      int    // override IHL (0: computed)
	totalLen int    // override total length (0: computed)
	version  uint8  // override version (0: 4)
	breakSum bool   // store a wrong checksum
}

func ipSum(b []byte) uint16 {
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
	return ^uint16(s)
}

func (h v4) build(payload []byte) []byte {
	hl := 20 + len(h.options)
	ihl := hl / 4
	if h.ihl != 0 {
		ihl = h.ihl
	}
	ver := h.version
	if ver == 0 {
		ver = 4
	}
	tl := hl + len(payload)
	if h.totalLen != 0 {
		tl = h.totalLen
	}
	ttl := h.ttl
	if ttl == 0 {
		ttl = 64
	}
	b := []byte{ver<<4 | uint8(ihl)&0x0f, h.tos}
	b = cat(b, be16(uint16(tl)), be16(h.id), be16(h.fragWord), []byte{ttl, h.proto, 0, 0})
	b = append(b, addr(h.src).AsSlice()...)
	b = append(b, addr(h.dst).AsSlice()...)
	b = append(b, h.options...)
	sum := ipSum(b)
	if h.breakSum {
		sum ^= 0x5a5a
	}
	binary.BigEndian.PutUint16(b[10:], sum)
	return cat(b, payload)
}

// v6 describes an IPv6 header to build.
type v6 struct {
	src, dst string
	nh       uint8
	tc, hop  uint8
	flow     uint32
	plen     int // override payload length (0: computed)
	version  uint8
}

func (h v6) build(payload []byte) []byte {
	ver := h.version
	if ver == 0 {
		ver = 6
	}
	hop := h.hop
	if hop == 0 {
		hop = 64
	}
	pl := len(payload)
	if h.plen != 0 {
		pl = h.plen
	}
	b := be32(uint32(ver)<<28 | uint32(h.tc)<<20 | h.flow&0xfffff)
	b = cat(b, be16(uint16(pl)), []byte{h.nh, hop})
	b = append(b, addr(h.src).AsSlice()...)
	b = append(b, addr(h.dst).AsSlice()...)
	return cat(b, payload)
}

// ext6 returns a type-length extension header (hop-by-hop, routing,
// destination options) of (units+1)*8 bytes, filled with a PadN option.
func ext6(nh uint8, units int) []byte {
	n := (units + 1) * 8
	b := make([]byte, n)
	b[0], b[1] = nh, uint8(units)
	b[2], b[3] = 1, uint8(n-4) // PadN
	return b
}

// rt6 returns a type 0 routing header with segments left 0 and one
// address (24 bytes).
func rt6(nh uint8) []byte {
	return cat([]byte{nh, 2, 0, 0}, be32(0), addr(router6).AsSlice())
}

// ah6 returns an authentication header with a 12-byte ICV (24 bytes).
func ah6(nh uint8) []byte {
	b := make([]byte, 24)
	b[0], b[1] = nh, 4 // (4+2)*4 = 24
	return b
}

// frag6 returns an IPv6 fragment header; off in bytes (a multiple of 8).
func frag6(nh uint8, off int, more bool, id uint32) []byte {
	w := uint16(off)
	if more {
		w |= 1
	}
	return cat([]byte{nh, 0}, be16(w), be32(id))
}

func tcp(sport, dport uint16, flags uint8, payload ...byte) []byte {
	return tcpOpt(sport, dport, flags, nil, payload...)
}

// tcpOpt builds a TCP header with options (a multiple of 4 bytes).
func tcpOpt(sport, dport uint16, flags uint8, opts []byte, payload ...byte) []byte {
	doff := (20 + len(opts)) / 4
	b := cat(be16(sport), be16(dport), be32(1000), be32(2000))
	b = append(b, uint8(doff)<<4, flags)
	b = cat(b, be16(65535), be16(0), be16(0), opts)
	return cat(b, payload)
}

func udp(sport, dport uint16, payload ...byte) []byte {
	return cat(be16(sport), be16(dport), be16(uint16(8+len(payload))), be16(0), payload)
}

// udpLen builds a UDP header whose length field says n.
func udpLen(sport, dport uint16, n uint16, payload ...byte) []byte {
	return cat(be16(sport), be16(dport), be16(n), be16(0), payload)
}

// icmp builds an ICMP or ICMPv6 header: type, code, zero checksum, the
// 32-bit rest-of-header word, then body.
func icmp(typ, code uint8, rest uint32, body ...byte) []byte {
	return cat([]byte{typ, code, 0, 0}, be32(rest), body)
}

func esp(spi, seq uint32, body ...byte) []byte { return cat(be32(spi), be32(seq), body) }

func gre(flags uint16, proto uint16, body ...byte) []byte {
	return cat(be16(flags), be16(proto), body)
}

func pad(b []byte, n int) []byte {
	for len(b) < n {
		b = append(b, 0)
	}
	return b
}

func bytesN(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}
