package bfd

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"
)

// TestServerHandOver: a session Up with a fake router on loopback is
// exported, resumed by a second server sharing the receive port, and the
// first one detaches: the router sees only Up packets with the carried
// discriminators from the same source port (no AdminDown, no Down), and
// the resumed session stays Up on the router's answers.
func TestServerHandOver(t *testing.T) {
	r := newFakeRouter(t)
	// Packets every 20 ms, but a detection time of 0.6 s: a loaded
	// machine must not time the session out.
	cfg := Config{MinTx: 20 * time.Millisecond, MinRx: 200 * time.Millisecond, Multiplier: 3}
	lo := netip.MustParseAddr("127.0.0.1")
	a := NewServer(slog.New(slog.DiscardHandler), nil)
	a.listenPort, a.peerPort = freeUDPPort(t), r.port()
	defer a.Close()
	if err := a.Add(lo, cfg); err != nil {
		t.Fatal(err)
	}
	answer, first, from := bringUp(t, a, r, lo)
	const routerDisc = fakeRouterDisc
	answer(Up)
	time.Sleep(30 * time.Millisecond)
	cs := a.Export()
	want := Carried{Peer: lo, SourcePort: from.Port(), State: Up, LocalDisc: first.MyDisc, RemoteDisc: routerDisc, RemoteMult: 3, RemoteTxUS: 20000, RemoteRxUS: 20000, DesiredTxUS: 20000}
	if len(cs) != 1 || cs[0] != want {
		t.Fatalf("exported %+v, want [%+v]", cs, want)
	}

	events := make(chan Event, 16)
	b := NewServer(slog.New(slog.DiscardHandler), func(e Event) { events <- e })
	b.listenPort, b.peerPort = a.listenPort, r.port()
	defer b.Close()
	b.Resume(cs)
	if err := b.Add(lo, cfg); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.State(lo); st != Up {
		t.Fatalf("resumed session is %v, want Up", st)
	}
	a.Detach()
	// The router keeps answering; everything it receives says Up with
	// the carried discriminators, from the carried port.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				answer(Up)
			}
		}
	}()
	for range 40 { // ~0.6 s at 15-20 ms
		p, ttl, src := r.read()
		if p.State != Up || p.MyDisc != first.MyDisc || p.YourDisc != routerDisc || ttl != 255 || src.Port() != from.Port() {
			t.Fatalf("after the hand-over the router got %+v (TTL %d) from %v; want Up, discriminators %#x/%#x, port %d", p, ttl, src, first.MyDisc, routerDisc, from.Port())
		}
	}
	select {
	case e := <-events:
		t.Errorf("resumed session changed state: %+v", e)
	default:
	}
	if st, _ := b.State(lo); st != Up {
		t.Errorf("resumed session is %v after 0.6 s of answers, want Up (dropped %d)", st, b.Dropped.Load())
	}
}

// TestResumeSessionNotUp: a session carried while not Up starts over in
// Down with the carried local discriminator.
func TestResumeSessionNotUp(t *testing.T) {
	cfg := Config{MinTx: 100 * time.Millisecond, MinRx: 100 * time.Millisecond, Multiplier: 3}
	for _, st := range []State{Down, Init, AdminDown} {
		s := ResumeSession(cfg, Carried{State: st, LocalDisc: 7, RemoteDisc: 9, RemoteMult: 3}, time.Now())
		if s.State() != Down || s.LocalDisc() != 7 || s.Packet(false).YourDisc != 0 {
			t.Errorf("carried %v: resumed %v, packet %+v; want Down, local 7, your 0", st, s.State(), s.Packet(false))
		}
	}
}

// TestResumeGrace: a resumed Up session does not time out before its
// first packet within ResumeGrace (the predecessor's socket may still get
// the router's packets), does after it, and once a packet arrives the
// detection time is the usual one.
func TestResumeGrace(t *testing.T) {
	cfg := Config{MinTx: 100 * time.Millisecond, MinRx: 100 * time.Millisecond, Multiplier: 3}
	c := Carried{State: Up, LocalDisc: 7, RemoteDisc: 9, RemoteMult: 3, RemoteTxUS: 100000, RemoteRxUS: 100000, DesiredTxUS: 100000}
	t0 := time.Now()
	s := ResumeSession(cfg, c, t0)
	if detect := s.DetectionTime(); detect != 300*time.Millisecond {
		t.Fatalf("detection time %v, want 300ms", detect)
	}
	if s.Expired(t0.Add(time.Second)) || s.Expired(t0.Add(ResumeGrace-time.Millisecond)) {
		t.Fatal("a resumed session timed out before ResumeGrace without a packet")
	}
	if !s.Expired(t0.Add(ResumeGrace)) {
		t.Fatal("a resumed session without a packet still Up after ResumeGrace")
	}
	t1 := t0.Add(time.Second)
	s.Receive(Packet{State: Up, DetectMult: 3, MyDisc: 9, YourDisc: 7, DesiredMinTx: 100000, RequiredMinRx: 100000}, t1)
	if s.Expired(t1.Add(299*time.Millisecond)) || !s.Expired(t1.Add(300*time.Millisecond)) {
		t.Errorf("after a packet the detection time is not 300 ms")
	}
	if s.State() != Up {
		t.Errorf("state %v, want Up", s.State())
	}
}
