package probepath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/decap"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/health/healthtest"
	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// The two-namespace bench of these tests, one veth between them:
//
//	appliance ns: eth0 198.18.0.2/24 fd00:18::2/64; default routes and the
//	              tunnel prefixes via the backend (its next hop)
//	backend ns:   eth0 198.18.0.100/24 fd00:18::100/64; on lo the tunnel
//	              addresses 198.18.1.100 fd00:18:1::100 and the VIPs;
//	              pkg/decap; a TCP and a UDP echo server on each VIP
//
// Nothing in the appliance namespace knows the VIPs: only the probe path
// gets packets to them, and the answers come back from the VIP to the
// appliance's own address, as direct server return does.
var (
	appLink4  = netip.MustParseAddr("198.18.0.2")
	appLink6  = netip.MustParseAddr("fd00:18::2")
	beLink4   = netip.MustParseAddr("198.18.0.100")
	beLink6   = netip.MustParseAddr("fd00:18::100")
	beTunnel4 = netip.MustParseAddr("198.18.1.100")
	beTunnel6 = netip.MustParseAddr("fd00:18:1::100")
	testVIP4  = netip.MustParseAddr("203.0.113.10")
	testVIP6  = netip.MustParseAddr("fd00:203:113::10")
)

const echoPort = 7007

type bench struct {
	app, be       *netns.NS
	appMAC, beMAC [6]byte
	decap         *decap.Decap
	mu            sync.Mutex
	templates     map[health.Key]*encap.Template
	routeErr      error
}

func sh(t testing.TB, ns *netns.NS, args ...string) {
	t.Helper()
	if err := ns.Run(args[0], args[1:]...); err != nil {
		t.Fatal(err)
	}
}

