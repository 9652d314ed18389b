package bfd

import (
	"testing"
	"time"
)

const ms = time.Millisecond

var cfg = Config{MinTx: 100 * ms, MinRx: 100 * ms, Multiplier: 3}

// remote is the router's packet in state st, addressed to our session
// (your discriminator yd), with 100 ms timers.
func remote(st State, yd uint32) Packet {
	return Packet{State: st, DetectMult: 3, MyDisc: 0xbeef, YourDisc: yd, DesiredMinTx: 100000, RequiredMinRx: 100000}
}

func newTestSession(t0 time.Time) *Session {
	s := NewSession(cfg, 42, t0)
	s.jitter = func() float64 { return 1 }
	return s
}

// TestSessionStates drives the state machine through RFC 5880 §6.8.6's
// transitions with a fake clock.
func TestSessionStates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		steps []Packet
		want  State
		diag  Diag
	}{
		{"down then remote down: init", []Packet{remote(Down, 0)}, Init, DiagNone},
		{"init then remote up: up", []Packet{remote(Down, 0), remote(Up, 42)}, Up, DiagNone},
		{"init then remote init: up", []Packet{remote(Down, 0), remote(Init, 42)}, Up, DiagNone},
		{"down then remote init: up", []Packet{remote(Init, 42)}, Up, DiagNone},
		{"down then remote up: stays down", []Packet{remote(Up, 42)}, Down, DiagNone},
		{"up then remote down: down, neighbor signaled", []Packet{remote(Init, 42), remote(Down, 42)}, Down, DiagNeighborDown},
		{"up then remote restarts (your discriminator 0, down): down", []Packet{remote(Init, 42), remote(Down, 0)}, Down, DiagNeighborDown},
		{"up then remote admin down: down, neighbor signaled", []Packet{remote(Init, 42), remote(AdminDown, 42)}, Down, DiagNeighborDown},
		{"down then remote admin down: stays down", []Packet{remote(AdminDown, 0)}, Down, DiagNone},
		{"packet for another session ignored", []Packet{remote(Init, 41)}, Down, DiagNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSession(t0)
			for i, p := range tc.steps {
				s.Receive(p, t0.Add(time.Duration(i)*10*ms))
			}
			if s.State() != tc.want || s.Diag() != tc.diag {
				t.Errorf("state %v diag %d, want %v diag %d", s.State(), s.Diag(), tc.want, tc.diag)
			}
		})
	}
}

// TestSessionDetection: an Up session without packets goes Down after the
// remote's multiplier × the agreed interval, not before; packets keep it
// Up.
func TestSessionDetection(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newTestSession(t0)
	s.Receive(remote(Init, 42), t0)
	if s.State() != Up || s.DetectionTime() != 300*ms {
		t.Fatalf("state %v detection %v, want up 300ms", s.State(), s.DetectionTime())
	}
	now := t0
	for range 10 { // a packet every 250 ms keeps it up
		now = now.Add(250 * ms)
		if exp, _ := s.Tick(now); exp {
			t.Fatalf("expired at %v with packets every 250 ms", now.Sub(t0))
		}
		s.Receive(remote(Up, 42), now)
	}
	if exp, _ := s.Tick(now.Add(299 * ms)); exp || s.State() != Up {
		t.Fatal("expired before 300 ms of silence")
	}
	if exp, _ := s.Tick(now.Add(300 * ms)); !exp || s.State() != Down || s.Diag() != DiagDetectionExpired {
		t.Fatalf("after 300 ms of silence: expired %v state %v diag %d", exp, s.State(), s.Diag())
	}
	if p := s.Packet(false); p.YourDisc != 0 || p.DesiredMinTx != uint32(SlowTx/time.Microsecond) || p.Diag != DiagDetectionExpired {
		t.Errorf("Down packet %+v: want your discriminator forgotten, 1 s desired tx, diag 1", p)
	}
	// The remote's slower desired tx lengthens the detection time.
	s2 := newTestSession(t0)
	slow := remote(Init, 42)
	slow.DesiredMinTx, slow.DetectMult = 500000, 4
	s2.Receive(slow, t0)
	if d := s2.DetectionTime(); d != 2*time.Second {
		t.Errorf("detection with remote 500 ms × 4: %v, want 2s", d)
	}
}

