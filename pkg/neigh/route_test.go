package neigh

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/netns"
)

// routedHosts is twoHosts with more routes in a: a route with an MTU, one
// with a preferred source, IPv6 routes via b and on the link with an
// MTU, and an IPv4 route via b's IPv6 address.
func routedHosts(t testing.TB) *netns.NS {
	a, _, _ := twoHosts(t)
	for _, args := range [][]string{
		{"route", "add", "198.51.100.0/24", "via", "198.18.0.2", "mtu", "1400"},
		{"route", "add", "198.19.5.0/24", "via", "198.18.0.2", "src", "198.18.0.1"},
		{"route", "add", "198.19.6.0/24", "via", "inet6", "fd00:18::2", "dev", "eth0"},
		{"-6", "route", "add", "fd00:99::/64", "via", "fd00:18::2"},
		{"-6", "route", "add", "fd00:98::/64", "dev", "eth0", "mtu", "1280"},
	} {
		if err := a.Run("ip", args...); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// TestRouteMatchesLibrary: our RTM_GETROUTE gives, for every kind of
// route, what the netlink library's RouteGet gives (interface, gateway,
// preferred source, MTU, or the same error), and what the routes say.
func TestRouteMatchesLibrary(t *testing.T) {
	a := routedHosts(t)
	lib := handleIn(t, a)
	eth0, err := lib.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	p := New(a).NewPass(0)
	defer p.Close()
	tests := []struct {
		name, dst string
		gw, src   string // "" for none
		mtu       int
		errno     syscall.Errno // 0: a route
	}{
		{"on-link ipv4", "198.18.0.2", "", "198.18.0.1", 0, 0},
		{"ipv4 via a gateway", "192.0.2.10", "198.18.0.2", "198.18.0.1", 0, 0},
		{"ipv4 with an mtu", "198.51.100.7", "198.18.0.2", "198.18.0.1", 1400, 0},
		{"ipv4 with a preferred source", "198.19.5.1", "198.18.0.2", "198.18.0.1", 0, 0},
		{"ipv4 via an ipv6 gateway", "198.19.6.1", "fd00:18::2", "198.18.0.1", 0, 0},
		{"on-link ipv6", "fd00:18::2", "", "fd00:18::1", 0, 0},
		{"ipv6 via a gateway", "fd00:99::1", "fd00:18::2", "fd00:18::1", 0, 0},
		{"ipv6 on the link with an mtu", "fd00:98::1", "", "fd00:18::1", 1280, 0},
		{"no ipv4 route", "203.0.113.1", "", "", 0, syscall.ENETUNREACH},
		{"no ipv6 route", "fd00:77::1", "", "", 0, syscall.ENETUNREACH},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := netip.MustParseAddr(tt.dst)
			got, err := p.route(dst)
			want, libErr := lib.RouteGet(net.IP(dst.AsSlice()))
			if tt.errno != 0 {
				if !errors.Is(err, tt.errno) || !errors.Is(libErr, tt.errno) {
					t.Fatalf("errors %v and (library) %v, want %v", err, libErr, tt.errno)
				}
				return
			}
			if err != nil || libErr != nil || len(want) != 1 {
				t.Fatalf("route %v, %v; library %d routes, %v", got, err, len(want), libErr)
			}
			w := want[0]
			libGw := addrOf(w.Gw)
			if w.Via != nil { // the library keeps RTA_VIA apart
				libGw = addrOf(w.Via.(*netlink.Via).Addr)
			}
			if got.oif != w.LinkIndex || got.gw != libGw || got.src != addrOf(w.Src) || got.mtu != w.MTU {
				t.Errorf("route %+v, library's oif %d gw %v src %v mtu %d", got, w.LinkIndex, libGw, w.Src, w.MTU)
			}
			if got.oif != eth0.Attrs().Index || got.gw != addrOr(tt.gw) || got.src != addrOr(tt.src) || got.mtu != tt.mtu {
				t.Errorf("route %+v, want oif %d gw %q src %q mtu %d", got, eth0.Attrs().Index, tt.gw, tt.src, tt.mtu)
			}
		})
	}
	// And the next hop built from it.
	nh, err := p.Route(netip.MustParseAddr("::ffff:198.51.100.7"))
	if err != nil {
		t.Fatal(err)
	}
	if nh.Backend != netip.MustParseAddr("198.51.100.7") || nh.Gateway != netip.MustParseAddr("198.18.0.2") || nh.MTU != 1400 || nh.Ifindex != eth0.Attrs().Index {
		t.Errorf("next hop %+v", nh)
	}
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

func addrOr(s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	return netip.MustParseAddr(s)
}

// TestPassLookupsInParallel: a pass's route lookups run at the same time,
// each on a socket of its own. Every lookup waits, holding its socket,
// until as many are held as the pass is wide; lookups serialised on one
// socket never get there.
func TestPassLookupsInParallel(t *testing.T) {
	a := routedHosts(t)
	const width = 3
	p := New(a).NewPass(width)
	var (
		mu      sync.Mutex
		held    = map[*routeSocket]bool{}
		takes   int
		alone   int // lookups that gave up waiting for the others
		allHeld = make(chan struct{})
	)
	routeTaken = func(s *routeSocket) {
		mu.Lock()
		takes++
		if takes > width { // after the first round
			mu.Unlock()
			return
		}
		held[s] = true
		if takes == width {
			close(allHeld)
		}
		mu.Unlock()
		select {
		case <-allHeld:
		case <-time.After(10 * time.Second): // a guard against a hang, not a timing
			mu.Lock()
			alone++
			mu.Unlock()
		}
	}
	defer func() { routeTaken = nil }()
	var wg sync.WaitGroup
	errs := make(chan error, 2*width)
	for i := range 2 * width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Route(netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)})); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	p.Close()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if alone > 0 {
		t.Fatalf("%d of the first %d lookups waited alone: the pass's lookups are serialised", alone, width)
	}
	if len(held) != width {
		t.Errorf("%d distinct sockets among the %d lookups held at once", len(held), width)
	}
}

