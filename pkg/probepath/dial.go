package probepath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/packet"
)

var _ health.DialFunc = (*Path)(nil).Dial

// Dial is the path's health.DialFunc: a kernel socket of network ("tcp"
// or "udp") bound to the appliance's own address and marked, so that the
// policy rule routes it into the TUN, connected to the target's VIP at
// addr's port, its 4-tuple registered to key. What it sends reaches the
// backend inside the rule's encapsulation; the backend's answer comes back
// from VIP:port by direct server return and the kernel delivers it to this
// socket. Errors of the connection carry, when the data path knows
// something, what it saw ("no answer to 3 packets sent to VIP:port inside
// IPIP to backend", "no route to backend: no next hop …").
func (p *Path) Dial(ctx context.Context, network string, key health.Key, addr netip.AddrPort) (net.Conn, error) {
	if network != "tcp" && network != "udp" {
		return nil, fmt.Errorf("data path: network %q (want tcp or udp)", network)
	}
	r, err := p.o.Routes(key)
	if err == nil && r.Template == nil {
		err = errNoTemplate
	}
	if err != nil {
		return nil, fmt.Errorf("data path: no route to backend %s: %w", key.Backend, err)
	}
	if r.VIP.Is6() && p.noV6 != nil {
		return nil, fmt.Errorf("data path: %w", p.noV6)
	}
	src, err := p.source(r)
	if err != nil {
		return nil, fmt.Errorf("data path: %w", err)
	}
	dst := netip.AddrPortFrom(r.VIP, addr.Port())
	e := &entry{key: key, dst: dst, via: describe(r.Template, key.Backend)}
	p.stats.dials.Add(1)
	var conn net.Conn
	if network == "tcp" {
		conn, err = p.dialTCP(ctx, src, dst, e)
	} else {
		conn, err = p.dialUDP(ctx, src, dst, e)
	}
	if err != nil {
		e.release()
		return nil, e.annotate(err)
	}
	return conn, nil
}

// dialTCP connects a probe's TCP socket. Its source port is the kernel's
// choice at connect time (IP_BIND_ADDRESS_NO_PORT), unique per 4-tuple as
// an unbound socket's: a port bound before connect would be unique per
// address, and the TIME_WAIT of a few hundred probes a second would soon
// hold every ephemeral port. The port is known only once connect has sent
// the SYN into the TUN, so the reader parks a SYN it cannot place yet and
// the registration takes it (registry.put).
func (p *Path) dialTCP(ctx context.Context, src netip.Addr, dst netip.AddrPort, e *entry) (net.Conn, error) {
	fd, err := p.socket(src, unix.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	local := netip.AddrPortFrom(src, 0)
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Source: net.TCPAddrFromAddrPort(local), Addr: net.TCPAddrFromAddrPort(dst), Err: err}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1); err != nil {
		unix.Close(fd)
		return nil, opErr(os.NewSyscallError("setsockopt IP_BIND_ADDRESS_NO_PORT", err))
	}
	if err := unix.Bind(fd, sockaddr(netip.AddrPortFrom(src, 0))); err != nil {
		unix.Close(fd)
		return nil, opErr(os.NewSyscallError("bind", err))
	}
	if err := unix.Connect(fd, sockaddr(dst)); err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return nil, opErr(os.NewSyscallError("connect", err))
	}
	local, err = localPort(fd, src)
	if err != nil {
		unix.Close(fd)
		return nil, opErr(err)
	}
	p.register(flowOf(packet.ProtoTCP, local, dst), e)
	f := os.NewFile(uintptr(fd), "probe")
	c, err := net.FileConn(f) // a duplicate on the Go poller
	f.Close()
	if err != nil {
		return nil, opErr(err)
	}
	tc := c.(*net.TCPConn)
	if err := awaitConnect(ctx, tc); err != nil {
		tc.Close()
		return nil, opErr(err)
	}
	return &probeConn{Conn: tc, e: e, local: net.TCPAddrFromAddrPort(local), remote: net.TCPAddrFromAddrPort(dst)}, nil
}

