package health

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/xlbnet/xlb/failover"
)

// maxResponseHead bounds what an HTTP probe reads: the status line and
// headers must fit. The body is never read.
const maxResponseHead = 16 << 10

// Result is the outcome of one probe.
type Result struct {
	OK bool // the check passed: connected (TCP) or 200 OK (HTTP, HTTPS)

	// WeightKnown says the probe learnt a weight: an HTTP response arrived
	// (whatever its status), or a TCP check connected. Weight and
	// WeightState are meaningful only then.
	WeightKnown bool
	Weight      uint32
	WeightState failover.WeightState

	Err error // why the check failed; nil when OK

	Latency time.Duration // how long the probe took, set by the Checker
}

// prober runs the probes of one target. It is immutable and used by one
// goroutine at a time.
type prober struct {
	kind    Kind
	addr    string // backend:port, as dialled
	request []byte // the whole HTTP request, built once
	tls     *tls.Config
	timeout time.Duration
	dial    DialFunc
}

func newProber(t Target, dial DialFunc, base *tls.Config) *prober {
	p := &prober{
		kind:    t.Check.Kind,
		addr:    netip.AddrPortFrom(t.Backend, t.Check.Port).String(),
		timeout: t.Check.Timeout,
		dial:    dial,
	}
	if !t.Check.Kind.HTTPFamily() {
		return p
	}
	host := t.Check.Host
	defaultPort := uint16(80)
	if t.Check.Kind == HTTPS {
		defaultPort = 443
	}
	if host == "" {
		// RFC 9110 §7.2: Host is uri-host [":" port], IPv6 in brackets.
		switch {
		case t.Check.Port != defaultPort:
			host = netip.AddrPortFrom(t.Backend, t.Check.Port).String()
		case t.Backend.Is6():
			host = "[" + t.Backend.String() + "]"
		default:
			host = t.Backend.String()
		}
	}
	path := t.Check.RequestPath
	if path == "" {
		path = DefaultRequestPath
	}
	p.request = []byte("GET " + path + " HTTP/1.1\r\n" +
		"Host: " + host + "\r\n" +
		"User-Agent: xlb-health-check\r\n" +
		"Accept: */*\r\n" +
		"Connection: close\r\n\r\n")
	if t.Check.Kind == HTTPS {
		if base == nil {
			base = &tls.Config{InsecureSkipVerify: true}
		}
		p.tls = base.Clone()
		p.tls.NextProtos = []string{"http/1.1"}
		// SNI carries a name, never an address (RFC 6066 §3); crypto/tls
		// leaves it out for an IP literal but still verifies against it.
		if sni, _, err := net.SplitHostPort(host); err == nil {
			p.tls.ServerName = sni
		} else {
			p.tls.ServerName = host
		}
	}
	return p
}

// probe runs one check within the target's timeout (and ctx).
func (p *prober) probe(ctx context.Context) Result {
	if p.kind == NoProbe {
		return Result{OK: true, WeightKnown: true, Weight: UnweightedWeight, WeightState: failover.WeightOK}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	r := p.run(ctx)
	if r.Err != nil {
		// The socket deadline is the context's, so it may fire first.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(r.Err, os.ErrDeadlineExceeded) {
			r.Err = fmt.Errorf("%w after %s: %w", ErrTimeout, p.timeout, r.Err)
		}
		r.Err = fmt.Errorf("%s probe %s: %w", p.kind, p.addr, r.Err)
	}
	return r
}

var longAgo = time.Unix(1, 0)

func (p *prober) run(ctx context.Context) Result {
	conn, err := p.dial(ctx, "tcp", p.addr)
	if err != nil {
		return Result{Err: fmt.Errorf("connect: %w", err)}
	}
	defer conn.Close()
	if p.kind == TCP {
		return Result{OK: true, WeightKnown: true, Weight: UnweightedWeight, WeightState: failover.WeightOK}
	}
	// The deadline bounds every read and write; cancelling ctx (timeout,
	// Remove, Stop) moves it to the past, which unblocks them at once.
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	raw := conn
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(longAgo) })
	defer stop()
	if p.tls != nil {
		tc := tls.Client(conn, p.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return Result{Err: fmt.Errorf("tls handshake: %w", err)}
		}
		conn = tc
	}
	if _, err := conn.Write(p.request); err != nil {
		return Result{Err: fmt.Errorf("send request: %w", err)}
	}
	br := bufio.NewReaderSize(io.LimitReader(conn, maxResponseHead), 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return Result{Err: fmt.Errorf("read response: %w", err)}
	}
	// The body is left unread: closing the connection ends it.
	w, ws := parseWeight(resp.Header.Values(WeightHeader))
	r := Result{OK: resp.StatusCode == http.StatusOK, WeightKnown: true, Weight: w, WeightState: ws}
	if !r.OK {
		r.Err = fmt.Errorf("%w: %s", ErrStatus, resp.Status)
	}
	return r
}

// parseWeight reads the weight header's values: none is MISSING_WEIGHT;
// one decimal integer 0..1000 (ASCII digits only, leading zeros allowed,
// surrounding blanks ignored) is the weight; anything else, including
// several values, a sign, a fraction ("1.5") or an exponent, is
// INVALID_WEIGHT. The weight is 0 unless the state is OK.
func parseWeight(values []string) (uint32, failover.WeightState) {
	switch len(values) {
	case 0:
		return 0, failover.WeightMissing
	case 1:
	default:
		return 0, failover.WeightInvalid
	}
	s := values[0]
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	if s == "" {
		return 0, failover.WeightInvalid
	}
	var n uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, failover.WeightInvalid
		}
		n = n*10 + uint32(c-'0')
		if n > failover.MaxWeight {
			return 0, failover.WeightInvalid
		}
	}
	return n, failover.WeightOK
}
