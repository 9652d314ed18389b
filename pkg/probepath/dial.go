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
// or "udp") bound to the appliance's own address and a local port
// registered to key before it connects, marked so that the policy rule
// routes it into the TUN, connected to the target's VIP at addr's port.
// What it sends reaches the backend inside the rule's encapsulation; the
// backend's answer comes back from VIP:port by direct server return and
// the kernel delivers it to this socket. Errors of the connection carry,
// when the data path knows something, what it saw ("no answer to 3
// packets sent to VIP:port inside IPIP to backend", "no route to
// backend: no next hop …").
func (p *Path) Dial(ctx context.Context, network string, key health.Key, addr netip.AddrPort) (net.Conn, error) {
	var proto uint8
	switch network {
	case "tcp":
		proto = packet.ProtoTCP
	case "udp":
		proto = packet.ProtoUDP
	default:
		return nil, fmt.Errorf("data path: network %q (want tcp or udp)", network)
	}
	r, err := p.o.Routes(key)
	if err == nil && r.Template == nil {
		err = errNoTemplate
	}
	if err != nil {
		return nil, fmt.Errorf("data path: no route to backend %s: %w", key.Backend, err)
	}
	src, err := p.source(r)
	if err != nil {
		return nil, fmt.Errorf("data path: %w", err)
	}
	dst := netip.AddrPortFrom(r.VIP, addr.Port())
	if r.VIP.Is4() {
		network += "4"
	} else {
		network += "6"
	}
	e := &entry{key: key, dst: dst, via: describe(r.Template, key.Backend)}
	d := net.Dialer{ControlContext: func(_ context.Context, _, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = p.claim(int(fd), src, proto, e) }); cerr != nil {
			return cerr
		}
		return err
	}}
	p.stats.dials.Add(1)
	var conn net.Conn
	err = p.in(func() (err error) {
		conn, err = d.DialContext(ctx, network, dst.String())
		return err
	})
	if err != nil {
		e.release()
		return nil, e.annotate(err)
	}
	return &probeConn{Conn: conn, e: e}, nil
}

// claim readies a probe socket before it connects: the mark, a bind to the
// appliance's address and a port of the kernel's choosing, and that port
// registered to the probe, so that the reader knows whose packets these are
// from the first one on.
func (p *Path) claim(fd int, src netip.Addr, proto uint8, e *entry) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(p.mark)); err != nil {
		return fmt.Errorf("mark the probe socket: %w", err)
	}
	var sa unix.Sockaddr
	if src.Is4() {
		sa = &unix.SockaddrInet4{Addr: src.As4()}
	} else {
		sa = &unix.SockaddrInet6{Addr: src.As16()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("bind the probe socket to %s: %w", src, err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return fmt.Errorf("probe socket's port: %w", err)
	}
	var port int
	switch a := got.(type) {
	case *unix.SockaddrInet4:
		port = a.Port
	case *unix.SockaddrInet6:
		port = a.Port
	}
	p.reg.put(portKey{addr: src.As16(), proto: proto, port: uint16(port)}, e)
	return nil
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
// registration released when it closes.
type probeConn struct {
	net.Conn
	e *entry
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
