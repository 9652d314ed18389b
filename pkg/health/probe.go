package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/xlbnet/xlb/failover"
)

// maxResponseHead bounds what an HTTP probe reads: the status line and
// headers must fit.
const maxResponseHead = 16 << 10

// Result is the outcome of one probe.
type Result struct {
	OK bool // the check passed (doc.go, "One probe")

	// WeightKnown says the probe learnt a weight: an HTTP response arrived
	// (whatever its status), or an unweighted check passed. Weight and
	// WeightState are meaningful only then.
	WeightKnown bool
	Weight      uint32
	WeightState failover.WeightState

	Err error // why the check failed; nil when OK

	Latency time.Duration // how long the probe took, set by the Checker
}

// unweightedPass is the result of a check that passed and carries no
// weight (TCP, SSL, GRPC, UDP, NONE).
var unweightedPass = Result{OK: true, WeightKnown: true, Weight: UnweightedWeight, WeightState: failover.WeightOK}

// prober runs the probes of one target. It is immutable and used by one
// goroutine at a time.
type prober struct {
	key      Key
	kind     Kind
	addr     netip.AddrPort // the backend's address and the check's port
	timeout  time.Duration
	dial     DialFunc
	proxy    bool        // send a PROXY v1 line first
	tls      *tls.Config // nil: no TLS
	request  []byte      // HTTP: the whole request, built once; TCP, SSL, UDP: Check.Request
	response string      // Check.Response

	host string // HTTP kinds and GRPC: Host / :authority
	path string // HTTP2: the path requested
	h2   *http.Transport
	grpc string // GRPC: the service asked about
}

func newProber(t Target, dial DialFunc, base *tls.Config) *prober {
	c := t.Check
	p := &prober{
		key:      t.Key,
		kind:     c.Kind,
		addr:     netip.AddrPortFrom(t.Backend, c.Port),
		timeout:  c.Timeout,
		dial:     dial,
		proxy:    c.ProxyHeader == ProxyV1,
		request:  []byte(c.Request),
		response: c.Response,
		grpc:     c.GRPCServiceName,
	}
	p.host = c.Host
	if p.host == "" {
		p.host = defaultHost(t.Backend, c.Port, c.usesTLS())
	}
	if c.usesTLS() {
		if base == nil {
			base = &tls.Config{InsecureSkipVerify: true}
		}
		p.tls = base.Clone()
		p.tls.NextProtos = nil // SSL: a bare handshake
		switch c.Kind {
		case HTTPS:
			p.tls.NextProtos = []string{"http/1.1"}
		case HTTP2:
			p.tls.NextProtos = []string{"h2"}
		}
		// SNI carries a name, never an address (RFC 6066 §3); crypto/tls
		// leaves it out for an IP literal but still verifies against it.
		p.tls.ServerName = hostOnly(p.host)
	}
	path := c.RequestPath
	if path == "" {
		path = DefaultRequestPath
	}
	switch c.Kind {
	case HTTP, HTTPS:
		p.request = []byte("GET " + path + " HTTP/1.1\r\n" +
			"Host: " + p.host + "\r\n" +
			"User-Agent: " + userAgent + "\r\n" +
			"Accept: */*\r\n" +
			"Connection: close\r\n\r\n")
	case HTTP2:
		p.path = path
		p.h2 = p.http2Transport()
	}
	return p
}

const userAgent = "xlb-health-check"

// defaultHost is the Host header without Check.Host (RFC 9110 §7.2:
// uri-host [":" port], IPv6 in brackets, the port left out when it is the
// scheme's default).
func defaultHost(backend netip.Addr, port uint16, tls bool) string {
	defaultPort := uint16(80)
	if tls {
		defaultPort = 443
	}
	switch {
	case port != defaultPort:
		return netip.AddrPortFrom(backend, port).String()
	case backend.Is6():
		return "[" + backend.String() + "]"
	}
	return backend.String()
}

// hostOnly is host without its port and brackets.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// connectOnly reports whether a probe is a bare TCP connect, which the
// Checker's connector can run without a goroutine (connector.go).
func (p *prober) connectOnly() bool {
	return p.kind == TCP && !p.proxy && len(p.request) == 0 && p.response == ""
}

// fail is a failed result with err in the form probe gives it.
func (p *prober) fail(err error) Result {
	return Result{Err: fmt.Errorf("%s probe %s: %w", p.kind, p.addr, err)}
}

