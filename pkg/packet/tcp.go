package packet

import "encoding/binary"

// TCPHeader is a view of a TCP header (RFC 9293 §3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Sequence Number                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Acknowledgment Number                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Data |       |C|E|U|A|P|R|S|F|                               |
//	| Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
//	|       |       |R|E|G|K|H|T|N|N|                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Checksum            |         Urgent Pointer        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Methods need TCPMinimumSize bytes.
type TCPHeader []byte

const (
	TCPSrcPortOffset    = 0
	TCPDstPortOffset    = 2
	TCPSeqOffset        = 4
	TCPAckOffset        = 8
	TCPDataOffsetOffset = 12
	TCPFlagsOffset      = 13
	TCPWindowOffset     = 14
	TCPChecksumOffset   = 16
	TCPUrgentOffset     = 18
	TCPMinimumSize      = 20
)

// SourcePort returns the source port.
func (b TCPHeader) SourcePort() uint16 { return binary.BigEndian.Uint16(b[TCPSrcPortOffset:]) }

// DestinationPort returns the destination port.
func (b TCPHeader) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[TCPDstPortOffset:]) }

// Sequence returns the sequence number.
func (b TCPHeader) Sequence() uint32 { return binary.BigEndian.Uint32(b[TCPSeqOffset:]) }

// Ack returns the acknowledgment number.
func (b TCPHeader) Ack() uint32 { return binary.BigEndian.Uint32(b[TCPAckOffset:]) }

// DataOffset returns the header length in bytes (data offset * 4).
func (b TCPHeader) DataOffset() int { return int(b[TCPDataOffsetOffset]>>4) * 4 }

// Flags returns the flag byte (TCPFlag* bits).
func (b TCPHeader) Flags() uint8 { return b[TCPFlagsOffset] }

// Window returns the window size.
func (b TCPHeader) Window() uint16 { return binary.BigEndian.Uint16(b[TCPWindowOffset:]) }

// Checksum returns the checksum field.
func (b TCPHeader) Checksum() uint16 { return binary.BigEndian.Uint16(b[TCPChecksumOffset:]) }

// SetSourcePort sets the source port.
func (b TCPHeader) SetSourcePort(p uint16) { binary.BigEndian.PutUint16(b[TCPSrcPortOffset:], p) }

// SetDestinationPort sets the destination port.
func (b TCPHeader) SetDestinationPort(p uint16) { binary.BigEndian.PutUint16(b[TCPDstPortOffset:], p) }

// SetChecksum sets the checksum field.
func (b TCPHeader) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[TCPChecksumOffset:], c) }

// IsValidTCPFlags reports whether flags is a combination a TCP endpoint may
// send: not SYN with FIN or RST, and at least one of FIN, SYN, RST, PSH,
// ACK, URG (a "null" segment has none).
func IsValidTCPFlags(flags uint8) bool {
	const known = TCPFlagFIN | TCPFlagSYN | TCPFlagRST | TCPFlagPSH | TCPFlagACK | TCPFlagURG
	if flags&known == 0 {
		return false
	}
	if flags&TCPFlagSYN != 0 && flags&(TCPFlagFIN|TCPFlagRST) != 0 {
		return false
	}
	return true
}
