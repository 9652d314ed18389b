package decap_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/decap"
	"github.com/xlbnet/xlb/pkg/decap/decaptest"
	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// Addresses of the two-namespace test topology:
//
//	sender ns: eth0 198.18.0.2/24 fd00:18::2/64, clients on lo
//	           198.51.100.7 fd00:51::7, default route via the backend
//	backend ns: eth0 198.18.0.100/24 fd00:18::100/64, VIPs on lo (by decap),
//	           routes to the clients via the sender
var (
	senderLink4  = netip.MustParseAddr("198.18.0.2")
	senderLink6  = netip.MustParseAddr("fd00:18::2")
	backendLink4 = netip.MustParseAddr("198.18.0.100")
	backendLink6 = netip.MustParseAddr("fd00:18::100")
	client4      = netip.MustParseAddr("198.51.100.7")
	client6      = netip.MustParseAddr("fd00:51::7")
	vip4         = netip.MustParseAddr("203.0.113.10")
	vip6         = netip.MustParseAddr("fd00:203:113::10")
)

const echoPort = 7

func run(t *testing.T, ns *netns.NS, args ...string) {
	t.Helper()
	if err := ns.Run(args[0], args[1:]...); err != nil {
		t.Fatal(err)
	}
}

// topology builds sender and backend namespaces joined by a veth.
func topology(t *testing.T) (sender, backend *netns.NS) {
	sender = testutil.NewNetNS(t, "dcs")
	backend = testutil.NewNetNS(t, "dcb")
	for _, ns := range []*netns.NS{sender, backend} {
		// No duplicate address detection: a tentative link-local address
		// delays neighbour discovery by seconds.
		run(t, ns, "sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad && echo 0 > /proc/sys/net/ipv6/conf/all/accept_dad")
	}
	run(t, sender, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", backend.Name)
	run(t, sender, "ip", "addr", "add", "198.18.0.2/24", "dev", "eth0")
	run(t, sender, "ip", "addr", "add", "fd00:18::2/64", "dev", "eth0", "nodad")
	run(t, sender, "ip", "addr", "add", "198.51.100.7/32", "dev", "lo")
	run(t, sender, "ip", "addr", "add", "fd00:51::7/128", "dev", "lo", "nodad")
	run(t, sender, "ip", "link", "set", "eth0", "up")
	run(t, sender, "ip", "route", "add", "default", "via", "198.18.0.100")
	run(t, sender, "ip", "-6", "route", "add", "default", "via", "fd00:18::100")
	run(t, backend, "ip", "addr", "add", "198.18.0.100/24", "dev", "eth0")
	run(t, backend, "ip", "addr", "add", "fd00:18::100/64", "dev", "eth0", "nodad")
	run(t, backend, "ip", "link", "set", "eth0", "up")
	run(t, backend, "ip", "route", "add", "198.51.100.0/24", "via", "198.18.0.2")
	run(t, backend, "ip", "-6", "route", "add", "fd00:51::/64", "via", "fd00:18::2")
	return sender, backend
}

// echo serves UDP echo on addr inside ns until the test ends.
func echo(t *testing.T, ns *netns.NS, addr netip.AddrPort) {
	t.Helper()
	var c *net.UDPConn
	err := ns.Do(func() (err error) {
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		return err
	})
	if err != nil {
		t.Fatalf("listen echo %v: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
}

func TestDecapDeliversToVIP(t *testing.T) {
	testutil.RequireRoot(t)
	sender, backend := topology(t)

	d, err := decap.Start(decap.Options{Namespace: backend, TUN: testutil.Unique("dct"), VIPs: []netip.Addr{vip4, vip6}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close decap: %v", err)
		}
	})
	// The IPv6 VIP is never tentative: the echo server binds it at once.
	// (Without nodad it is until the kernel's DAD work runs, and the bind
	// failed under load: cannot assign requested address.)
	if err := backend.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(lo, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if ip, _ := netip.AddrFromSlice(a.IP); ip == vip6 {
				if a.Flags&unix.IFA_F_NODAD == 0 {
					return fmt.Errorf("VIP %v on lo with flags %#x, want nodad", vip6, a.Flags)
				}
				return nil
			}
		}
		return fmt.Errorf("VIP %v not on lo: %v", vip6, addrs)
	}); err != nil {
		t.Fatal(err)
	}
	echo(t, backend, netip.AddrPortFrom(vip4, echoPort))
	echo(t, backend, netip.AddrPortFrom(vip6, echoPort))

	gue4 := netip.AddrPortFrom(backendLink4, decap.DefaultGUEPort)
	gue6 := netip.AddrPortFrom(backendLink6, decap.DefaultGUEPort)
	raw4 := netip.AddrPortFrom(backendLink4, 0)
	raw6 := netip.AddrPortFrom(backendLink6, 0)
	key := uint32(42)
	tests := []struct {
		name   string
		client netip.Addr
		vip    netip.Addr
		proto  int // outer protocol; 0 = GUE over UDP
		dst    netip.AddrPort
		wrap   func(inner []byte) []byte
	}{
		{"ipip 4in4", client4, vip4, decaptest.ProtoIPIP, raw4, nil},
		{"ipip 6in4", client6, vip6, decaptest.ProtoIPv6, raw4, nil},
		{"ipip 4in6", client4, vip4, decaptest.ProtoIPIP, raw6, nil},
		{"ipip 6in6", client6, vip6, decaptest.ProtoIPv6, raw6, nil},
		{"gre over ipv4", client4, vip4, decaptest.ProtoGRE, raw4, func(b []byte) []byte { return decaptest.GRE(b, decaptest.GREOptions{}) }},
		{"gre over ipv6 with checksum and key", client6, vip6, decaptest.ProtoGRE, raw6, func(b []byte) []byte {
			return decaptest.GRE(b, decaptest.GREOptions{Checksum: true, Key: &key})
		}},
		{"gue variant 1 over ipv4", client4, vip4, 0, gue4, nil},
		{"gue variant 1 over ipv6", client6, vip6, 0, gue6, nil},
		{"gue variant 0 over ipv4", client4, vip4, 0, gue4, decaptest.GUE0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c *net.UDPConn
			err := sender.Do(func() (err error) {
				c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tt.client, 0)))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			src := netip.MustParseAddrPort(c.LocalAddr().String())
			payload := []byte(fmt.Sprintf("probe %d %s", i, tt.name))
			inner := decaptest.UDP(src, netip.AddrPortFrom(tt.vip, echoPort), uint16(i), payload)
			if tt.wrap != nil {
				inner = tt.wrap(inner)
			}
			buf := make([]byte, 2048)
			// Retry a few times: the first packet may wait for neighbour discovery.
			for attempt := 0; ; attempt++ {
				if err := decaptest.Send(sender, tt.proto, tt.dst, inner); err != nil {
					t.Fatalf("send: %v", err)
				}
				c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() && attempt < 5 {
						continue
					}
					t.Fatalf("no echo reply (counters %v): %v", d.Counters(), err)
				}
				if from.Addr().Unmap() != tt.vip || from.Port() != echoPort {
					t.Fatalf("reply from %v, want %v:%d (DSR: source must be the VIP)", from, tt.vip, echoPort)
				}
				if !bytes.Equal(buf[:n], payload) {
					t.Fatalf("reply %q, want %q", buf[:n], payload)
				}
				return
			}
		})
	}

	// Malformed input is dropped and counted, and decap keeps working.
	before := d.Counters()
	garbage := [][]byte{{0xf0, 1, 2, 3}, {0x00, 0x00, 0x00, 0x00}, {0x45}}
	for _, g := range garbage {
		if err := decaptest.Send(sender, 0, gue4, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := decaptest.Send(sender, decaptest.ProtoGRE, raw4, []byte{0, 1, 0x08, 0}); err != nil { // GRE version 1
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for d.Counters().Dropped() < before.Dropped()+4 {
		if time.Now().After(deadline) {
			t.Fatalf("malformed packets not counted: before %v, after %v", before, d.Counters())
		}
		time.Sleep(20 * time.Millisecond)
	}
	after := d.Counters()
	if after.Drops[decap.DropGREVersion] != before.Drops[decap.DropGREVersion]+1 {
		t.Errorf("gre_version drops %d → %d, want +1", before.Drops[decap.DropGREVersion], after.Drops[decap.DropGREVersion])
	}
	if after.Delivered < uint64(len(tests)) {
		t.Errorf("delivered %d, want ≥ %d", after.Delivered, len(tests))
	}
	t.Logf("counters: %v", after)
}

func TestDecapCloseRemovesTUNAndVIPs(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t, "dcc")
	name := testutil.Unique("dct")
	d, err := decap.Start(decap.Options{Namespace: ns, TUN: name, VIPs: []netip.Addr{vip4}, Encaps: []decap.Encap{decap.GUE}, IPv4Only: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ns.Output("ip", "-o", "addr", "show", "dev", "lo")
	if err != nil || !bytes.Contains([]byte(out), []byte("203.0.113.10/32")) {
		t.Fatalf("vip not on lo: %q %v", out, err)
	}
	if _, err := ns.Output("ip", "link", "show", name); err != nil {
		t.Fatalf("tun missing: %v", err)
	}
	rp, _ := ns.Output("cat", "/proc/sys/net/ipv4/conf/"+name+"/rp_filter")
	if rp != "0\n" {
		t.Fatalf("rp_filter on tun = %q, want 0", rp)
	}
	// A second decapsulator with the same TUN in the same namespace would
	// deliver every raw-socket packet twice: refused.
	if d2, err := decap.Start(decap.Options{Namespace: ns, TUN: name, Encaps: []decap.Encap{decap.IPIP}, IPv4Only: true, NoHostConfig: true}); err == nil {
		d2.Close()
		t.Fatal("second decap on the same TUN started")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := ns.Output("ip", "link", "show", name); err == nil {
		t.Fatal("tun still exists after Close")
	}
	out, _ = ns.Output("ip", "-o", "addr", "show", "dev", "lo")
	if bytes.Contains([]byte(out), []byte("203.0.113.10")) {
		t.Fatalf("vip still on lo after Close: %q", out)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	for name, o := range map[string]decap.Options{
		"long tun name":  {TUN: "this-name-is-too-long"},
		"small mtu":      {MTU: 576},
		"bad encap":      {Encaps: []decap.Encap{9}},
		"v6 vip on v4":   {IPv4Only: true, VIPs: []netip.Addr{vip6}},
		"unspecified ip": {VIPs: []netip.Addr{netip.IPv4Unspecified()}},
	} {
		if _, err := decap.Start(o); err == nil {
			t.Errorf("%s: Start accepted %+v", name, o)
		}
	}
}

func TestParseEncap(t *testing.T) {
	for _, s := range []string{"ipip", "GRE", "Gue"} {
		e, err := decap.ParseEncap(s)
		if err != nil || !bytes.EqualFold([]byte(e.String()), []byte(s)) {
			t.Errorf("ParseEncap(%q) = %v, %v", s, e, err)
		}
	}
	if _, err := decap.ParseEncap("vxlan"); err == nil {
		t.Error("ParseEncap(vxlan) succeeded")
	}
}

// BenchmarkDecapGUE measures the whole receive path through the kernel:
// GUE datagrams from the sender namespace → decap's UDP socket → TUN →
// a UDP socket bound to the VIP. It reports what reached the VIP socket.
func BenchmarkDecapGUE(b *testing.B) {
	testutil.RequireRoot(b)
	sender, backend := benchTopology(b)
	d, err := decap.Start(decap.Options{Namespace: backend, TUN: testutil.Unique("dct"), VIPs: []netip.Addr{vip4}, Encaps: []decap.Encap{decap.GUE}, IPv4Only: true})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var sink *net.UDPConn
	if err := backend.Do(func() (err error) {
		sink, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(vip4, echoPort)))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	sink.SetReadBuffer(8 << 20)
	var got atomic.Uint64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := sink.Read(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	var fd int
	if err := sender.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	pkt := decaptest.UDP(netip.AddrPortFrom(client4, 40000), netip.AddrPortFrom(vip4, echoPort), 1, make([]byte, 64))
	sa := &unix.SockaddrInet4{Addr: backendLink4.As4(), Port: decap.DefaultGUEPort}
	b.ReportAllocs()
	start := time.Now()
	sent := 0
	for b.Loop() {
		if unix.Sendto(fd, pkt, 0, sa) == nil {
			sent++
		}
	}
	// Wait until everything arrived or nothing moved for 50 ms (the rest
	// was dropped under overload: the sender is faster than the receive
	// path on a shared core); give the very first packet, which waits for
	// ARP, a second.
	n, last := got.Load(), time.Now()
	stall := func() time.Duration {
		if n == 0 {
			return time.Second
		}
		return 50 * time.Millisecond
	}
	for n < uint64(sent) && time.Since(last) < stall() {
		time.Sleep(time.Millisecond)
		if m := got.Load(); m != n {
			n, last = m, time.Now()
		}
	}
	elapsed := last.Sub(start)
	if n == 0 {
		b.Fatalf("nothing delivered (counters %v)", d.Counters())
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/pkt")
	b.ReportMetric(float64(n)/float64(sent)*100, "%delivered")
	b.Logf("sent %d, decap %v, at the VIP socket %d", sent, d.Counters(), n)
}

// benchTopology is topology for benchmarks.
func benchTopology(b *testing.B) (sender, backend *netns.NS) {
	sender = testutil.NewNetNS(b, "dcs")
	backend = testutil.NewNetNS(b, "dcb")
	must := func(ns *netns.NS, args ...string) {
		if err := ns.Run(args[0], args[1:]...); err != nil {
			b.Fatal(err)
		}
	}
	must(sender, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", backend.Name)
	must(sender, "ip", "addr", "add", "198.18.0.2/24", "dev", "eth0")
	must(sender, "ip", "link", "set", "eth0", "up")
	must(backend, "ip", "addr", "add", "198.18.0.100/24", "dev", "eth0")
	must(backend, "ip", "link", "set", "eth0", "up")
	must(backend, "ip", "route", "add", "198.51.100.0/24", "via", "198.18.0.2")
	return sender, backend
}
