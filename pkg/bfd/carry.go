package bfd

import (
	"net/netip"
	"time"
)

// Carried is one session's state handed to a successor process, so that
// the router never sees the session leave Up (doc.go "Hand-over"). It is
// part of the daemon's versioned state document: fields are only added.
type Carried struct {
	Peer        netip.Addr `json:"peer"`
	SourcePort  uint16     `json:"source_port"`
	State       State      `json:"state"`
	LocalDisc   uint32     `json:"local_disc"`
	RemoteDisc  uint32     `json:"remote_disc"`
	RemoteMult  uint8      `json:"remote_mult"`
	RemoteTxUS  uint32     `json:"remote_tx_us"` // the remote's DesiredMinTx
	RemoteRxUS  uint32     `json:"remote_rx_us"` // the remote's RequiredMinRx
	DesiredTxUS uint32     `json:"desired_tx_us"`
}

// carry is the session's state for a successor.
func (s *Session) carry() Carried {
	return Carried{State: s.state, LocalDisc: s.localDisc, RemoteDisc: s.remoteDisc, RemoteMult: s.remoteMult,
		RemoteTxUS: uint32(s.remoteTx / time.Microsecond), RemoteRxUS: uint32(s.remoteRx / time.Microsecond),
		DesiredTxUS: uint32(s.desiredTx / time.Microsecond)}
}

// ResumeGrace is how long a resumed session waits for its first packet
// before it may time out, instead of one detection time: until the
// predecessor process closes its receive socket, the kernel may hand it
// the router's packets (both hold port 3784), and a busy machine may take
// the predecessor a while to let go. A session that timed out meanwhile
// would tell the router Down. The router's own detection is unchanged:
// the session sends from the start.
const ResumeGrace = 3 * time.Second

// ResumeSession continues a session a predecessor process carried: same
// discriminators, same state, a packet due at once, and the detection time
// restarted at now, at least ResumeGrace until the first packet. A carried
// Up session stays Up; anything else starts over in Down with the carried
// local discriminator.
func ResumeSession(cfg Config, c Carried, now time.Time) *Session {
	s := NewSession(cfg, c.LocalDisc, now)
	if c.State != Up || c.RemoteDisc == 0 || c.RemoteMult == 0 {
		return s
	}
	s.state, s.remoteDisc, s.remoteMult = Up, c.RemoteDisc, c.RemoteMult
	s.remoteTx = time.Duration(c.RemoteTxUS) * time.Microsecond
	s.remoteRx = time.Duration(c.RemoteRxUS) * time.Microsecond
	s.desiredTx = time.Duration(c.DesiredTxUS) * time.Microsecond
	if s.desiredTx <= 0 {
		s.desiredTx = cfg.MinTx
	}
	s.txInterval = s.desiredTx
	s.setDesiredTx(cfg.MinTx) // a changed min_tx goes through a Poll
	s.deadline = now.Add(max(s.DetectionTime(), ResumeGrace))
	return s
}
