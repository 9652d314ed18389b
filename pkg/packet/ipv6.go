package packet

import "encoding/binary"

// IPv6Header is a view of the fixed IPv6 header (RFC 8200 §3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                         Source Address                        +
//	|                          (16 octets)                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                      Destination Address                      +
//	|                          (16 octets)                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Methods do not check the length: the caller makes sure the slice holds
// IPv6MinimumSize bytes.
type IPv6Header []byte

const (
	IPv6VersionTCFlowOffset = 0
	IPv6PayloadLenOffset    = 4
	IPv6NextHeaderOffset    = 6
	IPv6HopLimitOffset      = 7
	IPv6SrcAddrOffset       = 8
	IPv6DstAddrOffset       = 24
	IPv6MinimumSize         = 40
	IPv6AddressSize         = 16
)

// Version returns the IP version nibble.
func (b IPv6Header) Version() uint8 { return b[0] >> 4 }

// TrafficClass returns the traffic class (DSCP << 2 | ECN).
func (b IPv6Header) TrafficClass() uint8 { return b[0]<<4 | b[1]>>4 }

// FlowLabel returns the 20-bit flow label.
func (b IPv6Header) FlowLabel() uint32 { return binary.BigEndian.Uint32(b[0:]) & 0x000fffff }

// PayloadLength returns the length of everything after the fixed header.
func (b IPv6Header) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[IPv6PayloadLenOffset:]) }

// NextHeader returns the type of the header after the fixed header.
func (b IPv6Header) NextHeader() uint8 { return b[IPv6NextHeaderOffset] }

// HopLimit returns the hop limit.
func (b IPv6Header) HopLimit() uint8 { return b[IPv6HopLimitOffset] }

// SourceAddress returns the source address.
func (b IPv6Header) SourceAddress() [16]byte {
	return [16]byte(b[IPv6SrcAddrOffset : IPv6SrcAddrOffset+16])
}

// DestinationAddress returns the destination address.
func (b IPv6Header) DestinationAddress() [16]byte {
	return [16]byte(b[IPv6DstAddrOffset : IPv6DstAddrOffset+16])
}

// SetVersionTCFlow sets version 6, the traffic class and the flow label.
func (b IPv6Header) SetVersionTCFlow(tc uint8, flow uint32) {
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(tc)<<20|flow&0x000fffff)
}

// SetTrafficClass sets the traffic class, keeping version and flow label.
func (b IPv6Header) SetTrafficClass(tc uint8) {
	b[0] = b[0]&0xf0 | tc>>4
	b[1] = b[1]&0x0f | tc<<4
}

// SetPayloadLength sets the payload length.
func (b IPv6Header) SetPayloadLength(n uint16) {
	binary.BigEndian.PutUint16(b[IPv6PayloadLenOffset:], n)
}

// SetNextHeader sets the next header type.
func (b IPv6Header) SetNextHeader(nh uint8) { b[IPv6NextHeaderOffset] = nh }

// SetHopLimit sets the hop limit.
func (b IPv6Header) SetHopLimit(h uint8) { b[IPv6HopLimitOffset] = h }

// SetSourceAddress sets the source address.
func (b IPv6Header) SetSourceAddress(a [16]byte) { copy(b[IPv6SrcAddrOffset:], a[:]) }

// SetDestinationAddress sets the destination address.
func (b IPv6Header) SetDestinationAddress(a [16]byte) { copy(b[IPv6DstAddrOffset:], a[:]) }

// IPv6 extension header types (RFC 8200 §4, RFC 7045).
const (
	IPv6ExtHopByHop    uint8 = 0
	IPv6ExtRouting     uint8 = 43
	IPv6ExtFragment    uint8 = 44
	IPv6ExtAH          uint8 = 51 // RFC 4302: length in 4-octet units
	IPv6NoNextHeader   uint8 = 59
	IPv6ExtDestination uint8 = 60
	IPv6ExtMobility    uint8 = 135
	IPv6ExtHIP         uint8 = 139
	IPv6ExtShim6       uint8 = 140
)

// Bounds of the extension-header walk (see doc.go).
const (
	// MaxIPv6ExtHeaders is the most extension headers Parse walks before
	// the transport header; a longer chain is DropIPv6ExtChainTooLong.
	MaxIPv6ExtHeaders = 8
	// MaxIPv6ExtBytes is the most bytes of extension headers Parse walks:
	// the transport header must start within the first 40+256 bytes of the
	// IPv6 packet.
	MaxIPv6ExtBytes = 256
)

// IPv6ExtHeader is a view of an extension header in the common
// type-length format (hop-by-hop, routing, destination options, mobility,
// HIP, shim6; RFC 8200 §4.3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |  Hdr Ext Len  |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	.                   type-specific data                          .
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The Authentication Header (RFC 4302) shares the first two fields but
// counts its length in 4-octet units minus 2; Length handles both.
// Methods need IPv6ExtMinimumSize bytes.
type IPv6ExtHeader []byte

const (
	IPv6ExtNextHeaderOffset = 0
	IPv6ExtLenOffset        = 1
	IPv6ExtMinimumSize      = 8
)

// NextHeader returns the type of the following header.
func (b IPv6ExtHeader) NextHeader() uint8 { return b[IPv6ExtNextHeaderOffset] }

// Length returns the size of this header in bytes, given its own type
// (which is announced by the previous header, not by the header itself).
func (b IPv6ExtHeader) Length(typ uint8) int {
	if typ == IPv6ExtAH {
		return (int(b[IPv6ExtLenOffset]) + 2) * 4
	}
	return (int(b[IPv6ExtLenOffset]) + 1) * 8
}

// IPv6FragmentHeader is a view of the IPv6 fragment header (RFC 8200 §4.5):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |   Reserved    |      Fragment Offset    |Res|M|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Identification                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Methods need IPv6FragmentSize bytes.
type IPv6FragmentHeader []byte

const (
	IPv6FragNextHeaderOffset  = 0
	IPv6FragOffsetFlagsOffset = 2
	IPv6FragIDOffset          = 4
	IPv6FragmentSize          = 8
)

// NextHeader returns the type of the first header of the fragmentable
// part (the same in every fragment of a datagram).
func (b IPv6FragmentHeader) NextHeader() uint8 { return b[IPv6FragNextHeaderOffset] }

// FragmentOffset returns the fragment offset in bytes.
func (b IPv6FragmentHeader) FragmentOffset() int {
	return int(binary.BigEndian.Uint16(b[IPv6FragOffsetFlagsOffset:]) &^ 7)
}

// MoreFragments reports whether the M flag is set.
func (b IPv6FragmentHeader) MoreFragments() bool { return b[IPv6FragOffsetFlagsOffset+1]&1 != 0 }

// ID returns the fragment identification.
func (b IPv6FragmentHeader) ID() uint32 { return binary.BigEndian.Uint32(b[IPv6FragIDOffset:]) }
