// Package decaptest builds the packets decap receives, for tests here and
// in pkg/lab: inner IPv4/IPv6 UDP datagrams with correct checksums, and the
// GRE and GUE payloads that carry them, on packettest's header builders.
// It is a test helper: it allocates freely and panics on impossible input.
package decaptest

import (
	"encoding/binary"
	"net/netip"

	"github.com/xlbnet/xlb/pkg/packettest"
)

// IP protocol numbers.
const (
	ProtoIPIP = 4
	ProtoIPv6 = 41
	ProtoUDP  = 17
	ProtoGRE  = 47
)

// UDP returns an IPv4 or IPv6 packet (by the family of src and dst, which
// must match) carrying one UDP datagram with payload, with valid IP and UDP
// checksums, TTL/hop limit 64 and IPv4 ID id.
func UDP(src, dst netip.AddrPort, id uint16, payload []byte) []byte {
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	if s.Is4() != d.Is4() {
		panic("decaptest: mixed address families")
	}
	udp := packettest.L4Checksum(s.String(), d.String(), ProtoUDP, packettest.UDP(src.Port(), dst.Port(), payload...))
	if s.Is4() {
		return IPv4(s, d, ProtoUDP, id, udp)
	}
	return IPv6(s, d, ProtoUDP, udp)
}

// IPv4 returns an IPv4 header (no options, TTL 64, header checksum set)
// followed by payload.
func IPv4(src, dst netip.Addr, proto uint8, id uint16, payload []byte) []byte {
	return packettest.IPv4{Src: src.Unmap().String(), Dst: dst.Unmap().String(), Proto: proto, ID: id}.Build(payload)
}

// IPv6 returns an IPv6 header (hop limit 64) followed by payload.
func IPv6(src, dst netip.Addr, next uint8, payload []byte) []byte {
	return packettest.IPv6{Src: src.String(), Dst: dst.String(), Next: next}.Build(payload)
}

// GREOptions selects the optional GRE fields.
type GREOptions struct {
	Checksum bool
	Key      *uint32
	Seq      *uint32
}

// GRE returns a GRE header (RFC 2784/2890) with the protocol type matching
// the inner packet's version, followed by inner.
func GRE(inner []byte, o GREOptions) []byte {
	var flags uint16
	n := 4
	if o.Checksum {
		flags |= 0x8000
		n += 4
	}
	if o.Key != nil {
		flags |= 0x2000
		n += 4
	}
	if o.Seq != nil {
		flags |= 0x1000
		n += 4
	}
	p := make([]byte, n+len(inner))
	binary.BigEndian.PutUint16(p[0:], flags)
	ptype := uint16(0x0800)
	if len(inner) > 0 && inner[0]>>4 == 6 {
		ptype = 0x86DD
	}
	binary.BigEndian.PutUint16(p[2:], ptype)
	off := 4
	if o.Checksum {
		off += 4
	}
	if o.Key != nil {
		binary.BigEndian.PutUint32(p[off:], *o.Key)
		off += 4
	}
	if o.Seq != nil {
		binary.BigEndian.PutUint32(p[off:], *o.Seq)
		off += 4
	}
	copy(p[off:], inner)
	if o.Checksum {
		binary.BigEndian.PutUint16(p[4:], ^packettest.Sum(p))
	}
	return p
}

// GUE0 returns a GUE variant 0 data message (no optional fields) carrying
// inner; GUE variant 1 is the inner packet itself.
func GUE0(inner []byte) []byte {
	p := make([]byte, 4+len(inner))
	p[1] = ProtoIPIP
	if len(inner) > 0 && inner[0]>>4 == 6 {
		p[1] = ProtoIPv6
	}
	copy(p[4:], inner)
	return p
}
