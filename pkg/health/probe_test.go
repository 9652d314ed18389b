package health

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/failover"
)

// serverTarget returns a target of type typ pointing at the server's
// loopback address and port.
func serverTarget(tb testing.TB, typ Kind, listenAddr string) Target {
	tb.Helper()
	ap, err := netip.ParseAddrPort(listenAddr)
	if err != nil {
		tb.Fatal(err)
	}
	return Target{
		Key: Key{Rule: "web", Backend: ap.Addr()},
		Check: Check{
			Kind:               typ,
			Port:               ap.Port(),
			RequestPath:        "/healthz",
			Interval:           20 * time.Millisecond,
			Timeout:            time.Second,
			HealthyThreshold:   2,
			UnhealthyThreshold: 2,
		},
	}
}

// closedPort returns a loopback address where nothing listens.
func closedPort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func weightHandler(status int, weights ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for _, v := range weights {
			w.Header().Add(WeightHeader, v)
		}
		w.WriteHeader(status)
	}
}

func TestProbeHTTP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		weights []string
		want    Result
	}{
		{"weight 37", 200, []string{"37"}, Result{OK: true, WeightKnown: true, Weight: 37, WeightState: failover.WeightOK}},
		{"weight 0", 200, []string{"0"}, Result{OK: true, WeightKnown: true, Weight: 0, WeightState: failover.WeightOK}},
		{"weight 1000", 200, []string{"1000"}, Result{OK: true, WeightKnown: true, Weight: 1000, WeightState: failover.WeightOK}},
		{"leading zeros and blanks", 200, []string{" 0042 "}, Result{OK: true, WeightKnown: true, Weight: 42, WeightState: failover.WeightOK}},
		{"missing", 200, nil, Result{OK: true, WeightKnown: true, WeightState: failover.WeightMissing}},
		{"abc", 200, []string{"abc"}, Result{OK: true, WeightKnown: true, WeightState: failover.WeightInvalid}},
		{"-1", 200, []string{"-1"}, Result{OK: true, WeightKnown: true, WeightState: failover.WeightInvalid}},
		{"1001", 200, []string{"1001"}, Result{OK: true, WeightKnown: true, WeightState: failover.WeightInvalid}},
		{"1.5", 200, []string{"1.5"}, Result{OK: true, WeightKnown: true, WeightState: failover.WeightInvalid}},
		{"empty", 200, []string{""}, Result{OK: true, WeightKnown: true, WeightState: failover.WeightInvalid}},
		{"two headers", 200, []string{"5", "6"}, Result{OK: true, WeightKnown: true, WeightState: failover.WeightInvalid}},
		{"500 keeps the weight", 500, []string{"12"}, Result{OK: false, WeightKnown: true, Weight: 12, WeightState: failover.WeightOK}},
		{"204 is a failure", 204, []string{"12"}, Result{OK: false, WeightKnown: true, Weight: 12, WeightState: failover.WeightOK}},
		{"302 is not followed", 302, nil, Result{OK: false, WeightKnown: true, WeightState: failover.WeightMissing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(weightHandler(tc.status, tc.weights...))
			defer srv.Close()
			tg := serverTarget(t, HTTP, srv.Listener.Addr().String())
			got := newProber(tg, DirectDial, nil).probe(context.Background())
			if (got.Err == nil) != tc.want.OK {
				t.Errorf("OK %v but error %v", got.OK, got.Err)
			}
			if !tc.want.OK && !errors.Is(got.Err, ErrStatus) {
				t.Errorf("error %v does not wrap ErrStatus", got.Err)
			}
			got.Err = nil
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestProbeRequest checks what the backend receives: the path, the Host
// header (configured, or the backend address with a non-default port),
// and that the probe connects to the backend address and configured port.
func TestProbeRequest(t *testing.T) {
	type seen struct{ host, path, ua, conn string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.URL.RequestURI(), r.UserAgent(), r.Header.Get("Connection")}
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	for _, host := range []string{"", "www.example.com"} {
		tg := serverTarget(t, HTTP, addr)
		tg.Check.Host = host
		tg.Check.RequestPath = "/healthz?deep=1"
		var dialled []string
		dial := func(ctx context.Context, network string, k Key, addr netip.AddrPort) (net.Conn, error) {
			dialled = append(dialled, network+" "+k.String()+" "+addr.String())
			return DirectDial(ctx, network, k, addr)
		}
		if r := newProber(tg, dial, nil).probe(context.Background()); !r.OK {
			t.Fatalf("probe failed: %v", r.Err)
		}
		s := <-got
		wantHost := host
		if host == "" {
			wantHost = addr // 127.0.0.1:port: the port is not 80
		}
		if s.host != wantHost || s.path != "/healthz?deep=1" || s.ua != "xlb-health-check" {
			t.Errorf("host %q path %q user agent %q, want %q /healthz?deep=1 xlb-health-check", s.host, s.path, s.ua, wantHost)
		}
		if len(dialled) != 1 || dialled[0] != "tcp web/127.0.0.1 "+addr {
			t.Errorf("dialled %q, want [tcp web/127.0.0.1 %s]", dialled, addr)
		}
	}
}

func TestHostHeaderDefaultPort(t *testing.T) {
	for _, tc := range []struct {
		backend string
		typ     Kind
		port    uint16
		want    string
	}{
		{"10.0.1.10", HTTP, 80, "Host: 10.0.1.10\r\n"},
		{"10.0.1.10", HTTP, 8080, "Host: 10.0.1.10:8080\r\n"},
		{"10.0.1.10", HTTPS, 443, "Host: 10.0.1.10\r\n"},
		{"10.0.1.10", HTTPS, 80, "Host: 10.0.1.10:80\r\n"},
		{"fd00::1", HTTP, 80, "Host: [fd00::1]\r\n"},
		{"fd00::1", HTTP, 81, "Host: [fd00::1]:81\r\n"},
	} {
		tg := Target{Key: Key{"r", netip.MustParseAddr(tc.backend)}, Check: Check{Kind: tc.typ, Port: tc.port}}
		p := newProber(tg, nil, nil)
		if !strings.Contains(string(p.request), tc.want) || !strings.HasPrefix(string(p.request), "GET / HTTP/1.1\r\n") {
			t.Errorf("%s %s port %d: request %q, want GET / and %q", tc.backend, tc.typ, tc.port, p.request, tc.want)
		}
	}
}

func TestProbeHTTPS(t *testing.T) {
	var mu sync.Mutex
	var sni []string
	srv := httptest.NewUnstartedServer(weightHandler(200, "250"))
	srv.TLS = &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		sni = append(sni, hello.ServerName)
		mu.Unlock()
		return nil, nil
	}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the verifying probe's bad certificate
	srv.StartTLS()
	defer srv.Close()

	for _, tc := range []struct{ host, wantSNI string }{
		{"", ""}, // an address is never sent as SNI
		{"api.example.com", "api.example.com"},
		{"api.example.com:8443", "api.example.com"},
	} {
		tg := serverTarget(t, HTTPS, srv.Listener.Addr().String())
		tg.Check.Host = tc.host
		r := newProber(tg, DirectDial, nil).probe(context.Background())
		if !r.OK || r.Weight != 250 || r.WeightState != failover.WeightOK {
			t.Fatalf("host %q: got %+v, want OK weight 250 (the self-signed certificate is not verified by default)", tc.host, r)
		}
		mu.Lock()
		last := sni[len(sni)-1]
		mu.Unlock()
		if last != tc.wantSNI {
			t.Errorf("host %q: SNI %q, want %q", tc.host, last, tc.wantSNI)
		}
	}

	// With verification asked for, the test server's certificate (for
	// example.com and 127.0.0.1, signed by an unknown CA) fails.
	tg := serverTarget(t, HTTPS, srv.Listener.Addr().String())
	if r := newProber(tg, DirectDial, &tls.Config{}).probe(context.Background()); r.OK || r.WeightState != 0 || r.WeightKnown {
		t.Errorf("verifying probe: got %+v, want a TLS failure without a weight", r)
	} else if !strings.Contains(r.Err.Error(), "tls handshake") {
		t.Errorf("error %q does not say tls handshake", r.Err)
	}
	// Trusting the server's certificate makes it pass again.
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	if r := newProber(tg, DirectDial, &tls.Config{RootCAs: pool}).probe(context.Background()); !r.OK {
		t.Errorf("verifying probe with the server's CA: %v", r.Err)
	}
}

func TestProbeFailures(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
		w.Header().Set(WeightHeader, "5")
	}))
	defer slow.Close()
	// A TCP listener that accepts and never answers, then one that hangs up.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	hangup, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hangup.Close()
	var conns sync.WaitGroup
	accept := func(ln net.Listener, closeAtOnce bool) {
		conns.Add(1)
		go func() {
			defer conns.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				if closeAtOnce {
					c.Close()
				} else {
					defer c.Close()
				}
			}
		}()
	}
	accept(silent, false)
	accept(hangup, true)
	defer conns.Wait()
	defer silent.Close()
	defer hangup.Close()

	closed := closedPort(t)
	for _, tc := range []struct {
		name    string
		typ     Kind
		addr    string
		timeout bool
		errHas  string
	}{
		{"slow HTTP server", HTTP, slow.Listener.Addr().String(), true, "read response"},
		{"silent TLS server", HTTPS, silent.Addr().String(), true, "tls handshake"},
		{"closed port HTTP", HTTP, closed, false, "connect"},
		{"closed port TCP", TCP, closed, false, "connect"},
		{"hang-up HTTP", HTTP, hangup.Addr().String(), false, "read response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := serverTarget(t, tc.typ, tc.addr)
			// The servers that never answer time out at 100 ms. The others
			// fail at once, but a loaded machine may not run the prober
			// or the server for 100 ms: a refused connect then timed out
			// (1 of 300 runs on a CPU shared with a busy loop).
			tg.Check.Timeout = 100 * time.Millisecond
			if !tc.timeout {
				tg.Check.Timeout = 5 * time.Second
			}
			start := time.Now()
			r := newProber(tg, DirectDial, nil).probe(context.Background())
			if took := time.Since(start); took > tg.Check.Timeout+900*time.Millisecond {
				t.Errorf("probe took %s with a timeout of %s", took, tg.Check.Timeout)
			}
			if r.OK || r.WeightKnown || r.Err == nil {
				t.Fatalf("got %+v, want a failure that learnt no weight", r)
			}
			if errors.Is(r.Err, ErrTimeout) != tc.timeout {
				t.Errorf("error %q: wraps ErrTimeout = %v, want %v", r.Err, !tc.timeout, tc.timeout)
			}
			if !strings.Contains(r.Err.Error(), tc.errHas) || !strings.Contains(r.Err.Error(), tc.addr) {
				t.Errorf("error %q should name %q and %s", r.Err, tc.errHas, tc.addr)
			}
		})
	}
}