// BenchmarkRoute: one route lookup, the netlink library's RouteGet against
// ours, on one goroutine and on every CPU (the library over one handle, as
// a pass used it; ours over the pass's sockets).
func BenchmarkRoute(b *testing.B) {
	a := routedHosts(b)
	lib := handleIn(b, a)
	dst := netip.MustParseAddr("192.0.2.10")
	p := New(a).NewPass(0)
	defer p.Close()
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := lib.RouteGet(net.IP(dst.AsSlice())); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.route(dst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := lib.RouteGet(net.IP(dst.AsSlice())); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("own-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := p.route(dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// routeMessage is an answer to RTM_GETROUTE as the kernel writes it: a
// header, an rtmsg and the attributes a next hop reads (those not given
// are left out), then an attribute it does not read.
func routeMessage(seq uint32, oif, mtu uint32, gw, via, src []byte) []byte {
	ne := binary.NativeEndian
	attr := func(b []byte, typ uint16, v []byte) []byte {
		b = ne.AppendUint16(b, uint16(unix.SizeofRtAttr+len(v)))
		b = ne.AppendUint16(b, typ)
		b = append(b, v...)
		return append(b, make([]byte, align(len(v))-len(v))...)
	}
	b := make([]byte, unix.SizeofNlMsghdr+unix.SizeofRtMsg)
	b = attr(b, unix.RTA_TABLE, ne.AppendUint32(nil, unix.RT_TABLE_MAIN))
	if oif != 0 {
		b = attr(b, unix.RTA_OIF, ne.AppendUint32(nil, oif))
	}
	if gw != nil {
		b = attr(b, unix.RTA_GATEWAY, gw)
	}
	if via != nil {
		b = attr(b, unix.RTA_VIA, append(ne.AppendUint16(nil, unix.AF_INET6), via...))
	}
	if src != nil {
		b = attr(b, unix.RTA_PREFSRC, src)
	}
	if mtu != 0 {
		b = attr(b, unix.RTA_METRICS|unix.NLA_F_NESTED, attr(nil, unix.RTAX_MTU, ne.AppendUint32(nil, mtu)))
	}
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.RTM_NEWROUTE)
	ne.PutUint32(b[8:], seq)
	return b
}

// FuzzRouteAnswer: any bytes on a route socket are parsed without a panic;
// what is not an answer gives neither a route nor an error.
func FuzzRouteAnswer(f *testing.F) {
	v4 := func(s string) []byte { return netip.MustParseAddr(s).AsSlice() }
	f.Add(routeMessage(7, 3, 1400, v4("198.18.0.2"), nil, v4("198.18.0.1")))
	f.Add(routeMessage(7, 3, 0, nil, netip.MustParseAddr("fd00:18::2").AsSlice(), nil))
	f.Add(append(routeMessage(6, 3, 0, nil, nil, nil), routeMessage(7, 4, 0, nil, nil, nil)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &routeSocket{seq: 7}
		rt, done, err := s.parse(b)
		if !done && (err != nil || rt != (route{})) {
			t.Fatalf("no answer, yet route %+v, error %v", rt, err)
		}
		if done && err == nil && len(b) < unix.SizeofNlMsghdr+unix.SizeofRtMsg {
			t.Fatalf("a route %+v from %d bytes", rt, len(b))
		}
	})
}

// FuzzRouteFields: the fields a next hop reads come out of an answer as
// they went in, whatever their values.
func FuzzRouteFields(f *testing.F) {
	f.Add(uint32(3), uint32(1400), []byte{198, 18, 0, 2}, false, []byte{198, 18, 0, 1})
	f.Add(uint32(3), uint32(0), netip.MustParseAddr("fd00:18::2").AsSlice(), true, []byte{198, 18, 0, 1})
	f.Add(uint32(0), uint32(0), []byte(nil), false, []byte(nil))
	f.Fuzz(func(t *testing.T, oif, mtu uint32, gw []byte, viaGw bool, src []byte) {
		gwAddr, gwOK := netip.AddrFromSlice(gw)
		srcAddr, srcOK := netip.AddrFromSlice(src)
		if !gwOK {
			gw = nil
		}
		if !srcOK {
			src = nil
		}
		var b []byte
		if viaGw {
			b = routeMessage(7, oif, mtu, nil, gw, src)
		} else {
			b = routeMessage(7, oif, mtu, gw, nil, src)
		}
		rt, done, err := (&routeSocket{seq: 7}).parse(b)
		if !done || err != nil {
			t.Fatalf("answer not read: %v", err)
		}
		if rt.oif != int(oif) || rt.mtu != int(mtu) || rt.gw != gwAddr || rt.src != srcAddr {
			t.Errorf("route %+v from oif %d mtu %d gw %v src %v", rt, oif, mtu, gwAddr, srcAddr)
		}
	})
}
