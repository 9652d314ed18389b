package main

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
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
	sslCheckPort  = 9465
	tcpCheckPort  = 9466
	httpCheckPort = 9467
)

// checkServers are one backend's servers of each kind.
type checkServers struct {
	grpc, h2, h2c, udp, ssl, tcp, http *healthtest.Server
}

// startCheckServers starts a gRPC health server, an HTTP/2 server over TLS,
// an h2c server expecting PROXY v1 lines, a UDP answerer, a request/answer
// server inside TLS (SSL), a banner server (TCP) and an HTTP/1.1 server
// inside b's namespace, stopped when the test ends.
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
		ssl:  healthtest.Stream(listen(b.Tunnel4, sslCheckPort), cert, false, false),
		tcp:  healthtest.Stream(listen(b.Tunnel6, tcpCheckPort), nil, false, true),
		http: healthtest.HTTP(listen(b.Tunnel4, httpCheckPort), nil, false),
	}
	t.Cleanup(func() {
		for _, srv := range []*healthtest.Server{s.grpc, s.h2, s.h2c, s.udp, s.ssl, s.tcp, s.http} {
			srv.Close()
		}
	})
	return s
}

// TestEndToEndHealthCheckKinds: the daemon marks backends by GRPC, UDP,
// HTTP2 (TLS, and h2c with PROXY_V1), SSL, TCP (a banner matched) and HTTP
// (its body matched) checks against real servers in the backends'
// namespaces, over the lab's links, and traffic follows: in each rule one
// backend's server answers wrong and another's stays silent, both turn
// UNHEALTHY and get no new connections, and HEALTHY again once they
// answer right.
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
	// Rules for the other kinds on ports of their own, checked only.
	rules = append(rules,
		lab.Rule{Name: "ssl4", VIP: l.Opts.VIP4, Protocol: "TCP", Ports: `["9443"]`, Encap: "IPIP",
			Health: fmt.Sprintf("type = \"SSL\"\nport = %d\nrequest = %q\nresponse = %q\n%s", sslCheckPort, healthtest.Request, healthtest.Answer, every)},
		lab.Rule{Name: "tcp6", VIP: l.Opts.VIP6, Protocol: "TCP", Ports: `["9444"]`, Encap: "IPIP",
			Health: fmt.Sprintf("type = \"TCP\"\nport = %d\nresponse = %q\n%s", tcpCheckPort, healthtest.Answer, every)},
		lab.Rule{Name: "http4", VIP: l.Opts.VIP4, Protocol: "TCP", Ports: `["9445"]`, Encap: "IPIP",
			Health: fmt.Sprintf("type = \"HTTP\"\nport = %d\nrequest_path = \"/\"\nresponse = %q\n%s", httpCheckPort, healthtest.BodyText, every)})
	// tcp6s has tcp6's backends and an equal direct check: one probe of
	// each backend decides for both (pkg/daemon services.go).
	tcp6s := rules[len(rules)-2]
	tcp6s.Name, tcp6s.Ports = "tcp6s", `["9446"]`
	rules = append(rules, tcp6s)
	x := xlbIn(t, l, rules)

	all := []int{0, 1, 2}
	for _, r := range rules {
		waitHealth(t, l, x, r.Name, "HEALTHY", all...)
	}
	st := x.status(t)
	for _, r := range st.Rules {
		for _, b := range r.Backends {
			if want := map[string]string{"tcp6s": "tcp6"}[r.Name]; b.ProbeRule != want {
				t.Errorf("rule %s backend %s: probe_rule %q, want %q", r.Name, b.Address, b.ProbeRule, want)
			}
		}
	}
	shared := 0
	for _, e := range st.Events {
		switch {
		case e.Kind == "health" && e.Rule == "tcp6s":
			t.Errorf("tcp6s probed its backends itself: %+v", e)
		case e.Kind == "health" && e.Rule == "tcp6":
			if strings.Join(e.Rules, ",") != "tcp6,tcp6s" {
				t.Errorf("tcp6's verdict does not name both rules it decides: %+v", e)
			}
			shared++
		}
	}
	if shared != len(l.Backends) {
		t.Errorf("%d health events of tcp6's probes, want %d (one per backend, naming tcp6 and tcp6s)", shared, len(l.Backends))
	}

	// In each rule one backend answers wrong and another stays silent; the
	// third answers right.
	kindOf := func(s checkServers, rule string) *healthtest.Server {
		return map[string]*healthtest.Server{"web4": s.grpc, "web6": s.h2, "udp4": s.udp, "udp6": s.h2c, "ssl4": s.ssl, "tcp6": s.tcp, "tcp6s": s.tcp, "http4": s.http}[rule]
	}
	type downs struct{ wrong, silent, up int }
	down := map[string]downs{"web4": {0, 1, 2}, "web6": {0, 2, 1}, "udp4": {1, 2, 0}, "udp6": {0, 1, 2},
		"ssl4": {1, 0, 2}, "tcp6": {2, 1, 0}, "tcp6s": {2, 1, 0}, "http4": {2, 0, 1}}
	for rule, d := range down {
		kindOf(servers[d.wrong], rule).Set(healthtest.Wrong)
		kindOf(servers[d.silent], rule).Set(healthtest.Silent)
	}
	for rule, d := range down {
		waitHealth(t, l, x, rule, "UNHEALTHY", d.wrong, d.silent)
		waitHealth(t, l, x, rule, "HEALTHY", d.up)
	}

	// New connections avoid them, on real packets through the appliance.
	for fam, rule := range map[int]string{4: "web4", 6: "web6"} {
		if res := drive(t, l, 150, fam); !onlyOn(res, down[rule].up) {
			t.Errorf("IPv%d with be%d answering wrong and be%d silent: %s", fam, down[rule].wrong, down[rule].silent, describe(res))
		}
	}
	dst := netip.AddrPortFrom(vipOf(l, 4), l.Opts.UDPPort)
	seen := map[int]int{}
	for _, src := range clientsOf(l, 4)[:60] {
		seen[openUDPFlow(t, l, src, dst).who(16)]++
	}
	if seen[down["udp4"].up] != 60 {
		t.Errorf("UDP flows from 60 sources with be1 answering wrong and be2 silent: %v (backend → flows, -1 unanswered), want all on be0", seen)
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
	for rule, d := range down {
		kindOf(servers[d.wrong], rule).Set(healthtest.Right)
		kindOf(servers[d.silent], rule).Set(healthtest.Right)
	}
	for _, r := range rules {
		waitHealth(t, l, x, r.Name, "HEALTHY", all...)
	}
	if res := drive(t, l, 150, 4); !onlyOn(res, all...) {
		t.Errorf("IPv4 with be0 and be1 healthy again: %s", describe(res))
	}
}