func TestProbeTCPAndNone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tg := serverTarget(t, TCP, ln.Addr().String())
	want := Result{OK: true, WeightKnown: true, Weight: UnweightedWeight, WeightState: failover.WeightOK}
	if r := newProber(tg, DirectDial, nil).probe(context.Background()); r != want {
		t.Errorf("TCP: got %+v, want %+v", r, want)
	}
	none := Target{Key: tg.Key, Check: Check{Kind: NoProbe}}
	fail := func(context.Context, string, Key, netip.AddrPort) (net.Conn, error) {
		return nil, errors.New("must not dial")
	}
	if r := newProber(none, fail, nil).probe(context.Background()); r != want {
		t.Errorf("NONE: got %+v, want %+v", r, want)
	}
}

func TestParseWeight(t *testing.T) {
	for _, tc := range []struct {
		in    []string
		w     uint32
		state failover.WeightState
	}{
		{nil, 0, failover.WeightMissing},
		{[]string{"0"}, 0, failover.WeightOK},
		{[]string{"1"}, 1, failover.WeightOK},
		{[]string{"999"}, 999, failover.WeightOK},
		{[]string{"1000"}, 1000, failover.WeightOK},
		{[]string{"\t7 "}, 7, failover.WeightOK},
		{[]string{"000000000000000000001000"}, 1000, failover.WeightOK},
		{[]string{"1001"}, 0, failover.WeightInvalid},
		{[]string{"99999999999999999999"}, 0, failover.WeightInvalid},
		{[]string{"-1"}, 0, failover.WeightInvalid},
		{[]string{"+1"}, 0, failover.WeightInvalid},
		{[]string{"1.5"}, 0, failover.WeightInvalid},
		{[]string{"1.0"}, 0, failover.WeightInvalid},
		{[]string{"1e3"}, 0, failover.WeightInvalid},
		{[]string{"0x10"}, 0, failover.WeightInvalid},
		{[]string{"abc"}, 0, failover.WeightInvalid},
		{[]string{"1 2"}, 0, failover.WeightInvalid},
		{[]string{""}, 0, failover.WeightInvalid},
		{[]string{"  "}, 0, failover.WeightInvalid},
		{[]string{"٣"}, 0, failover.WeightInvalid}, // a non-ASCII digit
		{[]string{"5", "5"}, 0, failover.WeightInvalid},
	} {
		w, s := parseWeight(tc.in)
		if w != tc.w || s != tc.state {
			t.Errorf("parseWeight(%q) = %d %s, want %d %s", tc.in, w, s, tc.w, tc.state)
		}
	}
	if n := testing.AllocsPerRun(100, func() { parseWeight([]string{" 37 "}) }); n != 0 {
		t.Errorf("parseWeight allocates %.0f times", n)
	}
}
