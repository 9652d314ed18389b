package bfd

import (
	"log/slog"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// fakeRouter is the other end of a session on loopback: a UDP socket that
// reports the TTL of what it receives and sends with a TTL of its choice.
type fakeRouter struct {
	t    *testing.T
	conn *net.UDPConn
}

func newFakeRouter(t *testing.T) *fakeRouter {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error { return setSockopt(c, true, true) }}
	pc, err := lc.ListenPacket(t.Context(), "udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return &fakeRouter{t: t, conn: pc.(*net.UDPConn)}
}

// serverWithRouter is a Server on loopback with a session to a fake
// router, configured with cfg, its events in a channel; closed when the
// test ends.
func serverWithRouter(t *testing.T, cfg Config) (s *Server, r *fakeRouter, lo netip.Addr, events chan Event) {
	t.Helper()
	r = newFakeRouter(t)
	events = make(chan Event, 64)
	s = NewServer(slog.New(slog.DiscardHandler), func(e Event) { events <- e })
	s.listenPort, s.peerPort = freeUDPPort(t), r.port()
	t.Cleanup(func() { s.Close() })
	lo = netip.MustParseAddr("127.0.0.1")
	if err := s.Add(lo, cfg); err != nil {
		t.Fatal(err)
	}
	return s, r, lo, events
}

func (r *fakeRouter) port() int { return r.conn.LocalAddr().(*net.UDPAddr).Port }

// read returns the next packet, its TTL and its source.
func (r *fakeRouter) read() (Packet, int, netip.AddrPort) {
	r.t.Helper()
	p, ttl, from, _ := r.readAt()
	return p, ttl, from
}

// readAt is read, with when the kernel received the packet.
func (r *fakeRouter) readAt() (Packet, int, netip.AddrPort, time.Time) {
	r.t.Helper()
	buf, oob := make([]byte, 64), make([]byte, 128)
	r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, oobn, _, from, err := r.conn.ReadMsgUDPAddrPort(buf, oob)
	if err != nil {
		r.t.Fatal(err)
	}
	p, err := Parse(buf[:n])
	if err != nil {
		r.t.Fatal(err)
	}
	ttl, _ := receivedTTL(oob[:oobn])
	at, ok := receivedAt(oob[:oobn])
	if !ok {
		r.t.Fatal("no receive timestamp")
	}
	return p, ttl, from, at
}

// drain discards the packets waiting in the router's socket.
func (r *fakeRouter) drain() {
	buf := make([]byte, 64)
	r.conn.SetReadDeadline(time.Now())
	for {
		if _, err := r.conn.Read(buf); err != nil {
			return
		}
	}
}

// send sends p to the server's receive port from a socket with TTL ttl.
func (r *fakeRouter) send(p Packet, ttl, port int) {
	r.t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL, ttl) })
		return serr
	}}
	c, err := d.Dial("udp4", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)).String())
	if err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(p.Append(nil)); err != nil {
		r.t.Fatal(err)
	}
}

// fakeRouterDisc is the fake router's discriminator in bringUp.
const fakeRouterDisc = 0x4321

// bringUp brings s's session to addr Up against r (the router at 20 ms,
// answering Init until it is) and returns how the router answers, s's
// first packet and where it came from.
func bringUp(t *testing.T, s *Server, r *fakeRouter, addr netip.Addr) (answer func(State), first Packet, from netip.AddrPort) {
	t.Helper()
	first, _, from = r.read()
	answer = func(st State) {
		r.send(Packet{State: st, DetectMult: 3, MyDisc: fakeRouterDisc, YourDisc: first.MyDisc, DesiredMinTx: 20000, RequiredMinRx: 20000}, 255, s.listenPort)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st, _ := s.State(addr); st != Up; st, _ = s.State(addr) {
		if time.Now().After(deadline) {
			t.Fatalf("not Up; dropped %d", s.Dropped.Load())
		}
		answer(Init)
		time.Sleep(10 * time.Millisecond)
	}
	return answer, first, from
}

// answerEvery makes the router answer Up every period until the returned
// stop is called.
func answerEvery(answer func(State), period time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(period):
				answer(Up)
			}
		}
	}()
	return func() { close(quit); <-done }
}

