package packettest

import (
	"encoding/binary"
	"net/netip"
)

// The header builders below write each header byte by byte from its RFC
// layout and sum checksums with their own loop. They do not import
// pkg/packet, so a wrong offset or sum in the parser, the encapsulation or
// the XDP program cannot hide in the fixtures as well. Unlike Frame they
// build any header, malformed ones included: lengths, versions and
// checksums can be overridden. Addresses are text (netip syntax).

// SrcMAC and DstMAC are the addresses of Eth and of a Spec without MACs.
var (
	SrcMAC = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	DstMAC = [6]byte{0x02, 0, 0, 0, 0, 0x02}
)

// TPIDVLAN is the 802.1Q tag protocol identifier, the default of a tag.
const TPIDVLAN = 0x8100

// Cat returns the parts concatenated into a new slice.
func Cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// BE16 returns v in network byte order.
func BE16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// BE32 returns v in network byte order.
func BE32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// Pad returns b extended with zeros to n bytes (b itself when longer).
func Pad(b []byte, n int) []byte {
	for len(b) < n {
		b = append(b, 0)
	}
	return b
}

// Bytes returns n payload bytes 0, 1, 2, … (mod 256).
func Bytes(n int) []byte { return Pattern(n, 0, 1) }

// Pattern returns n payload bytes first, first+step, first+2·step, … (mod 256).
func Pattern(n int, first, step byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = first + byte(i)*step
	}
	return b
}

