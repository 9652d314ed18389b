package health

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/health/healthtest"
)

// kindCase is one check kind against a real server of its kind.
type kindCase struct {
	name  string
	check Check // the kind and its keys; port, timeout and thresholds are filled in
	// start serves on ln (or pc, for UDP), with or without PROXY lines.
	start func(ln net.Listener, pc net.PacketConn, proxy bool) *healthtest.Server
	wrong error // what the failure of a wrong answer wraps
	http  bool  // the answer carries the weight header
}

func kindCases(tb testing.TB) []kindCase {
	cfg, err := healthtest.Cert()
	if err != nil {
		tb.Fatal(err)
	}
	stream := func(c *tls.Config, banner bool) func(net.Listener, net.PacketConn, bool) *healthtest.Server {
		return func(ln net.Listener, _ net.PacketConn, proxy bool) *healthtest.Server {
			return healthtest.Stream(ln, c, proxy, banner)
		}
	}
	with := func(f func(net.Listener, *tls.Config, bool) *healthtest.Server, c *tls.Config) func(net.Listener, net.PacketConn, bool) *healthtest.Server {
		return func(ln net.Listener, _ net.PacketConn, proxy bool) *healthtest.Server { return f(ln, c, proxy) }
	}
	req, ans := healthtest.Request, healthtest.Answer
	return []kindCase{
		{"TCP banner", Check{Kind: TCP, Response: ans}, stream(nil, true), ErrResponse, false},
		{"TCP request", Check{Kind: TCP, Request: req, Response: ans}, stream(nil, false), ErrResponse, false},
		{"SSL", Check{Kind: SSL, Request: req, Response: ans}, stream(cfg, false), ErrResponse, false},
		{"HTTP", Check{Kind: HTTP, Response: healthtest.BodyText}, with(healthtest.HTTP, nil), ErrStatus, true},
		{"HTTPS", Check{Kind: HTTPS, Response: healthtest.BodyText}, with(healthtest.HTTP, cfg), ErrStatus, true},
		{"HTTP2 TLS", Check{Kind: HTTP2, TLS: true, Response: healthtest.BodyText}, with(healthtest.HTTP2, cfg), ErrStatus, true},
		{"HTTP2 h2c", Check{Kind: HTTP2, Response: healthtest.BodyText}, with(healthtest.HTTP2, nil), ErrStatus, true},
		{"GRPC", Check{Kind: GRPC, GRPCServiceName: healthtest.Service}, with(healthtest.GRPC, nil), ErrNotServing, false},
		{"GRPC TLS", Check{Kind: GRPC, TLS: true, GRPCServiceName: healthtest.Service}, with(healthtest.GRPC, cfg), ErrNotServing, false},
		{"UDP", Check{Kind: UDP, Request: req, Response: ans}, func(_ net.Listener, pc net.PacketConn, _ bool) *healthtest.Server { return healthtest.UDP(pc) }, ErrResponse, false},
	}
}