func freeUDPPort(t *testing.T) int {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestServerLoopback: the server sends with TTL 255 from a port in
// 49152-65535, comes Up with a router that answers, drops packets whose
// TTL is not 255 (GTSM, RFC 5881 §5) so the session times out, and sends
// AdminDown when the peer is removed. Plain loopback, no root.
func TestServerLoopback(t *testing.T) {
	s, r, lo, events := serverWithRouter(t, Config{MinTx: 20 * time.Millisecond, MinRx: 20 * time.Millisecond, Multiplier: 3})
	p, ttl, from := r.read()
	if p.State != Down || ttl != 255 || from.Port() < SourcePortMin {
		t.Fatalf("first packet %+v, TTL %d, from %v: want Down, TTL 255, source port >= %d", p, ttl, from, SourcePortMin)
	}
	const routerDisc = 0x1234
	answer := func(st State, ttl int) {
		r.send(Packet{State: st, DetectMult: 3, MyDisc: routerDisc, YourDisc: p.MyDisc, DesiredMinTx: 20000, RequiredMinRx: 20000}, ttl, s.listenPort)
	}
	waitEvent := func(want State) {
		t.Helper()
		for {
			select {
			case e := <-events:
				if e.State == want {
					return
				}
			case <-time.After(5 * time.Second):
				st, _ := s.State(lo)
				t.Fatalf("no %v event; state %v, dropped %d", want, st, s.Dropped.Load())
			}
		}
	}
	// The receive socket may open a moment after Add: answer until Up.
	deadline := time.Now().Add(5 * time.Second)
	for st, _ := s.State(lo); st != Up; st, _ = s.State(lo) {
		if time.Now().After(deadline) {
			t.Fatalf("not Up; dropped %d", s.Dropped.Load())
		}
		answer(Init, 255)
		time.Sleep(10 * time.Millisecond)
	}
	waitEvent(Up)
	dropped := s.Dropped.Load()
	for range 10 {
		answer(Up, 64) // one router hop away: must not keep the session up
		time.Sleep(10 * time.Millisecond)
	}
	waitEvent(Down)
	// Down comes one detection time (60 ms) after the last Init, before
	// the last of the 100 ms of sends: the receive goroutine may still
	// have packets to read.
	for deadline := time.Now().Add(5 * time.Second); s.Dropped.Load()-dropped < 10 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if d := s.Dropped.Load() - dropped; d != 10 {
		t.Errorf("%d packets with TTL 64 dropped, want 10", d)
	}
	s.Remove(lo)
	for {
		p, _, _ := r.read()
		if p.State == AdminDown {
			break
		}
	}
	if _, ok := s.State(lo); ok {
		t.Error("removed session still has a state")
	}
}

// TestServerBusyProcess: the detection time counts the router's silence,
// not this process's. The router answers every 20 ms; the server's
// goroutines are held up for 1 s (the receive goroutine at the server's
// mutex, the session's at its peer's, as a machine too busy to run the
// process holds them), three detection times of 100 ms × 3, while the
// router's packets wait in the socket. The session stays Up: packets that
// arrived in time count once read, with their kernel timestamps. A router
// that then falls silent still takes it Down.
func TestServerBusyProcess(t *testing.T) {
	// 300 ms: the router (a goroutine of this process) must keep sending
	// within it although the machine may be busy.
	s, r, lo, events := serverWithRouter(t, Config{MinTx: 100 * time.Millisecond, MinRx: 100 * time.Millisecond, Multiplier: 3})
	answer, _, _ := bringUp(t, s, r, lo)
	stop := answerEvery(answer, 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	for len(events) > 0 {
		<-events // the way Up
	}
	// Hold the process up: the receive goroutine stops at the server's
	// mutex, the session's at its peer's.
	s.mu.Lock()
	p := s.peers[lo]
	p.mu.Lock()
	time.Sleep(time.Second)
	p.mu.Unlock()
	s.mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	for len(events) > 0 {
		if e := <-events; e.State != Up {
			t.Errorf("the session went %v (diag %v) while the process was held up and the router answered", e.State, e.Diag)
		}
	}
	if st, _ := s.State(lo); st != Up {
		t.Fatalf("after the hold-up the session is %v, want Up", st)
	}
	stop()
	silent := time.Now()
	for down := false; !down; {
		select {
		case e := <-events:
			down = e.State == Down
		case <-time.After(5 * time.Second):
			t.Fatal("the router fell silent and the session stayed Up")
		}
	}
	if d := time.Since(silent); d > 2*time.Second {
		t.Errorf("Down %v after the router fell silent, want within its detection time (300 ms) and the wait", d)
	}
}

// TestServerHold: a held server's sessions do not time out when the router
// falls silent (a hand-over's cut-over: the successor may take the
// router's packets) and go on sending Up; released, they time out one
// detection time on.
func TestServerHold(t *testing.T) {
	// 300 ms, so the router (a goroutine here) keeps the session Up on a
	// busy machine until the hold.
	s, r, lo, events := serverWithRouter(t, Config{MinTx: 100 * time.Millisecond, MinRx: 100 * time.Millisecond, Multiplier: 3})
	answer, _, _ := bringUp(t, s, r, lo)
	stop := answerEvery(answer, 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	s.Hold(true)
	stop()
	if st, _ := s.State(lo); st != Up {
		t.Fatalf("before the hold the session is %v (the router answered every 20 ms)", st)
	}
	for len(events) > 0 {
		<-events
	}
	// The router is silent for more than three detection times; the
	// session keeps sending Up.
	until := time.Now().Add(time.Second)
	for time.Now().Before(until) {
		if p, _, _ := r.read(); p.State != Up {
			t.Fatalf("a held session sent %v", p.State)
		}
	}
	if st, _ := s.State(lo); st != Up || len(events) > 0 {
		t.Fatalf("held session %v, %d events; want Up, none", st, len(events))
	}
	released := time.Now()
	s.Hold(false)
	select {
	case e := <-events:
		if e.State != Down || e.Diag != DiagDetectionExpired {
			t.Fatalf("released: %+v, want Down (detection time expired)", e)
		}
		if d := time.Since(released); d > 2*time.Second {
			t.Errorf("released: Down after %v, want about one detection time (300 ms)", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("released session stayed Up with the router silent")
	}
}

// TestServerSendsWhileDetectionWaits: a session whose detection time ran
// out while its receive path still holds a packet puts its verdict off
// (up to a detection time), and goes on sending on its interval
// meanwhile: the router's detection time runs too. The router advertises
// 1 s × 2 (2 s of detection here) and asks for packets every 20 ms, then
// falls silent while the receive goroutine holds a packet it read (the
// state of a receive goroutine the machine does not run). Between the
// detection time's end and Down (the 2 s put-off) the router gets about
// 100 packets; a session that sends nothing while it waits sends none.
// The test asks for a quarter of them (its goroutine may not run for
// most of a second at a load of 20 on two CPUs) and logs the longest
// gap. The session still goes Down when the put-off ends.
func TestServerSendsWhileDetectionWaits(t *testing.T) {
	s, r, lo, _ := serverWithRouter(t, Config{MinTx: 20 * time.Millisecond, MinRx: 20 * time.Millisecond, Multiplier: 3})
	_, first, _ := bringUp(t, s, r, lo)
	const detection = 2 * time.Second
	slow := func() {
		r.send(Packet{State: Up, DetectMult: 2, MyDisc: fakeRouterDisc, YourDisc: first.MyDisc, DesiredMinTx: uint32(detection / 2 / time.Microsecond), RequiredMinRx: 20000}, 255, s.listenPort)
	}
	slow() // at once: bringUp's 60 ms of detection would not outlast a busy moment
	stop := answerEvery(func(State) { slow() }, 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if st, _ := s.State(lo); st != Up {
		t.Fatalf("the session is %v before the router falls silent, want Up", st)
	}
	// The router falls silent; the receive path holds a packet from now on.
	inFlight := &s.inFlight[familyIndex(true)]
	inFlight.Add(1)
	stop()
	defer inFlight.Add(-1)
	silent := time.Now()
	r.drain()            // what the session sent on the way Up
	var sent []time.Time // the kernel's receive times of the Up packets
	for {
		p, _, _, at := r.readAt()
		if p.State != Up {
			break
		}
		sent = append(sent, at)
		if time.Since(silent) > 10*time.Second {
			t.Fatal("the session stayed Up 10 s after the router fell silent")
		}
	}
	down := time.Since(silent)
	if down < detection {
		t.Errorf("Down %v after the router fell silent, before its detection time (%v)", down, detection)
	}
	waiting, longest := 0, time.Duration(0)
	for i, at := range sent {
		if at.Sub(silent) > detection {
			waiting++
		}
		if i > 0 {
			longest = max(longest, at.Sub(sent[i-1]))
		}
	}
	want := int((down - detection) / (20 * time.Millisecond) / 4)
	if waiting < want {
		t.Errorf("%d packets while the verdict waited (%v), want at least %d (every 20 ms: about %d)", waiting, (down - detection).Round(time.Millisecond), want, 4*want)
	}
	t.Logf("%d packets while the verdict waited, Down %v after silence, longest gap %v", waiting, down.Round(time.Millisecond), longest)
}
