package packet

import "encoding/binary"

// UDPHeader is a view of a UDP header (RFC 768):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Length             |           Checksum            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Methods need UDPSize bytes.
type UDPHeader []byte

const (
	UDPSrcPortOffset  = 0
	UDPDstPortOffset  = 2
	UDPLengthOffset   = 4
	UDPChecksumOffset = 6
	UDPSize           = 8
)

// SourcePort returns the source port.
func (b UDPHeader) SourcePort() uint16 { return binary.BigEndian.Uint16(b[UDPSrcPortOffset:]) }

// DestinationPort returns the destination port.
func (b UDPHeader) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[UDPDstPortOffset:]) }

// Length returns the length of header and payload in bytes.
func (b UDPHeader) Length() uint16 { return binary.BigEndian.Uint16(b[UDPLengthOffset:]) }

// Checksum returns the checksum field (0 in IPv4 means "none").
func (b UDPHeader) Checksum() uint16 { return binary.BigEndian.Uint16(b[UDPChecksumOffset:]) }

// SetSourcePort sets the source port.
func (b UDPHeader) SetSourcePort(p uint16) { binary.BigEndian.PutUint16(b[UDPSrcPortOffset:], p) }

// SetDestinationPort sets the destination port.
func (b UDPHeader) SetDestinationPort(p uint16) { binary.BigEndian.PutUint16(b[UDPDstPortOffset:], p) }

// SetLength sets the length field.
func (b UDPHeader) SetLength(n uint16) { binary.BigEndian.PutUint16(b[UDPLengthOffset:], n) }

// SetChecksum sets the checksum field.
func (b UDPHeader) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[UDPChecksumOffset:], c) }
