package packet

import "encoding/binary"

// GREHeader is a view of the fixed part of a GRE header (RFC 2784, with the key
// and sequence bits of RFC 2890):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|C| |K|S|       Reserved0       | Ver |         Protocol Type         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      Checksum (optional)      |       Reserved1 (Optional)    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Key (optional)                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Sequence Number (optional)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Methods need GREMinimumSize bytes (HeaderLength bytes for Key).
type GREHeader []byte

const (
	GREFlagsVersionOffset = 0
	GREProtocolOffset     = 2
	GREMinimumSize        = 4

	GREFlagChecksum uint16 = 0x8000
	GREFlagRouting  uint16 = 0x4000 // RFC 1701 source routing, obsolete (RFC 2784 §2.1)
	GREFlagKey      uint16 = 0x2000
	GREFlagSequence uint16 = 0x1000
	GREVersionMask  uint16 = 0x0007
)

// FlagsVersion returns the raw flags and version word.
func (b GREHeader) FlagsVersion() uint16 { return binary.BigEndian.Uint16(b[GREFlagsVersionOffset:]) }

// Version returns the 3-bit version (0 for GRE, 1 for PPTP's enhanced GRE).
func (b GREHeader) Version() uint8 { return uint8(b.FlagsVersion() & GREVersionMask) }

// Protocol returns the EtherType of the payload.
func (b GREHeader) Protocol() uint16 { return binary.BigEndian.Uint16(b[GREProtocolOffset:]) }

// HeaderLength returns the header length in bytes implied by the C, K and
// S flags.
func (b GREHeader) HeaderLength() int {
	f := b.FlagsVersion()
	n := GREMinimumSize
	if f&GREFlagChecksum != 0 {
		n += 4
	}
	if f&GREFlagKey != 0 {
		n += 4
	}
	if f&GREFlagSequence != 0 {
		n += 4
	}
	return n
}

// Key returns the key and whether the K flag is set.
func (b GREHeader) Key() (uint32, bool) {
	f := b.FlagsVersion()
	if f&GREFlagKey == 0 {
		return 0, false
	}
	off := GREMinimumSize
	if f&GREFlagChecksum != 0 {
		off += 4
	}
	return binary.BigEndian.Uint32(b[off:]), true
}

// SetFlagsVersion sets the raw flags and version word.
func (b GREHeader) SetFlagsVersion(v uint16) {
	binary.BigEndian.PutUint16(b[GREFlagsVersionOffset:], v)
}

// SetProtocol sets the payload EtherType.
func (b GREHeader) SetProtocol(p uint16) { binary.BigEndian.PutUint16(b[GREProtocolOffset:], p) }
