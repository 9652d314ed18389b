package decaptest

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/netns"
)

// Send sends payload from namespace ns (nil: the current one) to dst: in a
// raw IP socket of protocol proto, so the kernel adds the outer IPv4 or
// IPv6 header (dst's port is ignored), or, when proto is 0, as the payload
// of a UDP datagram to dst (GUE).
func Send(ns *netns.NS, proto int, dst netip.AddrPort, payload []byte) error {
	send := func() error {
		family := unix.AF_INET
		if dst.Addr().Is6() && !dst.Addr().Is4In6() {
			family = unix.AF_INET6
		}
		typ, p := unix.SOCK_RAW, proto
		if proto == 0 {
			typ = unix.SOCK_DGRAM
		}
		fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, p)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var sa unix.Sockaddr
		if family == unix.AF_INET {
			sa = &unix.SockaddrInet4{Addr: dst.Addr().Unmap().As4(), Port: int(dst.Port())}
		} else {
			sa = &unix.SockaddrInet6{Addr: dst.Addr().As16(), Port: int(dst.Port())}
		}
		return unix.Sendto(fd, payload, 0, sa)
	}
	if ns == nil {
		return send()
	}
	return ns.Do(send)
}
