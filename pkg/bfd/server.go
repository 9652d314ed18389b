package bfd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Port is the destination port of single-hop BFD control packets (RFC
// 5881 §4); the source port is in SourcePortMin..65535.
const (
	Port          = 3784
	SourcePortMin = 49152
	ttl           = 255 // sent, and required on receipt (RFC 5881 §5, GTSM)
)

// Event is a session's state change, delivered on the session's goroutine.
type Event struct {
	Peer  netip.Addr
	State State
	Diag  Diag
}

// Server runs one BFD session per peer in this process: a goroutine per
// session that owns its Session and its send socket, and one receive
// socket per address family on port 3784 that hands packets to the
// session of their source address.
type Server struct {
	log      *slog.Logger
	onChange func(Event)
	// listenPort and peerPort are Port; tests move them off 3784.
	listenPort, peerPort int

	mu     sync.Mutex
	peers  map[netip.Addr]*peer
	resume map[netip.Addr]Carried // sessions a predecessor carried, until Add
	rx     map[bool]*net.UDPConn  // by "is IPv4"
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Dropped counts received packets discarded: not from a peer, TTL not
	// 255, or rejected by Parse.
	Dropped atomic.Uint64
	// held keeps the sessions from timing out (Hold).
	held atomic.Bool
	// inFlight counts, per family (index 1: IPv4), packets the receive
	// goroutine has read and not yet handed to their session (pending).
	inFlight [2]atomic.Int32
}

type peer struct {
	addr  netip.Addr
	v4    bool
	inbox chan arrival
	state atomic.Uint32 // State
	stop  context.CancelFunc
	done  chan struct{}
	// silent makes the session end without AdminDown (a hand-over).
	silent atomic.Bool

	mu      sync.Mutex
	carried Carried // the session's state after its last event
}

// NewServer returns a server; onChange (may be nil) is called on a
// session's goroutine after each of its state changes and must not block.
func NewServer(log *slog.Logger, onChange func(Event)) *Server {
	if onChange == nil {
		onChange = func(Event) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{log: log, onChange: onChange, listenPort: Port, peerPort: Port, peers: map[netip.Addr]*peer{}, rx: map[bool]*net.UDPConn{}, ctx: ctx, cancel: cancel}
}

// Add starts a session to addr (a directly connected router).
func (s *Server) Add(addr netip.Addr, cfg Config) error {
	addr = addr.Unmap()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("bfd: server closed")
	}
	if _, ok := s.peers[addr]; ok {
		return fmt.Errorf("bfd: session to %s exists", addr)
	}
	if _, ok := s.rx[addr.Is4()]; !ok {
		s.rx[addr.Is4()] = nil
		s.wg.Add(1)
		go s.receive(addr.Is4())
	}
	c, resumed := s.resume[addr]
	delete(s.resume, addr)
	conn, err := dialPeer(addr, s.peerPort, c.SourcePort)
	if err != nil {
		return err
	}
	ss := NewSession(cfg, discriminator(), time.Now())
	if resumed {
		ss = ResumeSession(cfg, c, time.Now())
		s.log.Info("bfd session resumed from the predecessor", "peer", addr, "state", ss.State(), "local_disc", ss.LocalDisc(), "source_port", conn.LocalAddr().(*net.UDPAddr).Port)
	}
	ctx, stop := context.WithCancel(s.ctx)
	p := &peer{addr: addr, v4: addr.Is4(), inbox: make(chan arrival, 16), stop: stop, done: make(chan struct{})}
	p.state.Store(uint32(ss.State()))
	p.carried = ss.carry()
	p.carried.Peer, p.carried.SourcePort = addr, uint16(conn.LocalAddr().(*net.UDPAddr).Port)
	s.peers[addr] = p
	go s.run(ctx, p, conn, ss)
	return nil
}

// Remove ends the session to addr: it sends AdminDown, so the router does
// not take it for a failure.
func (s *Server) Remove(addr netip.Addr) {
	addr = addr.Unmap()
	s.mu.Lock()
	p := s.peers[addr]
	delete(s.peers, addr)
	s.mu.Unlock()
	if p != nil {
		p.stop()
		<-p.done
	}
}

// State returns the state of the session to addr; false without one.
func (s *Server) State(addr netip.Addr) (State, bool) {
	s.mu.Lock()
	p := s.peers[addr.Unmap()]
	s.mu.Unlock()
	if p == nil {
		return 0, false
	}
	return State(p.state.Load()), true
}

// Resume makes the next Add of each carried peer continue the session a
// predecessor process ran (Export), instead of starting one in Down.
func (s *Server) Resume(cs []Carried) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resume == nil {
		s.resume = map[netip.Addr]Carried{}
	}
	for _, c := range cs {
		s.resume[c.Peer.Unmap()] = c
	}
}

// Export returns every session's state for a successor process; the
// sessions run on untouched (a successor that fails leaves them be).
func (s *Server) Export() []Carried {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cs []Carried
	for _, p := range s.peers {
		p.mu.Lock()
		cs = append(cs, p.carried)
		p.mu.Unlock()
	}
	return cs
}