// listen opens the socket a check of kind k connects to, on loopback.
func listen(tb testing.TB, k Kind) (net.Listener, net.PacketConn, netip.AddrPort) {
	tb.Helper()
	if k == UDP {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		return nil, pc, netip.MustParseAddrPort(pc.LocalAddr().String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ln, nil, netip.MustParseAddrPort(ln.Addr().String())
}

// probeOnce runs one probe of check against addr with timeout.
func probeOnce(check Check, addr netip.AddrPort, timeout time.Duration) Result {
	check.Port, check.Timeout, check.Interval = addr.Port(), timeout, time.Second
	check.HealthyThreshold, check.UnhealthyThreshold = 1, 1
	tg := Target{Key: Key{Rule: "kinds", Backend: addr.Addr()}, Check: check}
	return newProber(tg, DirectDial, nil).probe(context.Background())
}

// TestKinds probes a real server of each kind that answers right, answers
// wrong and stays silent, without and with a PROXY v1 line first; then
// the same address with nothing listening.
func TestKinds(t *testing.T) {
	for _, tc := range kindCases(t) {
		for _, proxy := range []bool{false, true} {
			if proxy && tc.check.Kind == UDP {
				continue
			}
			name := tc.name
			if proxy {
				name += " PROXY_V1"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				check := tc.check
				if proxy {
					check.ProxyHeader = ProxyV1
				}
				if err := (Target{Key: Key{"r", netip.MustParseAddr("127.0.0.1")}, Check: Check{
					Kind: check.Kind, Port: 1, Interval: 1, Timeout: 1, HealthyThreshold: 1, UnhealthyThreshold: 1,
					Request: check.Request, Response: check.Response, ProxyHeader: check.ProxyHeader,
				}}).Validate(); err != nil {
					t.Fatalf("the check is invalid: %v", err)
				}
				ln, pc, addr := listen(t, check.Kind)
				srv := tc.start(ln, pc, proxy)
				defer srv.Close()

				r := probeOnce(check, addr, 5*time.Second)
				if !r.OK || r.Err != nil {
					t.Fatalf("right answer: %+v", r)
				}
				if tc.http && (r.Weight != 37 || r.WeightState != failover.WeightOK) {
					t.Errorf("right answer: weight %d %s, want 37 OK", r.Weight, r.WeightState)
				}
				if !tc.http && (r.Weight != UnweightedWeight || !r.WeightKnown) {
					t.Errorf("right answer: weight %d (known %v), want %d", r.Weight, r.WeightKnown, UnweightedWeight)
				}

				srv.Set(healthtest.Wrong)
				r = probeOnce(check, addr, 5*time.Second)
				if r.OK || !errors.Is(r.Err, tc.wrong) || errors.Is(r.Err, ErrTimeout) {
					t.Errorf("wrong answer: %+v, want a failure wrapping %q", r, tc.wrong)
				}
				if tc.http && (!r.WeightKnown || r.Weight != 37) {
					t.Errorf("wrong answer: weight %d (known %v), want 37: an answer's weight counts whatever its status", r.Weight, r.WeightKnown)
				}
				if !tc.http && r.WeightKnown {
					t.Errorf("wrong answer: weight known, want unknown (an unweighted check learns none by failing)")
				}

				srv.Set(healthtest.Silent)
				start := time.Now()
				r = probeOnce(check, addr, 300*time.Millisecond)
				if r.OK || !errors.Is(r.Err, ErrTimeout) {
					t.Errorf("silent server: %+v, want a timeout", r)
				}
				if took := time.Since(start); took > 3*time.Second {
					t.Errorf("silent server: the probe took %s with a 300ms timeout", took)
				}

				if proxy {
					lines := srv.Proxy.Lines()
					if len(lines) < 3 {
						t.Errorf("%d PROXY lines for 3 probes", len(lines))
					}
					for _, l := range lines {
						if !l.MatchesSockets || !strings.HasPrefix(l.Line, "PROXY TCP4 127.0.0.1 127.0.0.1 ") {
							t.Errorf("PROXY line %q on a connection %s → %s", l.Line, l.Remote, l.Local)
						}
					}
				}

				srv.Close()
				r = probeOnce(check, addr, 2*time.Second)
				if r.OK || r.Err == nil || !strings.Contains(r.Err.Error(), addr.String()) {
					t.Errorf("nothing listening: %+v, want a failure naming %s", r, addr)
				}
				if !errors.Is(r.Err, ErrTimeout) && !strings.Contains(r.Err.Error(), "refused") && !strings.Contains(r.Err.Error(), "connection") {
					t.Errorf("nothing listening: %v, want refused", r.Err)
				}
			})
		}
	}
}

// TestKindMismatches: a server of another kind, or one that speaks the
// kind without what the check asks for, fails the check.
func TestKindMismatches(t *testing.T) {
	cfg, err := healthtest.Cert()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		check Check
		start func(net.Listener) *healthtest.Server
		err   string
	}{
		{"HTTP2 to an HTTP/1.1-only TLS server", Check{Kind: HTTP2, TLS: true},
			func(ln net.Listener) *healthtest.Server { return healthtest.HTTP(ln, cfg, false) }, "tls handshake"},
		{"HTTP2 to a TLS server without ALPN", Check{Kind: HTTP2, TLS: true},
			func(ln net.Listener) *healthtest.Server { return healthtest.Stream(ln, cfg, false, true) }, `the server chose "" in ALPN, not h2`},
		{"h2c to an HTTP/1.1 server", Check{Kind: HTTP2},
			func(ln net.Listener) *healthtest.Server { return healthtest.HTTP(ln, nil, false) }, "request"},
		{"SSL to a plain TCP server", Check{Kind: SSL},
			func(ln net.Listener) *healthtest.Server { return healthtest.Stream(ln, nil, false, true) }, "tls handshake"},
		{"body text missing from a 200", Check{Kind: HTTP, Response: "no such text"},
			func(ln net.Listener) *healthtest.Server { return healthtest.HTTP(ln, nil, false) }, "response does not match: the body's first 15 bytes lack \"no such text\""},
		{"unknown gRPC service", Check{Kind: GRPC, GRPCServiceName: "no.such.Service"},
			func(ln net.Listener) *healthtest.Server { return healthtest.GRPC(ln, nil, false) }, "NotFound"},
		{"GRPC with TLS to a plaintext server", Check{Kind: GRPC, TLS: true},
			func(ln net.Listener) *healthtest.Server { return healthtest.GRPC(ln, nil, false) }, "Unavailable"},
		{"a PROXY line the server does not expect", Check{Kind: TCP, ProxyHeader: ProxyV1, Request: healthtest.Request, Response: healthtest.Answer},
			// The server resets the connection at the PROXY line: the
			// request's write or the answer's read sees it first.
			func(ln net.Listener) *healthtest.Server { return healthtest.Stream(ln, nil, false, false) }, "read response (0 of 7 bytes)|send request: write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, _, addr := listen(t, tc.check.Kind)
			srv := tc.start(ln)
			defer srv.Close()
			r := probeOnce(tc.check, addr, 3*time.Second)
			if r.OK || r.Err == nil || !slices.ContainsFunc(strings.Split(tc.err, "|"), func(e string) bool { return strings.Contains(r.Err.Error(), e) }) {
				t.Errorf("%+v, want a failure with %q", r, tc.err)
			}
		})
	}

	// The server as a whole (service "") is SERVING while Service is not.
	ln, _, addr := listen(t, GRPC)
	srv := healthtest.GRPC(ln, nil, false)
	defer srv.Close()
	srv.Set(healthtest.Wrong)
	if r := probeOnce(Check{Kind: GRPC, GRPCServiceName: healthtest.Service}, addr, 3*time.Second); r.OK {
		t.Errorf("service %s NOT_SERVING: passed", healthtest.Service)
	}
	if r := probeOnce(Check{Kind: GRPC}, addr, 3*time.Second); !r.OK {
		t.Errorf("the whole server: %v", r.Err)
	}
}