// TestSessionPollFinal: reaching Up lowers the advertised interval from 1 s
// to min_tx with a Poll Sequence that ends at the remote's Final; a
// received Poll is answered with a Final (and no Poll).
func TestSessionPollFinal(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newTestSession(t0)
	if p := s.Packet(false); p.State != Down || p.DesiredMinTx != 1000000 || p.Poll {
		t.Fatalf("initial packet %+v: want Down, 1 s, no poll", p)
	}
	s.Receive(remote(Init, 42), t0)
	p := s.Packet(false)
	if p.State != Up || p.DesiredMinTx != 100000 || !p.Poll {
		t.Fatalf("packet after Up %+v: want Up, 100 ms, Poll", p)
	}
	if s.TxInterval() != 100*ms {
		t.Errorf("tx interval %v: a decrease applies at once", s.TxInterval())
	}
	fin := remote(Up, 42)
	fin.Final = true
	s.Receive(fin, t0.Add(10*ms))
	if p := s.Packet(false); p.Poll {
		t.Errorf("still polling after the Final: %+v", p)
	}
	poll := remote(Up, 42)
	poll.Poll = true
	if !s.Receive(poll, t0.Add(20*ms)) {
		t.Fatal("a received Poll must be answered at once")
	}
	if p := s.Packet(true); !p.Final || p.Poll {
		t.Errorf("answer %+v: want Final, no Poll", p)
	}
	// Down again: back to 1 s without a poll.
	s.Receive(remote(Down, 42), t0.Add(30*ms))
	if p := s.Packet(false); p.Poll || p.DesiredMinTx != 1000000 || s.TxInterval() != time.Second {
		t.Errorf("after Down %+v tx %v: want 1 s, no poll", p, s.TxInterval())
	}
}

// TestSessionTransmit: packets go out at the agreed interval (the larger
// of ours and the remote's required min rx), jittered to 75-100 %, past
// the detection time too (Transmit does not judge it), and not at all
// when the remote requires 0.
func TestSessionTransmit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newTestSession(t0)
	if _, send := s.Tick(t0); !send {
		t.Fatal("no first packet at start")
	}
	if n := s.Next(); n != t0.Add(time.Second) {
		t.Errorf("next packet while Down at +%v, want +1s", n.Sub(t0))
	}
	s.Receive(remote(Init, 42), t0)
	slowRx := remote(Up, 42)
	slowRx.RequiredMinRx = 400000
	s.Receive(slowRx, t0)
	if s.TxInterval() != 400*ms {
		t.Errorf("tx interval %v, want the remote's 400ms", s.TxInterval())
	}
	s.jitter = func() float64 { return 0.75 }
	if _, send := s.Tick(t0.Add(200 * ms)); !send {
		t.Fatal("no packet due")
	}
	if n := s.nextTx; n != t0.Add(500*ms) {
		t.Errorf("next packet at +%v, want +500ms (200ms + 400ms × 0.75)", n.Sub(t0))
	}
	// Transmit sends on time past the detection time (1.2 s after the
	// last packet) and leaves the verdict to Tick.
	late := t0.Add(1500 * ms)
	if !s.Expired(late) || !s.Transmit(late) || s.State() != Up {
		t.Fatalf("Transmit past the detection time: expired %v, state %v; want a packet, still Up", s.Expired(late), s.State())
	}
	if expired, _ := s.Tick(late); !expired || s.State() != Down {
		t.Fatalf("Tick past the detection time: expired %v, state %v; want Down", expired, s.State())
	}
	quiet := remote(Up, 42)
	quiet.RequiredMinRx = 0
	s.Receive(quiet, t0.Add(1600*ms))
	if _, send := s.Tick(t0.Add(5 * time.Second)); send {
		t.Error("sent although the remote requires no packets")
	}
}

// TestSessionAdminDown: a closing session sends AdminDown and ignores
// what it receives.
func TestSessionAdminDown(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newTestSession(t0)
	s.Receive(remote(Init, 42), t0)
	s.AdminDown()
	if p := s.Packet(false); p.State != AdminDown || p.Diag != DiagAdminDown {
		t.Errorf("packet %+v: want AdminDown, diag 7", p)
	}
	s.Receive(remote(Down, 0), t0)
	if exp, _ := s.Tick(t0.Add(time.Hour)); exp || s.State() != AdminDown {
		t.Errorf("admin down session changed: %v", s.State())
	}
}
