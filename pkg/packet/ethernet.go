package packet

import "encoding/binary"

// EthernetHeader is a view of an Ethernet II header (IEEE 802.3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Destination MAC (6 octets)                    |
//	+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|                   Source MAC (6 octets)                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           EtherType           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Like every view in this package, its methods do not check the length:
// the caller makes sure the slice holds EthernetMinimumSize bytes.
type EthernetHeader []byte

const (
	EthDstOffset        = 0
	EthSrcOffset        = 6
	EthTypeOffset       = 12
	EthernetMinimumSize = 14
)

// EtherType values the parser knows.
const (
	EtherTypeIPv4  uint16 = 0x0800
	EtherTypeARP   uint16 = 0x0806
	EtherTypeVLAN  uint16 = 0x8100 // IEEE 802.1Q C-tag
	EtherTypeIPv6  uint16 = 0x86dd
	EtherTypeQinQ  uint16 = 0x88a8 // IEEE 802.1ad S-tag
	EtherTypeQinQ1 uint16 = 0x9100 // pre-standard QinQ tag
	EtherTypeLLDP  uint16 = 0x88cc
)

// Destination returns the destination MAC address.
func (b EthernetHeader) Destination() [6]byte { return [6]byte(b[EthDstOffset : EthDstOffset+6]) }

// Source returns the source MAC address.
func (b EthernetHeader) Source() [6]byte { return [6]byte(b[EthSrcOffset : EthSrcOffset+6]) }

// Type returns the EtherType (or the TPID 0x8100 of a VLAN tag).
func (b EthernetHeader) Type() uint16 { return binary.BigEndian.Uint16(b[EthTypeOffset:]) }

// SetDestination sets the destination MAC address.
func (b EthernetHeader) SetDestination(mac [6]byte) { copy(b[EthDstOffset:], mac[:]) }

// SetSource sets the source MAC address.
func (b EthernetHeader) SetSource(mac [6]byte) { copy(b[EthSrcOffset:], mac[:]) }

// SetType sets the EtherType.
func (b EthernetHeader) SetType(t uint16) { binary.BigEndian.PutUint16(b[EthTypeOffset:], t) }

// VLANTag is a view of the 4 bytes that follow an 802.1Q TPID (0x8100): the
// tag control information and the encapsulated EtherType.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| PCP |D|        VLAN ID        |           EtherType           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type VLANTag []byte

const (
	VLANTCIOffset  = 0
	VLANTypeOffset = 2
	VLANSize       = 4
)

// TCI returns the tag control information (PCP, DEI, VLAN ID).
func (b VLANTag) TCI() uint16 { return binary.BigEndian.Uint16(b[VLANTCIOffset:]) }

// ID returns the 12-bit VLAN identifier.
func (b VLANTag) ID() uint16 { return b.TCI() & 0x0fff }

// Type returns the encapsulated EtherType.
func (b VLANTag) Type() uint16 { return binary.BigEndian.Uint16(b[VLANTypeOffset:]) }

// SetTCI sets the tag control information.
func (b VLANTag) SetTCI(tci uint16) { binary.BigEndian.PutUint16(b[VLANTCIOffset:], tci) }

// SetType sets the encapsulated EtherType.
func (b VLANTag) SetType(t uint16) { binary.BigEndian.PutUint16(b[VLANTypeOffset:], t) }