func TestProxyV1Line(t *testing.T) {
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	for _, tc := range []struct {
		local, remote net.Addr
		want          string
	}{
		{tcp("192.0.2.1:40000"), tcp("198.51.100.7:80"), "PROXY TCP4 192.0.2.1 198.51.100.7 40000 80\r\n"},
		{tcp("[fd00::1]:40000"), tcp("[fd00::2]:443"), "PROXY TCP6 fd00::1 fd00::2 40000 443\r\n"},
		{tcp("[::ffff:192.0.2.1]:1"), tcp("192.0.2.2:2"), "PROXY TCP4 192.0.2.1 192.0.2.2 1 2\r\n"},
		{tcp("192.0.2.1:1"), tcp("[fd00::2]:2"), "PROXY UNKNOWN\r\n"},
		{nil, tcp("192.0.2.2:2"), "PROXY UNKNOWN\r\n"},
		{&net.UnixAddr{Name: "@x", Net: "unix"}, tcp("192.0.2.2:2"), "PROXY UNKNOWN\r\n"},
	} {
		if got := string(proxyV1Line(tc.local, tc.remote)); got != tc.want {
			t.Errorf("%v → %v: %q, want %q", tc.local, tc.remote, got, tc.want)
		}
	}
}

// TestDialSeam: every kind makes its connection through Options.Dial,
// once per probe, with its network, key and the backend's address.
func TestDialSeam(t *testing.T) {
	for _, tc := range kindCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, pc, addr := listen(t, tc.check.Kind)
			srv := tc.start(ln, pc, false)
			defer srv.Close()
			var calls []string
			dial := func(ctx context.Context, network string, k Key, a netip.AddrPort) (net.Conn, error) {
				calls = append(calls, network+" "+k.String()+" "+a.String())
				return DirectDial(ctx, network, k, a)
			}
			check := tc.check
			check.Port, check.Timeout = addr.Port(), 5*time.Second
			tg := Target{Key: Key{Rule: "seam", Backend: addr.Addr()}, Check: check}
			if r := newProber(tg, dial, nil).probe(context.Background()); !r.OK {
				t.Fatal(r.Err)
			}
			want := tc.check.Kind.network() + " seam/127.0.0.1 " + addr.String()
			if len(calls) != 1 || calls[0] != want {
				t.Errorf("dialled %q, want [%s]", calls, want)
			}
		})
	}
}

// TestDirectBypassesDial: a target whose check is Direct never calls
// Options.Dial; its connect-only probes take the connector, its others
// DirectDial. The others of the same Checker still dial through it.
func TestDirectBypassesDial(t *testing.T) {
	ln, _, addr := listen(t, TCP)
	srv := healthtest.Stream(ln, nil, false, false)
	defer srv.Close()
	var mu sync.Mutex
	dialled := map[string]int{}
	dial := func(ctx context.Context, network string, k Key, a netip.AddrPort) (net.Conn, error) {
		mu.Lock()
		dialled[k.Rule]++
		mu.Unlock()
		return DirectDial(ctx, network, k, a)
	}
	rec := newRecorder()
	c := New(Options{Seed: 5, Dial: dial, OnChange: rec.on})
	defer c.Stop()
	check := Check{Kind: TCP, Port: addr.Port(), Interval: 10 * time.Millisecond, Timeout: time.Second, HealthyThreshold: 2, UnhealthyThreshold: 2}
	stream := check
	stream.Request, stream.Response = healthtest.Request, healthtest.Answer
	targets := []Target{
		{Key: Key{"dialled", addr.Addr()}, Check: check},
		{Key: Key{"direct", addr.Addr()}, Check: func() Check { c := check; c.Direct = true; return c }()},
		{Key: Key{"direct-stream", addr.Addr()}, Check: func() Check { c := stream; c.Direct = true; return c }()},
	}
	if err := c.Set(targets); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		rec.waitFor(t, tg.Key, healthIs(failover.HealthHealthy))
	}
	c.Stop()
	if c.conns == nil {
		t.Error("the connect-only Direct target did not take the connector")
	}
	mu.Lock()
	defer mu.Unlock()
	if dialled["dialled"] < 2 || dialled["direct"] != 0 || dialled["direct-stream"] != 0 {
		t.Errorf("Options.Dial called %v, want only for the target that is not Direct", dialled)
	}
}