// Addr returns the bytes of address s: 4 for IPv4, 16 for IPv6.
func Addr(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

// Eth returns an Ethernet header from SrcMAC to DstMAC; see EthFrom.
func Eth(etherType uint16, tags ...uint32) []byte {
	return EthFrom(DstMAC, SrcMAC, etherType, tags...)
}

// EthFrom returns an Ethernet header with EtherType etherType, preceded by
// the VLAN tags given, outermost first: the tag control information in
// the low 16 bits, the TPID in the high 16 (0 for TPIDVLAN).
func EthFrom(dst, src [6]byte, etherType uint16, tags ...uint32) []byte {
	b := Cat(dst[:], src[:])
	for _, t := range tags {
		tpid := uint16(t >> 16)
		if tpid == 0 {
			tpid = TPIDVLAN
		}
		b = Cat(b, BE16(tpid), BE16(uint16(t)))
	}
	return Cat(b, BE16(etherType))
}

// IPv4 describes an IPv4 header (RFC 791). Zero fields take the values of
// a plain header: version 4, TTL 64, IHL and total length computed, a
// valid checksum.
type IPv4 struct {
	Src, Dst string
	Proto    uint8
	TOS, TTL uint8
	ID       uint16
	Frag     uint16 // flags and fragment offset, as on the wire
	Options  []byte // after the 20 fixed bytes; a multiple of 4
	IHL      int    // overrides the header length in 32-bit words
	TotalLen int    // overrides the total length
	Version  uint8  // overrides the version
	BadSum   bool   // stores a wrong header checksum
}

// Build returns the header followed by payload.
func (h IPv4) Build(payload []byte) []byte {
	hl := 20 + len(h.Options)
	ihl := hl / 4
	if h.IHL != 0 {
		ihl = h.IHL
	}
	ver := h.Version
	if ver == 0 {
		ver = 4
	}
	tl := hl + len(payload)
	if h.TotalLen != 0 {
		tl = h.TotalLen
	}
	ttl := h.TTL
	if ttl == 0 {
		ttl = 64
	}
	b := []byte{ver<<4 | uint8(ihl)&0x0f, h.TOS}
	b = Cat(b, BE16(uint16(tl)), BE16(h.ID), BE16(h.Frag), []byte{ttl, h.Proto, 0, 0}, Addr(h.Src), Addr(h.Dst), h.Options)
	sum := ^Sum(b)
	if h.BadSum {
		sum ^= 0x5a5a
	}
	binary.BigEndian.PutUint16(b[10:], sum)
	return Cat(b, payload)
}

// IPv6 describes an IPv6 header (RFC 8200). Zero fields take the values of
// a plain header: version 6, hop limit 64, payload length computed.
type IPv6 struct {
	Src, Dst   string
	Next       uint8 // next header
	TC, Hop    uint8
	Flow       uint32
	PayloadLen int   // overrides the payload length
	Version    uint8 // overrides the version
}

// Build returns the header followed by payload.
func (h IPv6) Build(payload []byte) []byte {
	ver := h.Version
	if ver == 0 {
		ver = 6
	}
	hop := h.Hop
	if hop == 0 {
		hop = 64
	}
	pl := len(payload)
	if h.PayloadLen != 0 {
		pl = h.PayloadLen
	}
	b := BE32(uint32(ver)<<28 | uint32(h.TC)<<20 | h.Flow&0xfffff)
	b = Cat(b, BE16(uint16(pl)), []byte{h.Next, hop}, Addr(h.Src), Addr(h.Dst))
	return Cat(b, payload)
}

// Ext6 returns a type-length IPv6 extension header (hop-by-hop, routing,
// destination options) of (units+1)·8 bytes, filled with a PadN option.
func Ext6(next uint8, units int) []byte {
	n := (units + 1) * 8
	b := make([]byte, n)
	b[0], b[1] = next, uint8(units)
	b[2], b[3] = 1, uint8(n-4) // PadN
	return b
}

// Routing6 returns a type 0 routing header with segments left 0 and the
// given addresses.
func Routing6(next uint8, addrs ...string) []byte {
	b := Cat([]byte{next, uint8(2 * len(addrs)), 0, 0}, BE32(0))
	for _, a := range addrs {
		b = append(b, Addr(a)...)
	}
	return b
}

// Auth6 returns an authentication header with a 12-byte ICV (24 bytes).
func Auth6(next uint8) []byte {
	b := make([]byte, 24)
	b[0], b[1] = next, 4 // (4+2)·4 = 24
	return b
}

// Frag6 returns an IPv6 fragment header; off is in bytes (a multiple of 8).
func Frag6(next uint8, off int, more bool, id uint32) []byte {
	w := uint16(off)
	if more {
		w |= 1
	}
	return Cat([]byte{next, 0}, BE16(w), BE32(id))
}

// TCP returns a TCP header (sequence 1000, acknowledgment 2000, window
// 65535, checksum 0) with flags, followed by payload.
func TCP(sport, dport uint16, flags uint8, payload ...byte) []byte {
	return TCPOpt(sport, dport, flags, nil, payload...)
}

// TCPOpt is TCP with options (a multiple of 4 bytes).
func TCPOpt(sport, dport uint16, flags uint8, opts []byte, payload ...byte) []byte {
	doff := (20 + len(opts)) / 4
	b := Cat(BE16(sport), BE16(dport), BE32(1000), BE32(2000), []byte{uint8(doff) << 4, flags})
	return Cat(b, BE16(65535), BE16(0), BE16(0), opts, payload)
}

// UDP returns a UDP header (checksum 0) followed by payload.
func UDP(sport, dport uint16, payload ...byte) []byte {
	return UDPLen(sport, dport, uint16(8+len(payload)), payload...)
}

// UDPLen is UDP with the length field set to n.
func UDPLen(sport, dport, n uint16, payload ...byte) []byte {
	return Cat(BE16(sport), BE16(dport), BE16(n), BE16(0), payload)
}

// ICMP returns an ICMP or ICMPv6 header (checksum 0) with the 32-bit
// rest-of-header word, followed by body.
func ICMP(typ, code uint8, rest uint32, body ...byte) []byte {
	return Cat([]byte{typ, code, 0, 0}, BE32(rest), body)
}

// ESP returns an ESP header followed by body.
func ESP(spi, seq uint32, body ...byte) []byte { return Cat(BE32(spi), BE32(seq), body) }

// GRE returns a GRE header with flags and version, and protocol type
// proto, followed by body (the optional fields, if any, and the payload).
func GRE(flags, proto uint16, body ...byte) []byte { return Cat(BE16(flags), BE16(proto), body) }

// Sum returns the RFC 1071 ones' complement sum of the parts
// concatenated, folded and not complemented: a header whose checksum is
// right sums to 0xffff.
func Sum(parts ...[]byte) uint16 {
	b := Cat(parts...)
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

// Pseudo returns bytes that sum like the TCP/UDP/ICMPv6 pseudo-header for
// src, dst, proto and length n < 65536: the IPv4 layout (RFC 768); the IPv6
// one (RFC 8200 §8.1) differs only in zero words and word order.
func Pseudo(src, dst string, proto uint8, n int) []byte {
	return Cat(Addr(src), Addr(dst), []byte{0, proto}, BE16(uint16(n)))
}

// L4Checksum sets the checksum of seg, a TCP (6), UDP (17), ICMP (1) or
// ICMPv6 (58) message sent from src to dst, and returns seg. ICMP sums the
// message alone (src and dst are not read); a UDP sum of 0 is sent as
// 0xffff.
func L4Checksum(src, dst string, proto uint8, seg []byte) []byte {
	at := map[uint8]int{1: 2, 6: 16, 17: 6, 58: 2}[proto]
	if at == 0 {
		panic("packettest: L4Checksum: no checksum for this protocol")
	}
	binary.BigEndian.PutUint16(seg[at:], 0)
	var c uint16
	if proto == 1 {
		c = ^Sum(seg)
	} else {
		c = ^Sum(Pseudo(src, dst, proto, len(seg)), seg)
	}
	if c == 0 && proto == 17 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(seg[at:], c)
	return seg
}