// probe runs one check within the target's timeout (and ctx).
func (p *prober) probe(ctx context.Context) Result {
	if p.kind == NoProbe {
		return unweightedPass
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	r := p.run(ctx)
	if r.Err != nil {
		// The socket deadline is the context's, so it may fire first; and a
		// library with its own timer on the context's deadline (gRPC) may
		// fail before the context says so: past the deadline is a timeout.
		dl, _ := ctx.Deadline()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(r.Err, os.ErrDeadlineExceeded) || errors.Is(r.Err, context.DeadlineExceeded) || !time.Now().Before(dl) {
			r.Err = fmt.Errorf("%w after %s: %w", ErrTimeout, p.timeout, r.Err)
		}
		r.Err = fmt.Errorf("%s probe %s: %w", p.kind, p.addr, r.Err)
	}
	return r
}

func (p *prober) run(ctx context.Context) Result {
	switch p.kind {
	case HTTP, HTTPS:
		return p.runHTTP(ctx)
	case HTTP2:
		return p.runHTTP2(ctx)
	case GRPC:
		return p.runGRPC(ctx)
	case UDP:
		return p.runUDP(ctx)
	}
	if p.connectOnly() {
		// Connect only: the common case at scale, kept to dial and close.
		conn, err := p.dial(ctx, "tcp", p.key, p.addr)
		if err != nil {
			return Result{Err: fmt.Errorf("connect: %w", err)}
		}
		conn.Close()
		return unweightedPass
	}
	return p.runStream(ctx)
}

var longAgo = time.Unix(1, 0)

// open dials the probe's connection and sends the PROXY line. The
// connection's reads and writes are not bounded: HTTP2 and GRPC, whose
// libraries own the connection, bound their requests by their context.
func (p *prober) open(ctx context.Context) (net.Conn, error) {
	conn, err := p.dial(ctx, p.kind.network(), p.key, p.addr)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if p.proxy {
		if _, err := conn.Write(proxyV1Line(conn.LocalAddr(), conn.RemoteAddr())); err != nil {
			conn.Close()
			return nil, fmt.Errorf("send PROXY header: %w", err)
		}
	}
	return conn, nil
}

// connect is open with every read and write bounded by ctx: its deadline,
// and its cancellation (Remove, Stop), which moves the deadline to the
// past and so unblocks them at once. release closes the connection.
func (p *prober) connect(ctx context.Context) (conn net.Conn, release func(), err error) {
	if conn, err = p.open(ctx); err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(longAgo) })
	return conn, func() { stop(); conn.Close() }, nil
}

// handshake runs TLS over conn when the check asks for it.
func (p *prober) handshake(ctx context.Context, conn net.Conn) (net.Conn, error) {
	if p.tls == nil {
		return conn, nil
	}
	tc := tls.Client(conn, p.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	return tc, nil
}

// runStream is TCP with a PROXY line, a request or a response, and SSL:
// connect, handshake, send the request, match the answer's first bytes.
func (p *prober) runStream(ctx context.Context) Result {
	conn, release, err := p.connect(ctx)
	if err != nil {
		return Result{Err: err}
	}
	defer release()
	if conn, err = p.handshake(ctx, conn); err != nil {
		return Result{Err: err}
	}
	if len(p.request) > 0 {
		if _, err := conn.Write(p.request); err != nil {
			return Result{Err: fmt.Errorf("send request: %w", err)}
		}
	}
	if err := p.matchStream(conn); err != nil {
		return Result{Err: err}
	}
	return unweightedPass
}

// matchStream reads until the answer has as many bytes as the expected
// response and fails at the first byte that differs, so a wrong answer
// fails at once rather than at the timeout.
func (p *prober) matchStream(conn net.Conn) error {
	want := p.response
	if want == "" {
		return nil
	}
	got := make([]byte, 0, len(want))
	for len(got) < len(want) {
		n, err := conn.Read(got[len(got):len(want)])
		got = got[:len(got)+n]
		if !strings.HasPrefix(want, string(got)) {
			return fmt.Errorf("%w: the answer begins %s, want %s", ErrResponse, quote(got), quote([]byte(want)))
		}
		if err != nil && len(got) < len(want) {
			return fmt.Errorf("read response (%d of %d bytes): %w", len(got), len(want), err)
		}
	}
	return nil
}

// runUDP sends the request datagram and matches the first answer.
func (p *prober) runUDP(ctx context.Context) Result {
	conn, release, err := p.connect(ctx)
	if err != nil {
		return Result{Err: err}
	}
	defer release()
	if _, err := conn.Write(p.request); err != nil {
		return Result{Err: fmt.Errorf("send request: %w", err)}
	}
	buf := make([]byte, max(len(p.response), 512))
	n, err := conn.Read(buf)
	if err != nil {
		// A closed port answers with ICMP port unreachable, which the
		// connected socket reports as "connection refused".
		return Result{Err: fmt.Errorf("read answer: %w", err)}
	}
	if !strings.HasPrefix(string(buf[:n]), p.response) {
		return Result{Err: fmt.Errorf("%w: the answer begins %s, want %s", ErrResponse, quote(buf[:n]), quote([]byte(p.response)))}
	}
	return unweightedPass
}

// quote shows the first bytes of b for an error message.
func quote(b []byte) string {
	const show = 32
	if len(b) > show {
		return fmt.Sprintf("%q…", b[:show])
	}
	return fmt.Sprintf("%q", b)
}
