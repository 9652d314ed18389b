package packet

import "encoding/binary"

// IPv4Header is a view of an IPv4 header (RFC 791 §3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Identification        |Flags|      Fragment Offset    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Source Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Options                    |    Padding    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Methods do not check the length: the caller makes sure the slice holds
// IPv4MinimumSize bytes (HeaderLength bytes for Options and
// CalculateChecksum).
type IPv4Header []byte

const (
	IPv4VersionIHLOffset  = 0
	IPv4TOSOffset         = 1
	IPv4TotalLenOffset    = 2
	IPv4IDOffset          = 4
	IPv4FlagsFragOffset   = 6
	IPv4TTLOffset         = 8
	IPv4ProtocolOffset    = 9
	IPv4ChecksumOffset    = 10
	IPv4SrcAddrOffset     = 12
	IPv4DstAddrOffset     = 16
	IPv4MinimumSize       = 20
	IPv4MaximumHeaderSize = 60
	IPv4AddressSize       = 4

	// Bits of the flags/fragment-offset word.
	IPv4FlagDF         uint16 = 0x4000
	IPv4FlagMF         uint16 = 0x2000
	IPv4FragOffsetMask uint16 = 0x1fff // in units of 8 bytes
)

// Version returns the IP version nibble.
func (b IPv4Header) Version() uint8 { return b[IPv4VersionIHLOffset] >> 4 }

// HeaderLength returns IHL*4, the header length in bytes.
func (b IPv4Header) HeaderLength() int { return int(b[IPv4VersionIHLOffset]&0x0f) * 4 }

// TOS returns the type of service byte (DSCP << 2 | ECN).
func (b IPv4Header) TOS() uint8 { return b[IPv4TOSOffset] }

// TotalLength returns the length of header and payload in bytes.
func (b IPv4Header) TotalLength() uint16 { return binary.BigEndian.Uint16(b[IPv4TotalLenOffset:]) }

// ID returns the identification field.
func (b IPv4Header) ID() uint16 { return binary.BigEndian.Uint16(b[IPv4IDOffset:]) }

// FlagsFragmentOffset returns the raw flags and fragment offset word.
func (b IPv4Header) FlagsFragmentOffset() uint16 {
	return binary.BigEndian.Uint16(b[IPv4FlagsFragOffset:])
}

// DF reports whether the don't-fragment bit is set.
func (b IPv4Header) DF() bool { return b.FlagsFragmentOffset()&IPv4FlagDF != 0 }

// MoreFragments reports whether the more-fragments bit is set.
func (b IPv4Header) MoreFragments() bool { return b.FlagsFragmentOffset()&IPv4FlagMF != 0 }

// FragmentOffset returns the fragment offset in bytes.
func (b IPv4Header) FragmentOffset() int { return int(b.FlagsFragmentOffset()&IPv4FragOffsetMask) * 8 }

// TTL returns the time to live.
func (b IPv4Header) TTL() uint8 { return b[IPv4TTLOffset] }

// Protocol returns the protocol of the payload.
func (b IPv4Header) Protocol() uint8 { return b[IPv4ProtocolOffset] }

// Checksum returns the header checksum field.
func (b IPv4Header) Checksum() uint16 { return binary.BigEndian.Uint16(b[IPv4ChecksumOffset:]) }

// SourceAddress returns the source address.
func (b IPv4Header) SourceAddress() [4]byte {
	return [4]byte(b[IPv4SrcAddrOffset : IPv4SrcAddrOffset+4])
}

// DestinationAddress returns the destination address.
func (b IPv4Header) DestinationAddress() [4]byte {
	return [4]byte(b[IPv4DstAddrOffset : IPv4DstAddrOffset+4])
}

// Options returns the options bytes (empty when IHL is 5).
func (b IPv4Header) Options() []byte { return b[IPv4MinimumSize:b.HeaderLength()] }

// CalculateChecksum returns the header checksum to store: the complement
// of the sum over the header with the checksum field counted as zero.
func (b IPv4Header) CalculateChecksum() uint16 {
	hl := b.HeaderLength()
	s := Checksum(b[:IPv4ChecksumOffset], 0)
	s = Checksum(b[IPv4ChecksumOffset+2:hl], s)
	return ^s
}

// IsChecksumValid reports whether the header (HeaderLength bytes) sums to
// 0xffff, checksum field included.
func (b IPv4Header) IsChecksumValid() bool { return Checksum(b[:b.HeaderLength()], 0) == 0xffff }

// SetVersionIHL sets version 4 and the header length in bytes (a multiple
// of 4 between 20 and 60).
func (b IPv4Header) SetVersionIHL(headerLen int) {
	b[IPv4VersionIHLOffset] = 4<<4 | uint8(headerLen/4)&0x0f
}

// SetTOS sets the type of service byte.
func (b IPv4Header) SetTOS(tos uint8) { b[IPv4TOSOffset] = tos }

// SetTotalLength sets the total length.
func (b IPv4Header) SetTotalLength(n uint16) { binary.BigEndian.PutUint16(b[IPv4TotalLenOffset:], n) }

// SetID sets the identification field.
func (b IPv4Header) SetID(id uint16) { binary.BigEndian.PutUint16(b[IPv4IDOffset:], id) }

// SetFlagsFragmentOffset sets the raw flags and fragment offset word.
func (b IPv4Header) SetFlagsFragmentOffset(v uint16) {
	binary.BigEndian.PutUint16(b[IPv4FlagsFragOffset:], v)
}

// SetTTL sets the time to live.
func (b IPv4Header) SetTTL(ttl uint8) { b[IPv4TTLOffset] = ttl }

// SetProtocol sets the payload protocol.
func (b IPv4Header) SetProtocol(p uint8) { b[IPv4ProtocolOffset] = p }

// SetChecksum sets the header checksum field.
func (b IPv4Header) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[IPv4ChecksumOffset:], c) }

// SetSourceAddress sets the source address.
func (b IPv4Header) SetSourceAddress(a [4]byte) { copy(b[IPv4SrcAddrOffset:], a[:]) }

// SetDestinationAddress sets the destination address.
func (b IPv4Header) SetDestinationAddress(a [4]byte) { copy(b[IPv4DstAddrOffset:], a[:]) }

// SetTTLWithChecksumUpdate sets the TTL and updates the header checksum
// incrementally (RFC 1624) instead of recomputing it.
func (b IPv4Header) SetTTLWithChecksumUpdate(ttl uint8) {
	old := binary.BigEndian.Uint16(b[IPv4TTLOffset:])
	b[IPv4TTLOffset] = ttl
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), old, binary.BigEndian.Uint16(b[IPv4TTLOffset:])))
}

// SetTotalLengthWithChecksumUpdate sets the total length and updates the
// header checksum incrementally (RFC 1624).
func (b IPv4Header) SetTotalLengthWithChecksumUpdate(n uint16) {
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), b.TotalLength(), n))
	b.SetTotalLength(n)
}
