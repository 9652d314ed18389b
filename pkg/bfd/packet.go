package bfd

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// State is a session state (RFC 5880 §4.1, the Sta field).
type State uint8

// Session states, as on the wire.
const (
	AdminDown State = 0
	Down      State = 1
	Init      State = 2
	Up        State = 3
)

func (s State) String() string {
	switch s {
	case AdminDown:
		return "admin_down"
	case Down:
		return "down"
	case Init:
		return "init"
	case Up:
		return "up"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Diag is a diagnostic code (RFC 5880 §4.1): why the session last left Up.
type Diag uint8

// The diagnostic codes this package sets.
const (
	DiagNone             Diag = 0
	DiagDetectionExpired Diag = 1 // Control Detection Time Expired
	DiagNeighborDown     Diag = 3 // Neighbor Signaled Session Down
	DiagAdminDown        Diag = 7 // Administratively Down
)

// PacketLen is the length of a control packet without authentication.
const PacketLen = 24

// Packet is a BFD control packet (RFC 5880 §4.1). Intervals are in
// microseconds, as on the wire.
type Packet struct {
	Diag              Diag
	State             State
	Poll, Final       bool
	ControlIndep      bool // C: control plane independent
	Demand            bool // D
	DetectMult        uint8
	MyDisc, YourDisc  uint32
	DesiredMinTx      uint32
	RequiredMinRx     uint32
	RequiredMinEchoRx uint32
}

// Flag bits of the second byte.
const (
	flagPoll       = 0x20
	flagFinal      = 0x10
	flagCtrlIndep  = 0x08
	flagAuth       = 0x04
	flagDemand     = 0x02
	flagMultipoint = 0x01
)

// Append appends the packet's 24 bytes (version 1, no authentication) to b.
func (p *Packet) Append(b []byte) []byte {
	var flags byte
	for _, f := range []struct {
		on  bool
		bit byte
	}{{p.Poll, flagPoll}, {p.Final, flagFinal}, {p.ControlIndep, flagCtrlIndep}, {p.Demand, flagDemand}} {
		if f.on {
			flags |= f.bit
		}
	}
	b = append(b, 1<<5|byte(p.Diag)&0x1f, byte(p.State)<<6|flags, p.DetectMult, PacketLen)
	b = binary.BigEndian.AppendUint32(b, p.MyDisc)
	b = binary.BigEndian.AppendUint32(b, p.YourDisc)
	b = binary.BigEndian.AppendUint32(b, p.DesiredMinTx)
	b = binary.BigEndian.AppendUint32(b, p.RequiredMinRx)
	return binary.BigEndian.AppendUint32(b, p.RequiredMinEchoRx)
}

// Errors of Parse: the packet is discarded (RFC 5880 §6.8.6).
var (
	ErrShort      = errors.New("bfd: packet shorter than 24 bytes or than its length field")
	ErrVersion    = errors.New("bfd: version is not 1")
	ErrAuth       = errors.New("bfd: authentication present (not configured)")
	ErrMultipoint = errors.New("bfd: multipoint bit set")
	ErrDetectMult = errors.New("bfd: detect multiplier is 0")
	ErrMyDisc     = errors.New("bfd: my discriminator is 0")
	ErrYourDisc   = errors.New("bfd: your discriminator is 0 outside Down and AdminDown")
)

// Parse decodes and checks a control packet: the reception checks of RFC
// 5880 §6.8.6 that need no session. With no authentication configured a
// packet with the A bit is discarded.
func Parse(b []byte) (Packet, error) {
	if len(b) < PacketLen {
		return Packet{}, ErrShort
	}
	if b[0]>>5 != 1 {
		return Packet{}, ErrVersion
	}
	if int(b[3]) < PacketLen || int(b[3]) > len(b) {
		return Packet{}, ErrShort
	}
	flags := b[1] & 0x3f
	p := Packet{
		Diag:              Diag(b[0] & 0x1f),
		State:             State(b[1] >> 6),
		Poll:              flags&flagPoll != 0,
		Final:             flags&flagFinal != 0,
		ControlIndep:      flags&flagCtrlIndep != 0,
		Demand:            flags&flagDemand != 0,
		DetectMult:        b[2],
		MyDisc:            binary.BigEndian.Uint32(b[4:]),
		YourDisc:          binary.BigEndian.Uint32(b[8:]),
		DesiredMinTx:      binary.BigEndian.Uint32(b[12:]),
		RequiredMinRx:     binary.BigEndian.Uint32(b[16:]),
		RequiredMinEchoRx: binary.BigEndian.Uint32(b[20:]),
	}
	switch {
	case flags&flagAuth != 0:
		return Packet{}, ErrAuth
	case flags&flagMultipoint != 0:
		return Packet{}, ErrMultipoint
	case p.DetectMult == 0:
		return Packet{}, ErrDetectMult
	case p.MyDisc == 0:
		return Packet{}, ErrMyDisc
	case p.YourDisc == 0 && p.State != Down && p.State != AdminDown:
		return Packet{}, ErrYourDisc
	}
	return p, nil
}
