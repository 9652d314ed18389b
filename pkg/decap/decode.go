package decap

import "github.com/xlbnet/xlb/pkg/packet"

// Headers are read through pkg/packet's views (packet.IPv4Header,
// IPv6Header, GREHeader) and its checksum; only GUE, which xlb's data
// plane never parses, is read here.
const gueHeaderLen = 4 // GUE variant 0 base header

// IP protocol numbers of the outer headers decap receives (packet's
// ProtoIPIP, ProtoIPv6, ProtoGRE, untyped for the socket calls).
const (
	protoIPIP = 4  // IPv4 inside (RFC 2003; also 4in6, RFC 2473)
	protoIPv6 = 41 // IPv6 inside (6in4, RFC 4213; 6in6, RFC 2473)
	protoGRE  = 47 // GRE (RFC 2784, RFC 2890)
)

// kind is what the bytes a reader receives start with.
type kind uint8

const (
	// kindRaw4: an IPv4 raw socket; the buffer starts with the outer IPv4
	// header, followed by the IPIP or GRE payload.
	kindRaw4 kind = iota + 1
	// kindRaw6IPIP: an IPv6 raw socket for next header 4 or 41; the kernel
	// has removed the outer IPv6 header (and extension headers), so the
	// buffer is the inner packet.
	kindRaw6IPIP
	// kindRaw6GRE: an IPv6 raw socket for next header 47; the buffer starts
	// with the GRE header.
	kindRaw6GRE
	// kindGUE: a UDP socket; the buffer is the UDP payload.
	kindGUE
)

// decode returns the inner IP packet inside b, a datagram received on a
// socket of kind k, or the reason it is dropped. proto6 is the next header
// of the socket for kindRaw6IPIP (4 or 41). The result aliases b.
func decode(k kind, proto6 uint8, b []byte) ([]byte, DropReason) {
	switch k {
	case kindRaw4:
		return decodeRaw4(b)
	case kindRaw6IPIP:
		return innerIP(b, versionOf(proto6))
	case kindRaw6GRE:
		return decodeGRE(b)
	case kindGUE:
		return decodeGUE(b)
	}
	return nil, DropUnknownKind
}

// versionOf maps an IPIP protocol number to the IP version it carries.
func versionOf(proto uint8) uint8 {
	if proto == protoIPv6 {
		return 6
	}
	return 4
}

// decodeRaw4 strips the outer IPv4 header delivered by an IPv4 raw socket
// and decodes what follows according to its protocol field.
func decodeRaw4(b []byte) ([]byte, DropReason) {
	if len(b) < packet.IPv4MinimumSize {
		return nil, DropOuterTruncated
	}
	ip := packet.IPv4Header(b)
	if ip.Version() != 4 {
		return nil, DropOuterMalformed
	}
	hlen, total := ip.HeaderLength(), int(ip.TotalLength())
	// The kernel already validated the header; these checks keep a bug or
	// a future kernel from turning into an out-of-range slice.
	if hlen < packet.IPv4MinimumSize || len(b) < hlen {
		return nil, DropOuterMalformed
	}
	if total >= hlen && total < len(b) {
		b = b[:total]
	}
	payload := b[hlen:]
	switch ip.Protocol() {
	case protoIPIP:
		return innerIP(payload, 4)
	case protoIPv6:
		return innerIP(payload, 6)
	case protoGRE:
		return decodeGRE(payload)
	}
	return nil, DropOuterProtocol
}