// awaitConnect waits until the connecting socket of c is connected or
// failed, or ctx ends (its deadline is the socket's).
func awaitConnect(ctx context.Context, c *net.TCPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	var cerr error
	werr := rc.Write(func(fd uintptr) bool {
		if _, err := unix.Getpeername(int(fd)); err == nil {
			return true // connected
		}
		switch v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR); {
		case err != nil:
			cerr = os.NewSyscallError("getsockopt", err)
		case v != 0:
			cerr = os.NewSyscallError("connect", syscall.Errno(v))
		default:
			return false // still connecting: wait until writable
		}
		return true
	})
	if errors.Is(werr, os.ErrDeadlineExceeded) {
		return os.ErrDeadlineExceeded // "i/o timeout", as a dial's
	}
	if werr != nil {
		return werr
	}
	if cerr != nil {
		return cerr
	}
	return c.SetWriteDeadline(time.Time{})
}

// dialUDP connects a probe's UDP socket: bound to a port of its own (UDP
// has no TIME_WAIT to run out of ports with) and registered before
// connect, which sends nothing.
func (p *Path) dialUDP(ctx context.Context, src netip.Addr, dst netip.AddrPort, e *entry) (net.Conn, error) {
	d := net.Dialer{ControlContext: func(_ context.Context, _, _ string, c syscall.RawConn) error {
		var err error
		cerr := c.Control(func(fd uintptr) {
			if err = p.prepare(int(fd), src); err != nil {
				return
			}
			var local netip.AddrPort
			if local, err = localPort(int(fd), src); err == nil {
				p.register(flowOf(packet.ProtoUDP, local, dst), e)
			}
		})
		if cerr != nil {
			return cerr
		}
		return err
	}}
	network := "udp4"
	if dst.Addr().Is6() {
		network = "udp6"
	}
	var conn net.Conn
	err := p.in(func() (err error) {
		conn, err = d.DialContext(ctx, network, dst.String())
		return err
	})
	if err != nil {
		return nil, err
	}
	return &probeConn{Conn: conn, e: e}, nil
}

// socket makes a probe socket of the source's family in the path's
// namespace, marked and non-blocking.
func (p *Path) socket(src netip.Addr, typ int) (int, error) {
	fam := unix.AF_INET
	if src.Is6() {
		fam = unix.AF_INET6
	}
	var fd int
	err := p.in(func() (err error) {
		fd, err = unix.Socket(fam, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(p.mark)); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("setsockopt SO_MARK", err)
	}
	return fd, nil
}

// prepare marks a UDP probe socket and binds it to the source address and
// a port of the kernel's choosing.
func (p *Path) prepare(fd int, src netip.Addr) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(p.mark)); err != nil {
		return os.NewSyscallError("setsockopt SO_MARK", err)
	}
	if err := unix.Bind(fd, sockaddr(netip.AddrPortFrom(src, 0))); err != nil {
		return fmt.Errorf("bind the probe socket to %s: %w", src, err)
	}
	return nil
}

// register records a probe's flow and sends what the reader parked for
// it (the SYN of a connect that raced the registration).
func (p *Path) register(k flowKey, e *entry) {
	for _, pkt := range p.reg.put(k, e) {
		p.sendParked(pkt)
	}
}

func sockaddr(a netip.AddrPort) unix.Sockaddr {
	if a.Addr().Is4() {
		return &unix.SockaddrInet4{Addr: a.Addr().As4(), Port: int(a.Port())}
	}
	return &unix.SockaddrInet6{Addr: a.Addr().As16(), Port: int(a.Port())}
}

// localPort is the socket's own address: src and the port it got.
func localPort(fd int, src netip.Addr) (netip.AddrPort, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, os.NewSyscallError("getsockname", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(src, uint16(a.Port)), nil
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(src, uint16(a.Port)), nil
	}
	return netip.AddrPort{}, fmt.Errorf("getsockname: %T", sa)
}

