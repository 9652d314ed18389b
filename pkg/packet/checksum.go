package packet

import "encoding/binary"

// Checksum adds b to the running ones' complement sum initial (RFC 1071)
// and returns the folded 16-bit sum, not yet complemented. An odd trailing
// byte is padded with zero. Chain calls to sum a pseudo-header and a
// payload; complement the final value to get the field to store.
func Checksum(b []byte, initial uint16) uint16 {
	sum := uint64(initial)
	// 8 bytes per step: the carries collect in the upper 32 bits of sum
	// and are folded once at the end.
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		sum += v >> 32
		sum += v & 0xffffffff
		b = b[8:]
	}
	if len(b) >= 4 {
		sum += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	return fold64(sum)
}

func fold64(sum uint64) uint16 {
	sum = (sum >> 32) + (sum & 0xffffffff)
	sum = (sum >> 32) + (sum & 0xffffffff)
	sum = (sum >> 16) + (sum & 0xffff)
	sum = (sum >> 16) + (sum & 0xffff)
	sum = (sum >> 16) + (sum & 0xffff)
	return uint16(sum)
}

// ChecksumCombine adds two folded ones' complement sums.
func ChecksumCombine(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	// One fold suffices: a carry out leaves at most 0xfffe below it.
	return uint16(s>>16 + s&0xffff)
}

// PseudoHeaderChecksum returns the folded sum of the TCP/UDP/ICMPv6
// pseudo-header (RFC 768, RFC 8200 §8.1) for addresses src and dst (4 or
// 16 bytes each), protocol proto and upper-layer length.
func PseudoHeaderChecksum(proto uint8, src, dst []byte, length uint32) uint16 {
	s := Checksum(src, 0)
	s = Checksum(dst, s)
	s = ChecksumCombine(s, uint16(proto))
	s = ChecksumCombine(s, uint16(length>>16))
	return ChecksumCombine(s, uint16(length))
}

// ChecksumUpdate16 returns the checksum field that results from changing one
// 16-bit word of the covered data from old to new, given the current field
// value check (RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m')). It never yields
// 0x0000 from a valid non-zero sum, unlike eqn. 2 (RFC 1624 §3).
func ChecksumUpdate16(check, old, new uint16) uint16 {
	return ^ChecksumCombine(ChecksumCombine(^check, ^old), new)
}

// ChecksumUpdate32 is ChecksumUpdate16 for a 32-bit word (an IPv4 address).
func ChecksumUpdate32(check uint16, old, new uint32) uint16 {
	c := ChecksumUpdate16(check, uint16(old>>16), uint16(new>>16))
	return ChecksumUpdate16(c, uint16(old), uint16(new))
}

// ChecksumUpdateBytes is ChecksumUpdate16 for a replaced field of even
// length (an IPv6 address): old and new must have the same even length.
func ChecksumUpdateBytes(check uint16, old, new []byte) uint16 {
	// ~HC + ~m + m' over all words: summing ~m word by word is the
	// complement of the sum of m.
	s := ChecksumCombine(^check, ^Checksum(old, 0))
	return ^Checksum(new, s)
}
