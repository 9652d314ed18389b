package bfd

import (
	"math/rand/v2"
	"time"
)

// Config is a session's timers.
type Config struct {
	MinTx      time.Duration // desired minimum transmit interval once Up
	MinRx      time.Duration // required minimum receive interval
	Multiplier uint8         // detect multiplier
}

// SlowTx is the transmit interval while the session is not Up (RFC 5880
// §6.8.3: at least one second).
const SlowTx = time.Second

// Session is the state machine of one BFD session (RFC 5880 §6.8,
// asynchronous mode, no Demand, no Echo, no authentication). It does no
// I/O and reads no clock: the caller passes the time and sends what it
// says. Not safe for concurrent use; one goroutine owns it (run.go).
type Session struct {
	cfg       Config
	localDisc uint32

	state      State
	diag       Diag
	remoteDisc uint32
	remoteMult uint8
	remoteTx   time.Duration // the remote's DesiredMinTx
	remoteRx   time.Duration // the remote's RequiredMinRx; 0: send nothing

	desiredTx  time.Duration // what we advertise: SlowTx until Up, then cfg.MinTx
	txInterval time.Duration // what we use: may lag desiredTx during a Poll
	polling    bool          // a Poll Sequence is running (RFC 5880 §6.5)

	nextTx   time.Time
	deadline time.Time // detection time runs out; zero while Down

	// jitter returns a factor in [0.75, 1.0] (RFC 5880 §6.8.7); tests
	// set it.
	jitter func() float64
}

// NewSession starts a session in Down with local discriminator disc
// (nonzero, unique per session of this system).
func NewSession(cfg Config, disc uint32, now time.Time) *Session {
	s := &Session{cfg: cfg, localDisc: disc, state: Down, remoteRx: time.Microsecond,
		desiredTx: SlowTx, txInterval: SlowTx, jitter: func() float64 { return 0.75 + rand.Float64()/4 }}
	s.nextTx = now
	return s
}

// State returns the session state.
func (s *Session) State() State { return s.state }

// Diag returns the local diagnostic: why the session last went down.
func (s *Session) Diag() Diag { return s.diag }

// LocalDisc returns the local discriminator.
func (s *Session) LocalDisc() uint32 { return s.localDisc }

// DetectionTime is the remote's detect multiplier times the agreed
// interval at which we receive (RFC 5880 §6.8.4).
func (s *Session) DetectionTime() time.Duration {
	return time.Duration(s.remoteMult) * max(s.cfg.MinRx, s.remoteTx)
}

// TxInterval is the agreed interval at which we send: the larger of what
// we use and what the remote requires.
func (s *Session) TxInterval() time.Duration { return max(s.txInterval, s.remoteRx) }

// Receive processes a packet Parse accepted (RFC 5880 §6.8.6) and reports
// whether a reply carrying Final must be sent at once (the remote polls).
// A packet for another session or received while AdminDown is ignored.
func (s *Session) Receive(p Packet, now time.Time) (final bool) {
	if p.YourDisc != 0 && p.YourDisc != s.localDisc || s.state == AdminDown {
		return false
	}
	s.remoteDisc = p.MyDisc
	s.remoteMult = p.DetectMult
	s.remoteTx = time.Duration(p.DesiredMinTx) * time.Microsecond
	s.remoteRx = time.Duration(p.RequiredMinRx) * time.Microsecond
	if p.Final && s.polling {
		s.polling = false
		s.txInterval = s.desiredTx // an increase applies once the remote knows
	}
	switch {
	case p.State == AdminDown:
		if s.state != Down {
			s.down(DiagNeighborDown)
		}
	case s.state == Down && p.State == Down:
		s.state = Init
	case s.state == Down && p.State == Init, s.state == Init && (p.State == Init || p.State == Up):
		s.up()
	case s.state == Up && p.State == Down:
		s.down(DiagNeighborDown)
	}
	if s.state == Init || s.state == Up {
		s.deadline = now.Add(s.DetectionTime())
	}
	if s.remoteRx > 0 && s.nextTx.Sub(now) > s.TxInterval() {
		s.nextTx = now // the remote wants packets faster than we planned
	}
	return p.Poll
}

func (s *Session) up() {
	s.state, s.diag = Up, DiagNone
	s.setDesiredTx(s.cfg.MinTx)
}

// down leaves Init or Up: the remote is forgotten (RFC 5880 §6.8.1) and
// we send slowly again.
func (s *Session) down(d Diag) {
	s.state, s.diag = Down, d
	s.remoteDisc, s.deadline = 0, time.Time{}
	s.setDesiredTx(SlowTx)
}

// setDesiredTx changes the advertised interval with a Poll Sequence; a
// decrease applies at once, an increase when the Final arrives (RFC 5880
// §6.8.3). Outside Up no poll is needed: the remote reads every packet.
func (s *Session) setDesiredTx(d time.Duration) {
	if d == s.desiredTx {
		return
	}
	s.desiredTx = d
	if s.state != Up {
		s.txInterval, s.polling = d, false
		return
	}
	s.polling = true
	if d < s.txInterval {
		s.txInterval = d
	}
}

// Tick runs the timers at now: it reports whether the detection time ran
// out (the session went Down) and whether a periodic packet is due.
func (s *Session) Tick(now time.Time) (expired, send bool) {
	if !s.deadline.IsZero() && !now.Before(s.deadline) {
		s.down(DiagDetectionExpired)
		expired = true
	}
	return expired, s.Transmit(now)
}

// Transmit reports whether a periodic packet is due at now, and if so
// plans the next one; it leaves the detection time alone (the server
// sends on time while it puts a detection off: Server.run).
func (s *Session) Transmit(now time.Time) bool {
	if s.remoteRx == 0 || now.Before(s.nextTx) {
		return false
	}
	f := s.jitter()
	if s.cfg.Multiplier == 1 {
		f = min(f, 0.9) // RFC 5880 §6.8.7: at most 90 % with multiplier 1
	}
	s.nextTx = now.Add(time.Duration(float64(s.TxInterval()) * f))
	return true
}

// Extend restarts the detection time at now, as a received packet would
// (Server.Hold).
func (s *Session) Extend(now time.Time) {
	if s.state == Init || s.state == Up {
		s.deadline = now.Add(s.DetectionTime())
	}
}

// Expired reports whether Tick at now would take the session down: no
// packet within the detection time.
func (s *Session) Expired(now time.Time) bool {
	return !s.deadline.IsZero() && !now.Before(s.deadline)
}

// Next is when Tick must run next.
func (s *Session) Next() time.Time {
	if !s.deadline.IsZero() && s.deadline.Before(s.nextTx) {
		return s.deadline
	}
	return s.nextTx
}

// Packet is the control packet to send now; final answers a Poll.
func (s *Session) Packet(final bool) Packet {
	return Packet{Diag: s.diag, State: s.state, Poll: s.polling && !final, Final: final, DetectMult: s.cfg.Multiplier,
		MyDisc: s.localDisc, YourDisc: s.remoteDisc,
		DesiredMinTx: uint32(s.desiredTx / time.Microsecond), RequiredMinRx: uint32(s.cfg.MinRx / time.Microsecond)}
}

// AdminDown takes the session administratively down (closing): the
// remote sees AdminDown and does not take it for a failure.
func (s *Session) AdminDown() {
	s.state, s.diag = AdminDown, DiagAdminDown
	s.deadline = time.Time{}
}
