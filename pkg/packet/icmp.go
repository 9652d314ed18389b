package packet

import "encoding/binary"

// ICMPv4Header is a view of an ICMP header (RFC 792). The second word depends on
// the type: identifier and sequence of echo messages, the next-hop MTU of
// fragmentation-needed (RFC 1191), unused in other errors.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Identifier / unused       |  Sequence / Next-Hop MTU      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Internet Header + 64 bits of Original Data (errors only)    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Methods need ICMPv4MinimumSize bytes.
type ICMPv4Header []byte

const (
	ICMPv4TypeOffset     = 0
	ICMPv4CodeOffset     = 1
	ICMPv4ChecksumOffset = 2
	ICMPv4IDOffset       = 4
	ICMPv4SeqOffset      = 6
	ICMPv4MTUOffset      = 6
	ICMPv4MinimumSize    = 8
	// ICMPv4PayloadOffset is where an error's quoted packet starts.
	ICMPv4PayloadOffset = 8
)

// ICMPv4 types and codes the parser knows.
const (
	ICMPv4EchoReply      uint8 = 0
	ICMPv4DstUnreachable uint8 = 3
	ICMPv4Echo           uint8 = 8
	ICMPv4TimeExceeded   uint8 = 11
	ICMPv4ParamProblem   uint8 = 12

	ICMPv4CodeFragNeeded uint8 = 4 // with ICMPv4DstUnreachable
)

// Type returns the message type.
func (b ICMPv4Header) Type() uint8 { return b[ICMPv4TypeOffset] }

// Code returns the message code.
func (b ICMPv4Header) Code() uint8 { return b[ICMPv4CodeOffset] }

// Checksum returns the checksum field.
func (b ICMPv4Header) Checksum() uint16 { return binary.BigEndian.Uint16(b[ICMPv4ChecksumOffset:]) }

// Ident returns the echo identifier.
func (b ICMPv4Header) Ident() uint16 { return binary.BigEndian.Uint16(b[ICMPv4IDOffset:]) }

// Sequence returns the echo sequence number.
func (b ICMPv4Header) Sequence() uint16 { return binary.BigEndian.Uint16(b[ICMPv4SeqOffset:]) }

// MTU returns the next-hop MTU of a fragmentation-needed message.
func (b ICMPv4Header) MTU() uint16 { return binary.BigEndian.Uint16(b[ICMPv4MTUOffset:]) }

// Payload returns what follows the 8-byte header.
func (b ICMPv4Header) Payload() []byte { return b[ICMPv4PayloadOffset:] }

// SetType sets the message type.
func (b ICMPv4Header) SetType(t uint8) { b[ICMPv4TypeOffset] = t }

// SetCode sets the message code.
func (b ICMPv4Header) SetCode(c uint8) { b[ICMPv4CodeOffset] = c }

// SetChecksum sets the checksum field.
func (b ICMPv4Header) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[ICMPv4ChecksumOffset:], c) }

// SetIdent sets the echo identifier.
func (b ICMPv4Header) SetIdent(id uint16) { binary.BigEndian.PutUint16(b[ICMPv4IDOffset:], id) }

// SetSequence sets the echo sequence number.
func (b ICMPv4Header) SetSequence(s uint16) { binary.BigEndian.PutUint16(b[ICMPv4SeqOffset:], s) }

// SetMTU sets the next-hop MTU (and clears the unused word before it).
func (b ICMPv4Header) SetMTU(mtu uint16) {
	binary.BigEndian.PutUint16(b[ICMPv4IDOffset:], 0)
	binary.BigEndian.PutUint16(b[ICMPv4MTUOffset:], mtu)
}

// isICMPv4Error reports whether an ICMP type quotes the packet that caused it.
func isICMPv4Error(t uint8) bool {
	return t == ICMPv4DstUnreachable || t == ICMPv4TimeExceeded || t == ICMPv4ParamProblem
}
