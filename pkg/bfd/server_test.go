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

func (r *fakeRouter) port() int { return r.conn.LocalAddr().(*net.UDPAddr).Port }

// read returns the next packet, its TTL and its source.
func (r *fakeRouter) read() (Packet, int, netip.AddrPort) {
	r.t.Helper()
	buf, oob := make([]byte, 64), make([]byte, 64)
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
	return p, ttl, from
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
	r := newFakeRouter(t)
	events := make(chan Event, 16)
	s := NewServer(slog.New(slog.DiscardHandler), func(e Event) { events <- e })
	s.listenPort, s.peerPort = freeUDPPort(t), r.port()
	defer s.Close()
	lo := netip.MustParseAddr("127.0.0.1")
	if err := s.Add(lo, Config{MinTx: 20 * time.Millisecond, MinRx: 20 * time.Millisecond, Multiplier: 3}); err != nil {
		t.Fatal(err)
	}
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
	if d := s.Dropped.Load() - dropped; d < 10 {
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