// Hold(true) keeps every session from timing out: they go on sending
// their state, and a detection time that passes restarts. It is for a
// hand-over's cut-over, when the successor has resumed the sessions and
// its receive socket may take the router's packets before this process
// Detaches: a session that timed out here would tell the router Down.
// Hold(false) lets them time out again, one detection time on.
func (s *Server) Hold(hold bool) { s.held.Store(hold) }

// Close ends every session (AdminDown) and the receive sockets.
func (s *Server) Close() { s.close(false) }

// Detach ends every session without a word to the routers, for a
// successor that resumes them (Export): the last packets sent say Up.
func (s *Server) Detach() { s.close(true) }

func (s *Server) close(silent bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	var ps []*peer
	for a, p := range s.peers {
		p.silent.Store(silent)
		ps = append(ps, p)
		delete(s.peers, a)
	}
	s.cancel()
	for _, c := range s.rx {
		if c != nil {
			c.Close()
		}
	}
	s.mu.Unlock()
	for _, p := range ps {
		<-p.done
	}
	s.wg.Wait()
}

// discriminator is a random nonzero local discriminator.
func discriminator() uint32 {
	for {
		if d := rand.Uint32(); d != 0 {
			return d
		}
	}
}

// run is a session's goroutine: it sends on the session's timers and
// feeds it what the receive socket hands over.
func (s *Server) run(ctx context.Context, p *peer, conn *net.UDPConn, ss *Session) {
	defer close(p.done)
	defer conn.Close()
	buf := make([]byte, 0, PacketLen)
	send := func(final bool) {
		pkt := ss.Packet(final)
		buf = pkt.Append(buf[:0])
		conn.Write(buf) // a lost packet is what BFD tolerates; errors show as Down
	}
	changed := func(old State) {
		if st := ss.State(); st != old {
			p.state.Store(uint32(st))
			s.log.Info("bfd session "+st.String(), "peer", p.addr, "diag", ss.Diag())
			s.onChange(Event{Peer: p.addr, State: st, Diag: ss.Diag()})
		}
	}
	receive := func(a arrival) {
		old := ss.State()
		if ss.Receive(a.pkt, a.at) {
			send(true)
		}
		changed(old)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	var held time.Time // when a detection was first put off (see below)
	for {
		select {
		case <-ctx.Done():
			if p.silent.Load() {
				return
			}
			ss.AdminDown()
			send(false)
			p.state.Store(uint32(AdminDown))
			return
		case a := <-p.inbox:
			receive(a)
		case <-timer.C:
		}
		now := time.Now()
		// The detection time measures the router's silence, not this
		// process's: packets that arrived (kernel timestamps) but wait in
		// the inbox or the receive socket because this process did not run
		// count first. A machine too busy to run us for a while must not
		// take a session down.
		for drained := false; !drained; {
			select {
			case a := <-p.inbox:
				receive(a)
			default:
				drained = true
			}
		}
		if s.held.Load() && ss.Expired(now) {
			ss.Extend(now)
		}
		if ss.Expired(now) && s.pending(p.v4) && (held.IsZero() || now.Sub(held) < max(ss.DetectionTime(), maxPutOff)) {
			if held.IsZero() {
				held = now
			}
			// Only the verdict waits: the router's own detection time runs
			// too, and a session that stopped sending would go Down there.
			if ss.Transmit(now) {
				send(false)
			}
			timer.Reset(min(5*time.Millisecond, time.Until(ss.nextTx))) // the receive goroutine reads them
			continue
		}
		for drained := false; !drained; { // what was handed over meanwhile
			select {
			case a := <-p.inbox:
				receive(a)
			default:
				drained = true
			}
		}
		held = time.Time{}
		old := ss.State()
		if _, due := ss.Tick(now); due {
			send(false)
		}
		changed(old)
		c := ss.carry()
		p.mu.Lock()
		c.Peer, c.SourcePort = p.carried.Peer, p.carried.SourcePort
		p.carried = c
		p.mu.Unlock()
		timer.Reset(time.Until(ss.Next()))
	}
}

// dialPeer opens the session's send socket: from a port in
// SourcePortMin..65535 (RFC 5881 §4), TTL or hop limit 255; from
// srcPort when nonzero and free to share (a resumed session keeps the
// predecessor's port: SO_REUSEPORT on every send socket lets the
// successor bind it while the predecessor still holds it).
func dialPeer(addr netip.Addr, port int, srcPort uint16) (*net.UDPConn, error) {
	var last error
	for i := range 33 {
		local := &net.UDPAddr{Port: SourcePortMin + rand.IntN(65536-SourcePortMin)}
		if i == 0 {
			if srcPort < SourcePortMin {
				continue
			}
			local.Port = int(srcPort)
		}
		d := net.Dialer{LocalAddr: local, Control: func(network, _ string, c syscall.RawConn) error {
			return setSockopt(c, addr.Is4(), false)
		}}
		c, err := d.Dial(udpNet(addr.Is4()), netip.AddrPortFrom(addr, uint16(port)).String())
		if err == nil {
			return c.(*net.UDPConn), nil
		}
		last = err
		if i > 0 && !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return nil, fmt.Errorf("bfd: socket to %s: %w", addr, last)
}

func udpNet(v4 bool) string {
	if v4 {
		return "udp4"
	}
	return "udp6"
}

// setSockopt sets TTL 255 on a send socket, or asks a receive socket for
// each packet's TTL.
func setSockopt(c syscall.RawConn, v4, recv bool) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		// Shared with a predecessor or successor process during a
		// hand-over (doc.go "Hand-over").
		if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr != nil {
			return
		}
		if recv {
			// Each packet's arrival time: what the detection time counts.
			if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); serr != nil {
				return
			}
		}
		switch {
		case v4 && recv:
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_RECVTTL, 1)
		case v4:
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL, ttl)
		case recv:
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_RECVHOPLIMIT, 1)
		default:
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_UNICAST_HOPS, ttl)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// receive owns one family's receive socket on port 3784. The port may be
// taken (another BFD daemon, or the predecessor during a hand-over): it
// retries every second until it gets it or the server closes.
func (s *Server) receive(v4 bool) {
	defer s.wg.Done()
	var conn *net.UDPConn
	for conn == nil {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error { return setSockopt(c, v4, true) }}
		pc, err := lc.ListenPacket(s.ctx, udpNet(v4), fmt.Sprintf(":%d", s.listenPort))
		if err == nil {
			conn = pc.(*net.UDPConn)
			break
		}
		s.log.Warn("bfd: cannot listen; retrying every second", "port", s.listenPort, "err", err)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.rx[v4] = conn
	s.mu.Unlock()
	buf, oob := make([]byte, 512), make([]byte, 128)
	inFlight := &s.inFlight[familyIndex(v4)]
	for {
		n, oobn, _, from, err := conn.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			continue
		}
		inFlight.Add(1)
		s.deliver(buf[:n], oob[:oobn], from)
		inFlight.Add(-1)
	}
}