// decodeGRE strips a GRE header (base 4 bytes plus the optional checksum,
// key and sequence words the flags announce; RFC 2784, RFC 2890), verifies
// the checksum when present and returns the inner IPv4 or IPv6 packet.
// Version 1 (PPTP) and the obsolete routing bit (RFC 1701) are refused.
func decodeGRE(b []byte) ([]byte, DropReason) {
	if len(b) < packet.GREMinimumSize {
		return nil, DropGRETruncated
	}
	gre := packet.GREHeader(b)
	flags := gre.FlagsVersion()
	if gre.Version() != 0 {
		return nil, DropGREVersion
	}
	if flags&packet.GREFlagRouting != 0 {
		return nil, DropGREFlags
	}
	hlen := gre.HeaderLength()
	if len(b) < hlen {
		return nil, DropGRETruncated
	}
	if flags&packet.GREFlagChecksum != 0 && checksum(b) != 0 {
		return nil, DropGREChecksum
	}
	var version uint8
	switch gre.Protocol() {
	case packet.EtherTypeIPv4:
		version = 4
	case packet.EtherTypeIPv6:
		version = 6
	default:
		return nil, DropGREProtocol
	}
	return innerIP(b[hlen:], version)
}

// decodeGUE returns the inner packet of a GUE datagram. Variant 1 (the
// inner IP header directly after UDP, RFC draft-ietf-intarea-gue §5, what
// xlb sends) is recognised by the first two bits 01, which are the top
// bits of an IPv4 (0100) or IPv6 (0110) version nibble. Variant 0 data
// messages (a 4-byte header plus Hlen words of options, Proto/ctype = 4 or
// 41) are accepted too, as Linux's fou/gue receive path does; control
// messages are dropped.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| 0 |C|   Hlen  |  Proto/ctype  |             Flags             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
func decodeGUE(b []byte) ([]byte, DropReason) {
	if len(b) < 1 {
		return nil, DropGUETruncated
	}
	switch b[0] >> 6 {
	case 1: // variant 1: IP header directly
		switch b[0] >> 4 {
		case 4:
			return innerIP(b, 4)
		case 6:
			return innerIP(b, 6)
		}
		return nil, DropGUEVersion
	case 0: // variant 0
		if len(b) < gueHeaderLen {
			return nil, DropGUETruncated
		}
		if b[0]&0x20 != 0 {
			return nil, DropGUEControl
		}
		hlen := gueHeaderLen + int(b[0]&0x1f)*4
		if len(b) < hlen {
			return nil, DropGUETruncated
		}
		switch b[1] {
		case protoIPIP:
			return innerIP(b[hlen:], 4)
		case protoIPv6:
			return innerIP(b[hlen:], 6)
		}
		return nil, DropGUEProtocol
	}
	return nil, DropGUEVersion
}

// innerIP checks that b starts with a well-formed IP header of the given
// version whose length fits in b, and returns b trimmed to that length
// (an encapsulator may pad; the TUN must get exactly one packet).
func innerIP(b []byte, version uint8) ([]byte, DropReason) {
	if len(b) < 1 {
		return nil, DropInnerTruncated
	}
	if b[0]>>4 != version {
		return nil, DropInnerVersion
	}
	switch version {
	case 4:
		if len(b) < packet.IPv4MinimumSize {
			return nil, DropInnerTruncated
		}
		ip := packet.IPv4Header(b)
		hlen, total := ip.HeaderLength(), int(ip.TotalLength())
		if hlen < packet.IPv4MinimumSize || total < hlen {
			return nil, DropInnerMalformed
		}
		if total > len(b) {
			return nil, DropInnerTruncated
		}
		return b[:total], DropNone
	case 6:
		if len(b) < packet.IPv6MinimumSize {
			return nil, DropInnerTruncated
		}
		ip := packet.IPv6Header(b)
		total := packet.IPv6MinimumSize + int(ip.PayloadLength())
		if total == packet.IPv6MinimumSize && ip.NextHeader() == packet.IPv6ExtHopByHop {
			// Payload length 0 with a hop-by-hop header is a jumbogram
			// (RFC 2675), which no link here can carry.
			return nil, DropInnerMalformed
		}
		if total > len(b) {
			return nil, DropInnerTruncated
		}
		return b[:total], DropNone
	}
	return nil, DropInnerVersion
}

// checksum returns the Internet checksum (RFC 1071) of b: 0 when b
// carries a correct checksum field.
func checksum(b []byte) uint16 { return ^packet.Checksum(b, 0) }
