package neigh

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// route is what a next hop takes from the kernel's answer to RTM_GETROUTE.
type route struct {
	oif int        // RTA_OIF
	gw  netip.Addr // RTA_GATEWAY, or RTA_VIA (an IPv4 route via an IPv6 router); invalid on the link
	src netip.Addr // RTA_PREFSRC
	mtu int        // RTAX_MTU of RTA_METRICS; 0 when the route sets none
}

// routeSocket asks the kernel for routes on a netlink socket of its own:
// one request at a time, its buffer reused, a blocking socket (the kernel
// answers RTM_GETROUTE within the sendto, so the recvfrom never waits).
// One goroutine at a time (a Pass hands sockets out).
type routeSocket struct {
	fd  int
	seq uint32
	buf []byte // the request, then the answer
}

// routeAnswer is the receive buffer: an answer to RTM_GETROUTE is a few
// hundred bytes (rtmsg and a dozen attributes).
const routeAnswer = 8 << 10

// openRouteSocket opens a route socket in the calling thread's network
// namespace.
func openRouteSocket() (*routeSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open route socket: %w", err)
	}
	// A lost answer must not hang the pass: the kernel answers at once,
	// so seconds are plenty.
	tv := unix.Timeval{Sec: 10}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("route socket timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind route socket: %w", err)
	}
	return &routeSocket{fd: fd, buf: make([]byte, routeAnswer)}, nil
}

func (s *routeSocket) close() { unix.Close(s.fd) }

// errNoRoute is an answer without a route message (the kernel answers a
// lookup that fails with an error, not with nothing; this is the
// library's "no route" kept).
var errNoRoute = errors.New("no route")

// get returns the kernel's route towards dst (an unmapped address), as
// `ip route get` does: the main table's answer with RTM_F_LOOKUP_TABLE, as
// the netlink library asked it.
func (s *routeSocket) get(dst netip.Addr) (route, error) {
	s.seq++
	req := s.request(dst)
	if err := unix.Sendto(s.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return route{}, fmt.Errorf("send RTM_GETROUTE: %w", err)
	}
	for {
		n, _, flags, from, err := unix.Recvmsg(s.fd, s.buf, nil, 0)
		if err != nil {
			return route{}, fmt.Errorf("receive RTM_GETROUTE answer: %w", err)
		}
		if flags&unix.MSG_TRUNC != 0 {
			return route{}, fmt.Errorf("RTM_GETROUTE answer longer than %d bytes", len(s.buf))
		}
		if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
			continue // not the kernel's
		}
		rt, done, err := s.parse(s.buf[:n])
		if done || err != nil {
			return rt, err
		}
		// Only messages of an earlier request (answered after its
		// caller gave up): read on.
	}
}

// request builds RTM_GETROUTE for dst in s.buf: a header, an rtmsg and
// RTA_DST.
func (s *routeSocket) request(dst netip.Addr) []byte {
	addr := dst.AsSlice()
	family, bits := unix.AF_INET, 32
	if dst.Is6() {
		family, bits = unix.AF_INET6, 128
	}
	n := unix.SizeofNlMsghdr + unix.SizeofRtMsg + unix.SizeofRtAttr + len(addr)
	b := s.buf[:n]
	clear(b)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(n))
	ne.PutUint16(b[4:], unix.RTM_GETROUTE)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(b[8:], s.seq)
	m := b[unix.SizeofNlMsghdr:]
	m[0] = byte(family)                          // rtm_family
	m[1] = byte(bits)                            // rtm_dst_len
	ne.PutUint32(m[8:], unix.RTM_F_LOOKUP_TABLE) // rtm_flags
	a := m[unix.SizeofRtMsg:]
	ne.PutUint16(a[0:], uint16(unix.SizeofRtAttr+len(addr)))
	ne.PutUint16(a[2:], unix.RTA_DST)
	copy(a[unix.SizeofRtAttr:], addr)
	return b
}

// parse reads the answer to request s.seq from the messages in b; done
// says it was there (a route, or the kernel's error).
func (s *routeSocket) parse(b []byte) (rt route, done bool, err error) {
	ne := binary.NativeEndian
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(ne.Uint32(b[0:]))
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return route{}, true, fmt.Errorf("RTM_GETROUTE answer: bad message length %d", l)
		}
		typ, seq, data := ne.Uint16(b[4:]), ne.Uint32(b[8:]), b[unix.SizeofNlMsghdr:l]
		b = b[min(align(l), len(b)):]
		if seq != s.seq {
			continue
		}
		switch typ {
		case unix.NLMSG_ERROR:
			if len(data) < 4 {
				return route{}, true, errors.New("RTM_GETROUTE answer: short error message")
			}
			if errno := int32(ne.Uint32(data)); errno != 0 {
				return route{}, true, syscall.Errno(-errno)
			}
			return route{}, true, errNoRoute
		case unix.RTM_NEWROUTE:
			rt, err := parseRoute(data)
			return rt, true, err
		}
	}
	return route{}, false, nil
}

// parseRoute reads the fields of a route message that a next hop uses.
func parseRoute(b []byte) (route, error) {
	if len(b) < unix.SizeofRtMsg {
		return route{}, errors.New("RTM_NEWROUTE: short message")
	}
	var rt route
	ne := binary.NativeEndian
	err := attrs(b[unix.SizeofRtMsg:], func(typ uint16, v []byte) error {
		switch typ {
		case unix.RTA_OIF:
			if len(v) < 4 {
				return errors.New("RTA_OIF: short")
			}
			rt.oif = int(ne.Uint32(v))
		case unix.RTA_GATEWAY:
			a, ok := netip.AddrFromSlice(v)
			if !ok {
				return fmt.Errorf("RTA_GATEWAY: %d bytes", len(v))
			}
			rt.gw = a
		case unix.RTA_VIA: // struct rtvia: a family, then its address
			if len(v) < 2 {
				return errors.New("RTA_VIA: short")
			}
			a, ok := netip.AddrFromSlice(v[2:])
			if !ok {
				return fmt.Errorf("RTA_VIA: %d bytes", len(v))
			}
			rt.gw = a
		case unix.RTA_PREFSRC:
			if a, ok := netip.AddrFromSlice(v); ok {
				rt.src = a
			}
		case unix.RTA_METRICS:
			return attrs(v, func(typ uint16, v []byte) error {
				if typ == unix.RTAX_MTU && len(v) >= 4 {
					rt.mtu = int(ne.Uint32(v))
				}
				return nil
			})
		}
		return nil
	})
	return rt, err
}

// attrs calls f with each route attribute in b, its type without the
// nested and byte-order flags.
func attrs(b []byte, f func(typ uint16, v []byte) error) error {
	ne := binary.NativeEndian
	for len(b) >= unix.SizeofRtAttr {
		l := int(ne.Uint16(b[0:]))
		if l < unix.SizeofRtAttr || l > len(b) {
			return fmt.Errorf("route attribute: bad length %d", l)
		}
		if err := f(ne.Uint16(b[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER), b[unix.SizeofRtAttr:l]); err != nil {
			return err
		}
		b = b[min(align(l), len(b)):]
	}
	return nil
}

// align rounds a netlink length up to 4 bytes.
func align(n int) int { return (n + 3) &^ 3 }
