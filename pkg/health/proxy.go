package health

import (
	"net"
	"net/netip"
	"strconv"
)

// proxyV1Line is the PROXY protocol v1 header of a probe connection from
// local to remote (the backend): "PROXY TCP4 src dst sport dport\r\n", or
// "PROXY UNKNOWN\r\n" when the addresses are not a pair of one family (a
// dialer may return another kind of connection).
func proxyV1Line(local, remote net.Addr) []byte {
	l, lok := addrPortOf(local)
	r, rok := addrPortOf(remote)
	if !lok || !rok || l.Addr().Is4() != r.Addr().Is4() {
		return []byte("PROXY UNKNOWN\r\n")
	}
	fam := "TCP6"
	if l.Addr().Is4() {
		fam = "TCP4"
	}
	b := make([]byte, 0, 108) // the longest v1 line
	b = append(b, "PROXY "+fam+" "...)
	b = l.Addr().AppendTo(b)
	b = append(b, ' ')
	b = r.Addr().AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(l.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(r.Port()), 10)
	return append(b, "\r\n"...)
}

// addrPortOf reads a socket address, IPv4-mapped addresses as IPv4.
func addrPortOf(a net.Addr) (netip.AddrPort, bool) {
	if a == nil {
		return netip.AddrPort{}, false
	}
	var ap netip.AddrPort
	if ta, ok := a.(*net.TCPAddr); ok {
		ap = ta.AddrPort()
	} else {
		var err error
		if ap, err = netip.ParseAddrPort(a.String()); err != nil {
			return netip.AddrPort{}, false
		}
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	return ap, ap.IsValid()
}
