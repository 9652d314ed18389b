package packet

import "encoding/binary"

// ESPHeader is a view of the clear-text start of an Encapsulating Security
// Payload header (RFC 4303 §2); everything after it is encrypted.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               Security Parameters Index (SPI)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Sequence Number                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Methods need ESPMinimumSize bytes.
type ESPHeader []byte

const (
	ESPSPIOffset   = 0
	ESPSeqOffset   = 4
	ESPMinimumSize = 8
)

// SPI returns the security parameters index.
func (b ESPHeader) SPI() uint32 { return binary.BigEndian.Uint32(b[ESPSPIOffset:]) }

// Sequence returns the sequence number.
func (b ESPHeader) Sequence() uint32 { return binary.BigEndian.Uint32(b[ESPSeqOffset:]) }