// source is the appliance's address a probe leaves from and the backend
// answers to: the template's own (outer) address when it is of the VIP's
// family, else the interface's address of that family (an IPv4 VIP over
// IPv6 backends).
func (p *Path) source(r Route) (netip.Addr, error) {
	if s := r.Template.Spec().Src; s.IsValid() && s.Is4() == r.VIP.Is4() {
		return s, nil
	}
	return p.addrs.get(p, r.VIP.Is4())
}

// describe names the way a probe travels, for error notes.
func describe(t *encap.Template, backend netip.Addr) string {
	if t.Kind() == encap.Direct {
		return "DIRECT to " + backend.String()
	}
	return t.Kind().String() + " to " + backend.String()
}

// entry is one probe connection as the data path knows it: its target and
// what befell its packets. The reader writes sent and note; the prober's
// goroutine reads them when an error needs explaining.
type entry struct {
	key  health.Key
	dst  netip.AddrPort // the VIP and port
	via  string         // "IPIP to 198.18.1.100"
	sent atomic.Uint32
	note atomic.Pointer[error] // the last thing that went wrong on the path
	// releasedAt is when the probe's socket closed (UnixNano; 0: open). The
	// registration outlives it (closing sends a FIN, TIME_WAIT answers)
	// until the registry sweeps it or the kernel gives the port to another
	// probe.
	releasedAt atomic.Int64
}

func (e *entry) noteErr(err error) { e.note.Store(&err) }

func (e *entry) release() { e.releasedAt.CompareAndSwap(0, time.Now().UnixNano()) }

// annotate adds what the data path knows to an error of the probe's
// connection: the last problem it had with a packet, or, on a timeout, that
// nothing came back to what it sent.
func (e *entry) annotate(err error) error {
	if err == nil || err == io.EOF {
		return err // io.EOF is compared, not unwrapped, by its readers
	}
	if n := e.note.Load(); n != nil {
		return &PathError{Err: err, Detail: (*n).Error()}
	}
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return &PathError{Err: err, Detail: fmt.Sprintf("no answer to %d packet(s) sent to %s inside %s", e.sent.Load(), e.dst, e.via)}
	case errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
		// An ICMP unreachable about the VIP: from the backend (an IPv6
		// host that does not own the VIP says so) or a router before it.
		return &PathError{Err: err, Detail: fmt.Sprintf("%d packet(s) sent to %s inside %s drew an ICMP unreachable", e.sent.Load(), e.dst, e.via)}
	}
	return err
}

// PathError is an error of a probe's connection with what the data path
// saw; Error shows both, Unwrap gives the connection's error.
type PathError struct {
	Err    error
	Detail string
}

func (e *PathError) Error() string { return e.Err.Error() + " (data path: " + e.Detail + ")" }
func (e *PathError) Unwrap() error { return e.Err }

// Timeout reports whether the connection's error is a timeout, as a
// net.Error would.
func (e *PathError) Timeout() bool {
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}

// Temporary is net.Error's, never true.
func (e *PathError) Temporary() bool { return false }

// probeConn is a probe's connection: its errors explained, its
// registration released when it closes. A TCP connection made from a
// connecting socket has its addresses here (net.FileConn read them before
// the socket was connected).
type probeConn struct {
	net.Conn
	e             *entry
	local, remote net.Addr
}

func (c *probeConn) LocalAddr() net.Addr {
	if c.local != nil {
		return c.local
	}
	return c.Conn.LocalAddr()
}

func (c *probeConn) RemoteAddr() net.Addr {
	if c.remote != nil {
		return c.remote
	}
	return c.Conn.RemoteAddr()
}

func (c *probeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	return n, c.e.annotate(err)
}

func (c *probeConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	return n, c.e.annotate(err)
}

func (c *probeConn) Close() error {
	c.e.release()
	return c.Conn.Close()
}