func newBench(t testing.TB) *bench {
	testutil.RequireRoot(t)
	b := &bench{app: testutil.NewNetNS(t, "ppa"), be: testutil.NewNetNS(t, "ppb"), templates: map[health.Key]*encap.Template{}}
	for _, ns := range []*netns.NS{b.app, b.be} {
		sh(t, ns, "sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad && echo 0 > /proc/sys/net/ipv6/conf/all/accept_dad")
	}
	sh(t, b.app, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b.be.Name)
	sh(t, b.app, "ip", "addr", "add", "198.18.0.2/24", "dev", "eth0")
	sh(t, b.app, "ip", "addr", "add", "fd00:18::2/64", "dev", "eth0", "nodad")
	sh(t, b.app, "ip", "link", "set", "eth0", "up")
	sh(t, b.app, "ip", "route", "add", "default", "via", beLink4.String())
	sh(t, b.app, "ip", "-6", "route", "add", "default", "via", beLink6.String())
	sh(t, b.be, "ip", "addr", "add", "198.18.0.100/24", "dev", "eth0")
	sh(t, b.be, "ip", "addr", "add", "fd00:18::100/64", "dev", "eth0", "nodad")
	sh(t, b.be, "ip", "link", "set", "eth0", "up")
	for _, a := range []string{"198.18.1.100/32", "fd00:18:1::100/128", "203.0.113.10/32", "fd00:203:113::10/128"} {
		sh(t, b.be, "ip", "addr", "add", a, "dev", "lo")
	}
	sh(t, b.be, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0")
	b.appMAC, b.beMAC = linkMAC(t, b.app), linkMAC(t, b.be)
	b.startDecap(t)
	for _, vip := range []netip.Addr{testVIP4, testVIP6} {
		b.echo(t, netip.AddrPortFrom(vip, echoPort))
	}
	return b
}

func linkMAC(t testing.TB, ns *netns.NS) (mac [6]byte) {
	t.Helper()
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		copy(mac[:], l.Attrs().HardwareAddr)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

func (b *bench) startDecap(t testing.TB) {
	t.Helper()
	d, err := decap.Start(decap.Options{Namespace: b.be, TUN: "ppdecap0"})
	if err != nil {
		t.Fatal(err)
	}
	b.decap = d
	t.Cleanup(func() { b.stopDecap() })
}

func (b *bench) stopDecap() {
	if b.decap != nil {
		b.decap.Close()
		b.decap = nil
	}
}

// echo serves TCP and UDP echo on addr inside the backend until the test ends.
func (b *bench) echo(t testing.TB, addr netip.AddrPort) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	if err := b.be.Do(func() (err error) {
		if ln, err = net.Listen("tcp", addr.String()); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", addr.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
}

// template is what the daemon would build for backend with kind: the
// appliance's MAC and address, the backend's MAC (the next hop) and
// tunnel address, MTU 1500.
func (b *bench) template(t *testing.T, kind encap.Kind, v4 bool, mtu int) *encap.Template {
	t.Helper()
	s := encap.Spec{Kind: kind, SrcMAC: b.appMAC, DstMAC: b.beMAC, Src: appLink4, Dst: beTunnel4, MTU: mtu}
	if !v4 {
		s.Src, s.Dst = appLink6, beTunnel6
	}
	if kind == encap.Direct {
		s.Dst = beLink4
		if !v4 {
			s.Dst = beLink6
		}
	}
	tm, err := encap.NewTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func (b *bench) routes(k health.Key) (Route, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.routeErr != nil {
		return Route{}, b.routeErr
	}
	tm := b.templates[k]
	vip := testVIP4
	if k.Backend.Is6() {
		vip = testVIP6
	}
	return Route{VIP: vip, Template: tm, Seed: 0x1ab5eed}, nil
}

func (b *bench) setTemplate(k health.Key, tm *encap.Template) {
	b.mu.Lock()
	b.templates[k] = tm
	b.mu.Unlock()
}

func (b *bench) open(t testing.TB) *Path {
	t.Helper()
	p, err := Open(Options{Interface: "eth0", Routes: b.routes, Namespace: b.app})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}

// exchange sends a line over a probe connection of network and reads the
// echo within timeout.
func exchange(p *Path, network string, k health.Key, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := p.Dial(ctx, network, k, netip.AddrPortFrom(k.Backend, echoPort))
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	msg := []byte("probe " + k.String())
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != string(msg) {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

// TestProbesReachTheVIPThroughEveryEncapsulation: TCP and UDP probes of
// IPv4 and IPv6 targets, through IPIP, GUE, GRE and DIRECT, reach a server
// bound to the VIP on the backend and get its answer, which comes back
// from the VIP by direct server return; without the VIP on the backend's
// loopback, or without its decapsulation, the same probes get nothing,
// and say so; fixed, they pass again.
func TestProbesReachTheVIPThroughEveryEncapsulation(t *testing.T) {
	b := newBench(t)
	p := b.open(t)
	for _, kind := range []encap.Kind{encap.IPIP, encap.GUE, encap.GRE, encap.Direct} {
		for _, v4 := range []bool{true, false} {
			k := health.Key{Rule: fmt.Sprintf("%s-v%d", kind, map[bool]int{true: 4, false: 6}[v4]), Backend: beTunnel4}
			if !v4 {
				k.Backend = beTunnel6
			}
			b.setTemplate(k, b.template(t, kind, v4, 1500))
			for _, network := range []string{"tcp", "udp"} {
				if err := exchange(p, network, k, 5*time.Second); err != nil {
					t.Errorf("%s %s: %v", k, network, err)
				}
			}
		}
	}
	if s := p.Stats(); s.Sent == 0 || s.NoRoute != 0 || s.TooBig != 0 || s.Failed != 0 {
		t.Errorf("stats %+v", s)
	}
	if t.Failed() {
		return
	}

	// No VIP on the backend's loopback: every encapsulation arrives and is
	// dropped by the backend's kernel (not its address, no forwarding).
	k4 := health.Key{Rule: "IPIP-v4", Backend: beTunnel4}
	kd := health.Key{Rule: "DIRECT-v4", Backend: beTunnel4}
	sh(t, b.be, "ip", "addr", "del", "203.0.113.10/32", "dev", "lo")
	for _, k := range []health.Key{k4, kd} {
		err := exchange(p, "tcp", k, time.Second)
		var pe *PathError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "no answer to") {
			t.Errorf("%s without the VIP on lo: %v, want a timeout the data path explains", k, err)
		}
	}
	sh(t, b.be, "ip", "addr", "add", "203.0.113.10/32", "dev", "lo")
	waitPass(t, p, "tcp", k4)
	waitPass(t, p, "tcp", kd)

	// No decapsulation: tunnelled probes die; DIRECT needs none.
	b.stopDecap()
	if err := exchange(p, "tcp", k4, time.Second); err == nil {
		t.Errorf("%s passes without decapsulation on the backend", k4)
	}
	if err := exchange(p, "udp", k4, time.Second); err == nil {
		t.Errorf("%s (udp) passes without decapsulation on the backend", k4)
	}
	waitPass(t, p, "tcp", kd)
	b.startDecap(t)
	waitPass(t, p, "tcp", k4)
}

// waitPass retries a probe for a few seconds: a fixed backend may need a
// moment (its TUN coming up, neighbour entries).
func waitPass(t *testing.T, p *Path, network string, k health.Key) {
	t.Helper()
	var err error
	for range 10 {
		if err = exchange(p, network, k, time.Second); err == nil {
			return
		}
	}
	t.Errorf("%s %s still fails: %v", k, network, err)
}

// TestNoRouteSaysWhy: a target without a template or with a route error
// fails at once, naming the reason; a packet too big for the backend's
// path is not sent and the probe's error says so.
func TestNoRouteSaysWhy(t *testing.T) {
	b := newBench(t)
	p := b.open(t)
	k := health.Key{Rule: "web", Backend: beTunnel4}
	err := exchange(p, "tcp", k, time.Second)
	if err == nil || !strings.Contains(err.Error(), "no encapsulation template") {
		t.Errorf("without a template: %v", err)
	}
	b.mu.Lock()
	b.routeErr = errors.New("next hop of 198.18.1.100 unresolved: no route")
	b.mu.Unlock()
	err = exchange(p, "tcp", k, time.Second)
	if err == nil || !strings.Contains(err.Error(), "next hop of 198.18.1.100 unresolved") {
		t.Errorf("with no next hop: %v", err)
	}
	b.mu.Lock()
	b.routeErr = nil
	b.mu.Unlock()

	// A path MTU of 576 leaves 556 bytes inside IPIP: a UDP probe of 1000
	// bytes (the TUN's MTU lets it through) does not fit.
	b.setTemplate(k, b.template(t, encap.IPIP, true, 576))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := p.Dial(ctx, "udp", k, netip.AddrPortFrom(k.Backend, echoPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	c.Write(make([]byte, 1000))
	_, err = c.Read(make([]byte, 2000))
	if err == nil || !strings.Contains(err.Error(), "does not fit the IPIP path to 198.18.1.100 (MTU 576 leaves 556 bytes inside)") {
		t.Errorf("too big: %v", err)
	}
	if p.Stats().TooBig == 0 {
		t.Errorf("stats %+v: no too-big packet counted", p.Stats())
	}
}

// TestSlotsAndLeftovers: two paths in one namespace (a daemon and its
// successor during a hand-over) take two slots and work side by side;
// closing one leaves the other working; the policy rules crashed daemons
// left are replaced (the slot taken) or removed (another slot without its
// TUN), and Close removes what Open made.
func TestSlotsAndLeftovers(t *testing.T) {
	b := newBench(t)
	// What crashes leave: rules of slots 0 and 5, without their TUNs.
	for _, slot := range []uint32{0, 5} {
		sh(t, b.app, "ip", "rule", "add", "pref", "1000", "fwmark", fmt.Sprintf("%#x", MarkBase+slot), "lookup", fmt.Sprint(MarkBase+slot))
		sh(t, b.app, "ip", "-6", "rule", "add", "pref", "1000", "fwmark", fmt.Sprintf("%#x", MarkBase+slot), "lookup", fmt.Sprint(MarkBase+slot))
	}
	k := health.Key{Rule: "web", Backend: beTunnel4}
	b.setTemplate(k, b.template(t, encap.GUE, true, 1500))

	p0, err := Open(Options{Interface: "eth0", Routes: b.routes, Namespace: b.app})
	if err != nil {
		t.Fatal(err)
	}
	defer p0.Close()
	p1, err := Open(Options{Interface: "eth0", Routes: b.routes, Namespace: b.app})
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	if p0.Name() != TUNPrefix+"0" || p1.Name() != TUNPrefix+"1" || p0.Mark() == p1.Mark() {
		t.Fatalf("paths %s (%#x) and %s (%#x)", p0.Name(), p0.Mark(), p1.Name(), p1.Mark())
	}
	if n := countRules(t, b.app, MarkBase); n != 2 { // IPv4 and IPv6
		t.Errorf("%d rules with slot 0's mark after Open, want 2 (the leftovers replaced)", n)
	}
	if n := countRules(t, b.app, MarkBase+5); n != 0 {
		t.Errorf("%d rules with slot 5's mark after Open, want none (its TUN is gone)", n)
	}
	if mtu := p0.MTU(); mtu != 1500-MaxOverhead {
		t.Errorf("TUN MTU %d, want %d", mtu, 1500-MaxOverhead)
	}
	for _, p := range []*Path{p0, p1} {
		if err := exchange(p, "tcp", k, 5*time.Second); err != nil {
			t.Errorf("%s: %v", p.Name(), err)
		}
	}
	if err := p0.Close(); err != nil {
		t.Fatal(err)
	}
	if n := countRules(t, b.app, MarkBase); n != 0 {
		t.Errorf("%d rules with slot 0's mark after Close", n)
	}
	if out, _ := b.app.Output("ip", "link", "show", TUNPrefix+"0"); out != "" {
		t.Errorf("%s still exists after Close: %s", TUNPrefix+"0", out)
	}
	if err := exchange(p1, "tcp", k, 5*time.Second); err != nil {
		t.Errorf("%s after the other closed: %v", p1.Name(), err)
	}
}

func countRules(t *testing.T, ns *netns.NS, mark uint32) int {
	t.Helper()
	n := 0
	for _, fam := range []string{"-4", "-6"} {
		out, err := ns.Output("ip", fam, "rule", "show")
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(out, fmt.Sprintf("fwmark %#x", mark))
	}
	return n
}

// kindCase is a health check of one kind and the server that answers it
// in the backend.
type kindCase struct {
	name  string
	check health.Check
}

// startKindServers starts a server of every kind in the backend, on the
// wildcard address (TCP kinds: the accepted connection's address is the
// VIP the probe went to) or, for UDP, on each VIP (an answer must leave
// from the address the datagram came to), and returns the checks that
// probe them.
func (b *bench) startKindServers(t *testing.T) []kindCase {
	t.Helper()
	cert, err := healthtest.Cert()
	if err != nil {
		t.Fatal(err)
	}
	listen := func(port int) net.Listener {
		var ln net.Listener
		if err := b.be.Do(func() (err error) {
			ln, err = net.Listen("tcp", fmt.Sprintf("[::]:%d", port))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ln
	}
	var servers []*healthtest.Server
	servers = append(servers,
		healthtest.HTTP(listen(8080), nil, false),
		healthtest.HTTP(listen(8443), cert, false),
		healthtest.HTTP2(listen(8444), cert, false),
		healthtest.HTTP2(listen(8081), nil, false),
		healthtest.Stream(listen(9000), nil, false, false),
		healthtest.Stream(listen(9443), cert, false, false),
		healthtest.GRPC(listen(50051), nil, false))
	for _, vip := range []netip.Addr{testVIP4, testVIP6} {
		var pc net.PacketConn
		if err := b.be.Do(func() (err error) {
			pc, err = net.ListenPacket("udp", netip.AddrPortFrom(vip, 9053).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, healthtest.UDP(pc))
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Close()
		}
	})
	every := health.Check{Interval: time.Second, Timeout: time.Second, HealthyThreshold: 1, UnhealthyThreshold: 2}
	with := func(f func(c *health.Check)) health.Check {
		c := every
		f(&c)
		return c
	}
	return []kindCase{
		{"HTTP", with(func(c *health.Check) { c.Kind, c.Port, c.Response = health.HTTP, 8080, healthtest.BodyText })},
		{"HTTPS", with(func(c *health.Check) { c.Kind, c.Port = health.HTTPS, 8443 })},
		{"HTTP2", with(func(c *health.Check) { c.Kind, c.Port, c.TLS = health.HTTP2, 8444, true })},
		{"HTTP2-h2c", with(func(c *health.Check) { c.Kind, c.Port = health.HTTP2, 8081 })},
		{"TCP", with(func(c *health.Check) {
			c.Kind, c.Port, c.Request, c.Response = health.TCP, 9000, healthtest.Request, healthtest.Answer
		})},
		{"SSL", with(func(c *health.Check) {
			c.Kind, c.Port, c.Request, c.Response = health.SSL, 9443, healthtest.Request, healthtest.Answer
		})},
		{"GRPC", with(func(c *health.Check) { c.Kind, c.Port, c.GRPCServiceName = health.GRPC, 50051, healthtest.Service })},
		{"UDP", with(func(c *health.Check) {
			c.Kind, c.Port, c.Request, c.Response = health.UDP, 9053, healthtest.Request, healthtest.Answer
		})},
	}
}

// TestEveryCheckKindThroughTheDataPath: a pkg/health checker dialling
// through the path finds a backend of each kind HEALTHY over IPv4 and
// IPv6, each kind through another encapsulation; without the VIP on the
// backend's loopback every one turns UNHEALTHY with the data path's
// explanation in its error, and HEALTHY again once the VIP is back.
func TestEveryCheckKindThroughTheDataPath(t *testing.T) {
	b := newBench(t)
	p := b.open(t)
	kinds := []encap.Kind{encap.IPIP, encap.GUE, encap.GRE, encap.Direct}
	var targets []health.Target
	for i, kc := range b.startKindServers(t) {
		for _, v4 := range []bool{true, false} {
			k := health.Key{Rule: kc.name, Backend: beTunnel4}
			if !v4 {
				k.Backend = beTunnel6
			}
			b.setTemplate(k, b.template(t, kinds[i%len(kinds)], v4, 1500))
			targets = append(targets, health.Target{Key: k, Check: kc.check})
		}
	}
	c := health.New(health.Options{Dial: p.Dial})
	defer c.Stop()
	if err := c.Set(targets); err != nil {
		t.Fatal(err)
	}
	waitAll := func(want failover.Health, why string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var off []string
			for _, s := range c.Status() {
				// gRPC gives up waiting for its connection and reports
				// that, not the dial's error: no explanation to look for.
				explained := why == "" || s.Rule == "GRPC" || (s.LastError != nil && strings.Contains(s.LastError.Error(), why))
				if s.Health != want || !explained {
					off = append(off, s.String())
				}
			}
			if len(off) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not %s (%q) after 30s:\n%s", want, why, strings.Join(off, "\n"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitAll(failover.HealthHealthy, "")
	sh(t, b.be, "ip", "addr", "del", "203.0.113.10/32", "dev", "lo")
	sh(t, b.be, "ip", "addr", "del", "fd00:203:113::10/128", "dev", "lo")
	waitAll(failover.HealthUnhealthy, "(data path: ")
	sh(t, b.be, "ip", "addr", "add", "203.0.113.10/32", "dev", "lo")
	sh(t, b.be, "ip", "addr", "add", "fd00:203:113::10/128", "dev", "lo", "nodad")
	waitAll(failover.HealthHealthy, "")
}

// TestPortsAreSharedAcrossVIPs: probes that close first leave TIME_WAIT
// behind, a minute per port. With 100 ephemeral ports, 270 connect-and-
// close probes to three VIP ports (90 each) all pass: a probe's port is
// unique per 4-tuple, as a direct probe's, not per address (a port bound
// before connect would have run out after 100).
func TestPortsAreSharedAcrossVIPs(t *testing.T) {
	b := newBench(t)
	sh(t, b.app, "sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40099")
	for _, port := range []uint16{7101, 7102, 7103} {
		b.echo(t, netip.AddrPortFrom(testVIP4, port))
	}
	p := b.open(t)
	k := health.Key{Rule: "web", Backend: beTunnel4}
	b.setTemplate(k, b.template(t, encap.IPIP, true, 1500))
	for _, port := range []uint16{7101, 7102, 7103} {
		for i := range 90 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := p.Dial(ctx, "tcp", k, netip.AddrPortFrom(k.Backend, port))
			cancel()
			if err != nil {
				t.Fatalf("probe %d to port %d: %v", i, port, err)
			}
			c.Close()
		}
	}
	t.Logf("stats %+v", p.Stats())
}
