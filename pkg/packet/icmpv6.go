package packet

import "encoding/binary"

// ICMPv6Header is a view of an ICMPv6 header (RFC 4443 §2.1). The second word is
// the MTU of packet-too-big, the pointer of parameter-problem, identifier
// and sequence of echo messages, unused in other errors.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        MTU / Pointer / Identifier and Sequence / unused       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   As much of the invoking packet as fits (errors only)        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Methods need ICMPv6MinimumSize bytes. (RFC 4443 allows 4-byte messages,
// but every message the parser reads, and every one in use, has 8.)
type ICMPv6Header []byte

const (
	ICMPv6TypeOffset     = 0
	ICMPv6CodeOffset     = 1
	ICMPv6ChecksumOffset = 2
	ICMPv6MTUOffset      = 4
	ICMPv6IDOffset       = 4
	ICMPv6SeqOffset      = 6
	ICMPv6MinimumSize    = 8
	// ICMPv6PayloadOffset is where an error's quoted packet starts.
	ICMPv6PayloadOffset = 8
)

// ICMPv6 types the parser knows.
const (
	ICMPv6DstUnreachable uint8 = 1
	ICMPv6PacketTooBig   uint8 = 2
	ICMPv6TimeExceeded   uint8 = 3
	ICMPv6ParamProblem   uint8 = 4
	ICMPv6EchoRequest    uint8 = 128
	ICMPv6EchoReply      uint8 = 129
)

// Type returns the message type.
func (b ICMPv6Header) Type() uint8 { return b[ICMPv6TypeOffset] }

// Code returns the message code.
func (b ICMPv6Header) Code() uint8 { return b[ICMPv6CodeOffset] }

// Checksum returns the checksum field.
func (b ICMPv6Header) Checksum() uint16 { return binary.BigEndian.Uint16(b[ICMPv6ChecksumOffset:]) }

// MTU returns the MTU of a packet-too-big message.
func (b ICMPv6Header) MTU() uint32 { return binary.BigEndian.Uint32(b[ICMPv6MTUOffset:]) }

// Ident returns the echo identifier.
func (b ICMPv6Header) Ident() uint16 { return binary.BigEndian.Uint16(b[ICMPv6IDOffset:]) }

// Sequence returns the echo sequence number.
func (b ICMPv6Header) Sequence() uint16 { return binary.BigEndian.Uint16(b[ICMPv6SeqOffset:]) }

// Payload returns what follows the 8-byte header.
func (b ICMPv6Header) Payload() []byte { return b[ICMPv6PayloadOffset:] }

// SetType sets the message type.
func (b ICMPv6Header) SetType(t uint8) { b[ICMPv6TypeOffset] = t }

// SetCode sets the message code.
func (b ICMPv6Header) SetCode(c uint8) { b[ICMPv6CodeOffset] = c }

// SetChecksum sets the checksum field.
func (b ICMPv6Header) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[ICMPv6ChecksumOffset:], c) }

// SetMTU sets the MTU of a packet-too-big message.
func (b ICMPv6Header) SetMTU(mtu uint32) { binary.BigEndian.PutUint32(b[ICMPv6MTUOffset:], mtu) }

// SetIdent sets the echo identifier.
func (b ICMPv6Header) SetIdent(id uint16) { binary.BigEndian.PutUint16(b[ICMPv6IDOffset:], id) }

// SetSequence sets the echo sequence number.
func (b ICMPv6Header) SetSequence(s uint16) { binary.BigEndian.PutUint16(b[ICMPv6SeqOffset:], s) }

// isICMPv6Error reports whether an ICMPv6 type quotes the packet that caused it.
func isICMPv6Error(t uint8) bool { return t >= ICMPv6DstUnreachable && t <= ICMPv6ParamProblem }
