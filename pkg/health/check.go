package health

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind is what a probe does (doc.go, "One probe"). The daemon maps the
// configuration's health_check.type to it (pkg/daemon/enums.go).
type Kind uint8

const (
	NoProbe Kind = iota // NONE: no probe, healthy at once
	HTTP                // GET request_path, 200 passes
	HTTPS               // HTTP inside TLS
	TCP                 // connect (request, response)
	SSL                 // TLS handshake (request, response)
	HTTP2               // GET request_path over HTTP/2: TLS with ALPN h2, or h2c
	GRPC                // grpc.health.v1 Check, SERVING passes
	UDP                 // a datagram, answered (response)
)

var kindNames = [...]string{NoProbe: "NONE", HTTP: "HTTP", HTTPS: "HTTPS", TCP: "TCP", SSL: "SSL", HTTP2: "HTTP2", GRPC: "GRPC", UDP: "UDP"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// HTTPFamily reports whether the probe reads an HTTP response, and so
// learns the backend's weight from its header.
func (k Kind) HTTPFamily() bool { return k == HTTP || k == HTTPS || k == HTTP2 }

// network is the socket type the probe dials: "udp" or "tcp".
func (k Kind) network() string {
	if k == UDP {
		return "udp"
	}
	return "tcp"
}

// ProxyHeader is what a TCP-based probe sends before its own bytes.
type ProxyHeader uint8

const (
	ProxyNone ProxyHeader = iota // NONE: nothing
	ProxyV1                      // PROXY_V1: a PROXY protocol v1 line with the probe's addresses
)

var proxyHeaderNames = [...]string{ProxyNone: "NONE", ProxyV1: "PROXY_V1"}

func (p ProxyHeader) String() string {
	if int(p) < len(proxyHeaderNames) {
		return proxyHeaderNames[p]
	}
	return fmt.Sprintf("ProxyHeader(%d)", uint8(p))
}

// MaxBodyMatch is how much of an HTTP body Check.Response is looked for
// in, as Google's content-based checks.
const MaxBodyMatch = 1024

// DefaultRequestPath is probed by HTTP kinds when Check.RequestPath is "".
const DefaultRequestPath = "/"

// Check is how one target is probed. It is comparable: Set restarts a
// target whose Check changed.
type Check struct {
	Kind        Kind
	Port        uint16      // the backend's port probed; not used by NoProbe
	TLS         bool        // HTTP2 (false: h2c) and GRPC; HTTPS and SSL always use TLS
	RequestPath string      // HTTP kinds: the path requested; "" is DefaultRequestPath
	Host        string      // HTTP Host (:authority) and TLS SNI; "" is the backend's address
	Request     string      // TCP, SSL: bytes sent once connected; UDP: the datagram
	Response    string      // TCP, SSL, UDP: the answer's first bytes; HTTP kinds: text in the body's first MaxBodyMatch bytes
	ProxyHeader ProxyHeader // TCP-based kinds: sent before anything else
	// GRPCServiceName is the service a GRPC probe asks about; "" is the
	// server as a whole.
	GRPCServiceName string
	// Direct sends the probes from the appliance's own socket to
	// backend:port (DirectDial) whatever Options.Dial is; connect-only TCP
	// probes then take the Checker's connector (connector.go).
	Direct bool

	Interval time.Duration // between probes (± JitterFraction)
	Timeout  time.Duration // of one probe: connect, handshake, request, response

	HealthyThreshold   int // passes in a row to become HEALTHY
	UnhealthyThreshold int // failures in a row to become UNHEALTHY
}

// usesTLS reports whether the probe runs inside TLS.
func (c Check) usesTLS() bool {
	return c.Kind == HTTPS || c.Kind == SSL || (c.TLS && (c.Kind == HTTP2 || c.Kind == GRPC))
}

// validate reports what makes c impossible to probe, naming the target
// by key.
func (c Check) validate(key Key) error {
	switch c.Kind {
	case NoProbe:
		return nil
	case HTTP, HTTPS, TCP, SSL, HTTP2, GRPC, UDP:
	default:
		return fmt.Errorf("%s: unknown health check kind %d", key, c.Kind)
	}
	switch {
	case c.Request != "" && c.Kind != TCP && c.Kind != SSL && c.Kind != UDP:
		return fmt.Errorf("%s: a %s check sends no request payload", key, c.Kind)
	case c.Response != "" && c.Kind == GRPC:
		return fmt.Errorf("%s: a GRPC check matches no response", key)
	case c.ProxyHeader != ProxyNone && c.Kind == UDP:
		return fmt.Errorf("%s: a UDP check sends no PROXY header", key)
	case c.ProxyHeader > ProxyV1:
		return fmt.Errorf("%s: unknown proxy header %d", key, c.ProxyHeader)
	}
	if c.Port == 0 {
		return fmt.Errorf("%s: health check port 0", key)
	}
	if c.Interval <= 0 || c.Timeout <= 0 {
		return fmt.Errorf("%s: health check interval %s and timeout %s must be positive", key, c.Interval, c.Timeout)
	}
	if c.HealthyThreshold < 1 || c.UnhealthyThreshold < 1 {
		return fmt.Errorf("%s: health check thresholds %d/%d must be at least 1", key, c.HealthyThreshold, c.UnhealthyThreshold)
	}
	if c.Kind.HTTPFamily() {
		if c.RequestPath != "" && !strings.HasPrefix(c.RequestPath, "/") {
			return fmt.Errorf("%s: request path %q must start with /", key, c.RequestPath)
		}
		if i := strings.IndexFunc(c.RequestPath+c.Host, badHeaderRune); i >= 0 {
			return fmt.Errorf("%s: request path %q or host %q contains a space or control character", key, c.RequestPath, c.Host)
		}
	}
	return nil
}

// Validate reports what makes t impossible to probe. The config package
// checks the same when it loads a rule; the Checker checks again because
// it is also driven by the CLI and tests.
func (t Target) Validate() error {
	if t.Rule == "" {
		return errors.New("empty rule name")
	}
	if !t.Backend.IsValid() {
		return fmt.Errorf("rule %s: invalid backend address", t.Rule)
	}
	return t.Check.validate(t.Key)
}

func badHeaderRune(r rune) bool { return r <= ' ' || r == 0x7f }
