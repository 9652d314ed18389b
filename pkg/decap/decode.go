package decap

import (
	"encoding/binary"
	"math/bits"
)

// IP protocol numbers of the outer headers decap receives.
const (
	protoIPIP = 4  // IPv4 inside (RFC 2003; also 4in6, RFC 2473)
	protoIPv6 = 41 // IPv6 inside (6in4, RFC 4213; 6in6, RFC 2473)
	protoGRE  = 47 // GRE (RFC 2784, RFC 2890)
)

// GRE protocol types (EtherType values) decap accepts.
const (
	greTypeIPv4 = 0x0800
	greTypeIPv6 = 0x86DD
)

// GRE flag bits in the first 16 bits of the header (RFC 2784 §2.1, RFC 2890 §2).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|C|R|K|S|s|Recur|  Flags  | Ver |         Protocol Type         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      Checksum (optional)      |       Reserved1 (Optional)    |
//	|                         Key (optional)                        |
//	|                 Sequence Number (Optional)                    |
const (
	greFlagChecksum = 0x8000
	greFlagRouting  = 0x4000 // RFC 1701 source routing: obsolete, refused
	greFlagKey      = 0x2000
	greFlagSeq      = 0x1000
	greVersionMask  = 0x0007
	greHeaderLen    = 4
)

// Minimum header lengths.
const (
	ipv4MinHeaderLen = 20
	ipv6HeaderLen    = 40
	gueHeaderLen     = 4 // GUE variant 0 base header
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
	if len(b) < ipv4MinHeaderLen {
		return nil, DropOuterTruncated
	}
	if b[0]>>4 != 4 {
		return nil, DropOuterMalformed
	}
	hlen := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:4]))
	// The kernel already validated the header; these checks keep a bug or
	// a future kernel from turning into an out-of-range slice.
	if hlen < ipv4MinHeaderLen || len(b) < hlen {
		return nil, DropOuterMalformed
	}
	if total >= hlen && total < len(b) {
		b = b[:total]
	}
	payload := b[hlen:]
	switch b[9] {
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
// key and sequence words the flags announce), verifies the checksum when
// present and returns the inner IPv4 or IPv6 packet.
func decodeGRE(b []byte) ([]byte, DropReason) {
	if len(b) < greHeaderLen {
		return nil, DropGRETruncated
	}
	flags := binary.BigEndian.Uint16(b[0:2])
	if flags&greVersionMask != 0 {
		return nil, DropGREVersion
	}
	if flags&greFlagRouting != 0 {
		return nil, DropGREFlags
	}
	hlen := greHeaderLen
	if flags&greFlagChecksum != 0 {
		hlen += 4
	}
	if flags&greFlagKey != 0 {
		hlen += 4
	}
	if flags&greFlagSeq != 0 {
		hlen += 4
	}
	if len(b) < hlen {
		return nil, DropGRETruncated
	}
	if flags&greFlagChecksum != 0 && checksum(b) != 0 {
		return nil, DropGREChecksum
	}
	var version uint8
	switch binary.BigEndian.Uint16(b[2:4]) {
	case greTypeIPv4:
		version = 4
	case greTypeIPv6:
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
		if len(b) < ipv4MinHeaderLen {
			return nil, DropInnerTruncated
		}
		hlen := int(b[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(b[2:4]))
		if hlen < ipv4MinHeaderLen || total < hlen {
			return nil, DropInnerMalformed
		}
		if total > len(b) {
			return nil, DropInnerTruncated
		}
		return b[:total], DropNone
	case 6:
		if len(b) < ipv6HeaderLen {
			return nil, DropInnerTruncated
		}
		total := ipv6HeaderLen + int(binary.BigEndian.Uint16(b[4:6]))
		if total == ipv6HeaderLen && b[6] == 0 {
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

// checksum returns the Internet checksum (RFC 1071) of b; it is 0 when b
// carries a correct checksum field. It adds 64-bit big-endian words with
// carry (one's-complement addition is the same at any word size, RFC 1071
// §2(B)), 32 bytes per iteration, and folds to 16 bits at the end.
func checksum(b []byte) uint16 {
	var sum, carry uint64
	for len(b) >= 32 {
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b[0:8]), carry)
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b[8:16]), carry)
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b[16:24]), carry)
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b[24:32]), carry)
		b = b[32:]
	}
	for len(b) >= 8 {
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b[0:8]), carry)
		b = b[8:]
	}
	var tail uint64
	if len(b) >= 4 {
		tail = uint64(binary.BigEndian.Uint32(b)) << 32
		b = b[4:]
	}
	if len(b) >= 2 {
		tail |= uint64(binary.BigEndian.Uint16(b)) << 16
		b = b[2:]
	}
	if len(b) == 1 {
		tail |= uint64(b[0]) << 8
	}
	sum, carry = bits.Add64(sum, tail, carry)
	sum, carry = bits.Add64(sum, 0, carry)
	sum += carry // end-around carry: when the add above carried out, sum is 0
	// Fold 64 → 32 → 16 bits with end-around carry.
	sum = sum&0xffffffff + sum>>32
	sum = sum&0xffffffff + sum>>32
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	return ^uint16(sum)
}
