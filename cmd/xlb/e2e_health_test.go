package main

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/xlbnet/xlb/pkg/health/healthtest"
	"github.com/xlbnet/xlb/pkg/lab"
)

// Ports of the check servers the test starts in every backend namespace,
// on the backends' tunnel addresses (where IPIP rules probe).
const (
	grpcCheckPort = 50051
	h2CheckPort   = 8443
	h2cCheckPort  = 8081
	udpCheckPort  = 9053
)

// checkServers are one backend's servers of each kind.
type checkServers struct {
	grpc, h2, h2c, udp *healthtest.Server
}

// startCheckServers starts a gRPC health server, an HTTP/2 server over TLS,
// an h2c server expecting PROXY v1 lines and a UDP answerer inside b's
// namespace, stopped when the test ends.
func startCheckServers(t *testing.T, b *lab.Backend) checkServers {
	t.Helper()
	cert, err := healthtest.Cert()
	if err != nil {
		t.Fatal(err)
	}
	listen := func(a netip.Addr, port int) net.Listener {
		var ln net.Listener
		if err := b.NS.Do(func() (err error) {
			ln, err = net.Listen("tcp", net.JoinHostPort(a.String(), strconv.Itoa(port)))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ln
	}
	var pc net.PacketConn
	if err := b.NS.Do(func() (err error) {
		pc, err = net.ListenPacket("udp", net.JoinHostPort(b.Tunnel4.String(), strconv.Itoa(udpCheckPort)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := checkServers{
		grpc: healthtest.GRPC(listen(b.Tunnel4, grpcCheckPort), nil, false),
		h2:   healthtest.HTTP2(listen(b.Tunnel6, h2CheckPort), cert, false),
		h2c:  healthtest.HTTP2(listen(b.Tunnel6, h2cCheckPort), nil, true),
		udp:  healthtest.UDP(pc),
	}
	t.Cleanup(func() {
		for _, srv := range []*healthtest.Server{s.grpc, s.h2, s.h2c, s.udp} {
			srv.Close()
		}
	})
	return s
}

// TestEndToEndHealthCheckKinds: the daemon marks backends by GRPC, UDP and
// HTTP2 (TLS, and h2c with PROXY_V1) checks against real servers in the
// backends' namespaces, over the lab's links, and traffic follows: each
// rule's backend whose server answers wrong or not at all turns UNHEALTHY
// and gets no new connections, and HEALTHY again once it answers right.
func TestEndToEndHealthCheckKinds(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 3})
	servers := make([]checkServers, len(l.Backends))
	for i, b := range l.Backends {
		servers[i] = startCheckServers(t, b)
	}
	every := "interval = \"1s\"\ntimeout = \"1s\"\nhealthy_threshold = 1\nunhealthy_threshold = 2\n"
	rules := l.DefaultRules("IPIP")
	rules[0].Health = fmt.Sprintf("type = \"GRPC\"\nport = %d\ngrpc_service_name = %q\n%s", grpcCheckPort, healthtest.Service, every)
	rules[1].Health = fmt.Sprintf("type = \"HTTP2\"\nport = %d\nresponse = %q\n%s", h2CheckPort, healthtest.BodyText, every)
	rules[2].Health = fmt.Sprintf("type = \"UDP\"\nport = %d\nrequest = %q\nresponse = %q\n%s", udpCheckPort, healthtest.Request, healthtest.Answer, every)
	rules[3].Health = fmt.Sprintf("type = \"HTTP2\"\ntls = false\nport = %d\nproxy_header = \"PROXY_V1\"\n%s", h2cCheckPort, every)
	x := xlbIn(t, l, rules)

	all := []int{0, 1, 2}
	for _, r := range rules {
		waitHealth(t, l, x, r.Name, "HEALTHY", all...)
	}

	// One backend of each rule answers wrong or stays silent.
	servers[0].grpc.Set(healthtest.Wrong) // web4: NOT_SERVING
	servers[2].h2.Set(healthtest.Silent)  // web6: no answer
	servers[1].udp.Set(healthtest.Wrong)  // udp4: another datagram
	servers[0].h2c.Set(healthtest.Wrong)  // udp6: status 503
	down := map[string]int{"web4": 0, "web6": 2, "udp4": 1, "udp6": 0}
	for rule, i := range down {
		waitHealth(t, l, x, rule, "UNHEALTHY", i)
		var up []int
		for _, j := range all {
			if j != i {
				up = append(up, j)
			}
		}
		waitHealth(t, l, x, rule, "HEALTHY", up...)
	}

	// New connections avoid them, on real packets through the appliance.
	for fam, idx := range map[int]int{4: 0, 6: 2} {
		res := drive(t, l, 150, fam)
		if !res.OK() || res.PerBackend[idx] != 0 {
			t.Errorf("IPv%d with be%d unhealthy: %s", fam, idx, describe(res))
		}
	}
	dst := netip.AddrPortFrom(vipOf(l, 4), l.Opts.UDPPort)
	seen := map[int]int{}
	for _, src := range clientsOf(l, 4)[:60] {
		seen[openUDPFlow(t, l, src, dst).who(16)]++
	}
	if seen[1] != 0 || seen[-1] != 0 || seen[0] == 0 || seen[2] == 0 {
		t.Errorf("UDP flows from 60 sources with be1 unhealthy: %v (backend → flows, -1 unanswered)", seen)
	}

	// Every h2c probe carried a PROXY v1 line naming its own connection.
	for i, s := range servers {
		lines := s.h2c.Proxy.Lines()
		if len(lines) == 0 {
			t.Errorf("be%d: the h2c server saw no PROXY line", i)
		}
		for _, pl := range lines {
			if !pl.MatchesSockets {
				t.Errorf("be%d: PROXY line %q on a connection %s → %s", i, pl.Line, pl.Remote, pl.Local)
			}
		}
	}

	// Fixed, they come back.
	servers[0].grpc.Set(healthtest.Right)
	servers[2].h2.Set(healthtest.Right)
	servers[1].udp.Set(healthtest.Right)
	servers[0].h2c.Set(healthtest.Right)
	for _, r := range rules {
		waitHealth(t, l, x, r.Name, "HEALTHY", all...)
	}
	res := drive(t, l, 150, 4)
	if !res.OK() || res.PerBackend[0] == 0 {
		t.Errorf("IPv4 with be0 healthy again: %s", describe(res))
	}
}
