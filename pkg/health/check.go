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
	TCP                 // connect
)

var kindNames = [...]string{NoProbe: "NONE", HTTP: "HTTP", HTTPS: "HTTPS", TCP: "TCP"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// HTTPFamily reports whether the probe reads an HTTP response, and so
// learns the backend's weight from its header.
func (k Kind) HTTPFamily() bool { return k == HTTP || k == HTTPS }

// DefaultRequestPath is probed by HTTP kinds when Check.RequestPath is "".
const DefaultRequestPath = "/"

// Check is how one target is probed. It is comparable: Set restarts a
// target whose Check changed.
type Check struct {
	Kind        Kind
	Port        uint16 // the backend's port probed; not used by NoProbe
	RequestPath string // HTTP kinds: the path requested; "" is DefaultRequestPath
	Host        string // HTTP Host header and TLS SNI; "" is the backend's address

	Interval time.Duration // between probes (± JitterFraction)
	Timeout  time.Duration // of one probe: connect, handshake, request, response

	HealthyThreshold   int // passes in a row to become HEALTHY
	UnhealthyThreshold int // failures in a row to become UNHEALTHY
}

// validate reports what makes c impossible to probe, naming the target
// by key.
func (c Check) validate(key Key) error {
	switch c.Kind {
	case NoProbe:
		return nil
	case HTTP, HTTPS, TCP:
	default:
		return fmt.Errorf("%s: unknown health check kind %d", key, c.Kind)
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