func familyIndex(v4 bool) int {
	if v4 {
		return 1
	}
	return 0
}

// deliver checks a received packet and hands it to its session.
func (s *Server) deliver(b, oob []byte, from netip.AddrPort) {
	if t, ok := receivedTTL(oob); !ok || t != ttl {
		s.Dropped.Add(1) // GTSM: only a directly connected router sends 255
		return
	}
	pkt, err := Parse(b)
	s.mu.Lock()
	p := s.peers[from.Addr().Unmap()]
	s.mu.Unlock()
	if err != nil || p == nil {
		s.Dropped.Add(1)
		return
	}
	at := time.Now()
	if wall, ok := receivedAt(oob); ok {
		// The kernel stamps the wall clock; the session counts on the
		// monotonic one: keep the packet's age (a wall clock step in
		// between can make it look negative or huge).
		at = at.Add(-min(max(at.Sub(wall), 0), 10*time.Second))
	}
	// A full inbox (its session did not run for a while) gives up its
	// oldest packet: the newest says most about the router.
	for a := (arrival{pkt, at}); ; {
		select {
		case p.inbox <- a:
		default:
			select {
			case <-p.inbox:
			default:
			}
			continue
		}
		break
	}
}

// maxPutOff bounds how long a session whose detection time passed waits
// for the packets its receive path still holds (run): on a machine busy
// enough to hold the process up, the receive goroutine may need that
// long to run; packets from other routers can make a silent router's
// Down come that much later at worst.
const maxPutOff = time.Second

// arrival is a received packet and when the kernel received it.
type arrival struct {
	pkt Packet
	at  time.Time
}

// pending reports whether a family's receive path holds packets not yet
// handed to their session: read and being delivered, or in the socket
// (SIOCINQ).
func (s *Server) pending(v4 bool) bool {
	if s.inFlight[familyIndex(v4)].Load() > 0 {
		return true
	}
	s.mu.Lock()
	conn := s.rx[v4]
	s.mu.Unlock()
	if conn == nil {
		return false
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n > 0
}

// receivedAt finds the kernel's receive timestamp in a packet's control
// messages.
func receivedAt(oob []byte) (time.Time, bool) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			return time.Unix(int64(nativeEndian.Uint64(m.Data)), int64(nativeEndian.Uint64(m.Data[8:]))), true
		}
	}
	return time.Time{}, false
}

// receivedTTL finds the TTL or hop limit in a packet's control messages.
func receivedTTL(oob []byte) (int, bool) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if (m.Header.Level == syscall.IPPROTO_IP && m.Header.Type == syscall.IP_TTL ||
			m.Header.Level == syscall.IPPROTO_IPV6 && m.Header.Type == syscall.IPV6_HOPLIMIT) && len(m.Data) >= 4 {
			return int(int32(nativeEndian.Uint32(m.Data))), true
		}
	}
	return 0, false
}
