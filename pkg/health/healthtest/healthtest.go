// Package healthtest runs real servers of every health-check kind for
// tests: HTTP/1.1 and HTTP/2 (h2c or TLS with ALPN h2, net/http), gRPC
// with the standard grpc.health.v1 service (google.golang.org/grpc/health),
// TLS and plain TCP request/answer servers, and a UDP answerer. Each
// answers right, answers wrong or stays silent, as its Mode says, and can
// expect a PROXY protocol v1 line on every connection (and record it).
//
// The caller makes the listening sockets, so a test can create them inside
// a network namespace (netns.NS.Do) and serve them from anywhere. Servers
// run on goroutines of their own until Close.
package healthtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Mode is how a server answers.
type Mode int32

const (
	Right  Mode = iota // the answer a check passes on
	Wrong              // an answer it fails on (status 503, NOT_SERVING, other bytes)
	Silent             // no answer at all: the check times out
)

func (m Mode) String() string { return [...]string{"right", "wrong", "silent"}[m] }

// The payloads of the servers: checks that pass ask for these.
const (
	Request     = "PING\r\n" // what TCP, SSL and UDP checks send
	Answer      = "+PONG\r\n"
	WrongAnswer = "-ERR\r\n"
	BodyText    = `"status":"ok"` // in the HTTP body of a right answer
	Weight      = "37"            // the weight header of HTTP answers, right and wrong
	Service     = "echo.v1.Echo"  // the gRPC service whose status Mode sets
)

// WeightHeader is the header HTTP servers report Weight in.
const WeightHeader = "X-Load-Balancing-Endpoint-Weight"

// Server is one running server.
type Server struct {
	Addr net.Addr
	mode atomic.Int32
	// Proxy records the PROXY v1 lines received, when the server expects
	// them (WithProxy).
	Proxy *ProxyLog

	stop      func()
	closeOnce sync.Once
	done      chan struct{} // closed by Close: silent handlers return
}

// Set changes how the server answers from now on.
func (s *Server) Set(m Mode) { s.mode.Store(int32(m)) }

func (s *Server) get() Mode { return Mode(s.mode.Load()) }

// Close stops the server and closes its socket.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.stop()
	})
}

func newServer(addr net.Addr, proxy *ProxyLog) *Server {
	return &Server{Addr: addr, Proxy: proxy, done: make(chan struct{})}
}

// HTTP serves HTTP/1.1 on ln (inside TLS when cfg is not nil): right is
// 200 with BodyText, wrong is 503, both with the weight header.
func HTTP(ln net.Listener, cfg *tls.Config, proxy bool) *Server {
	return serveHTTP(ln, cfg, proxy, func(p *http.Protocols) { p.SetHTTP1(true) })
}

// HTTP2 serves HTTP/2 only on ln: h2c when cfg is nil, else TLS with ALPN
// h2. It answers an HTTP/1 request with 505.
func HTTP2(ln net.Listener, cfg *tls.Config, proxy bool) *Server {
	return serveHTTP(ln, cfg, proxy, func(p *http.Protocols) {
		if cfg == nil {
			p.SetUnencryptedHTTP2(true)
		} else {
			p.SetHTTP2(true)
		}
	})
}

func serveHTTP(ln net.Listener, cfg *tls.Config, proxy bool, protocols func(*http.Protocols)) *Server {
	ln, log := withProxy(ln, proxy)
	s := newServer(ln.Addr(), log)
	hs := &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          quietLog, // probes cut short, handshakes refused
		Protocols:         new(http.Protocols),
	}
	protocols(hs.Protocols)
	if cfg != nil {
		hs.TLSConfig = cfg.Clone()
		go hs.ServeTLS(ln, "", "")
	} else {
		go hs.Serve(ln)
	}
	s.stop = func() { hs.Close() }
	return s
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(WeightHeader, Weight)
	switch s.get() {
	case Silent:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case Wrong:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"status":"down"}`)
	default:
		io.WriteString(w, "{"+BodyText+"}")
	}
}

// GRPC serves gRPC on ln (TLS when cfg is not nil) with the standard
// health service: the server as a whole is SERVING; Service is SERVING
// (right) or NOT_SERVING (wrong); silent holds every call until it ends.
func GRPC(ln net.Listener, cfg *tls.Config, proxy bool) *Server {
	ln, log := withProxy(ln, proxy)
	s := newServer(ln.Addr(), log)
	hs := health.NewServer()
	opts := []grpc.ServerOption{grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		switch s.get() {
		case Silent:
			select {
			case <-ctx.Done():
			case <-s.done:
			}
			return nil, ctx.Err()
		case Wrong:
			hs.SetServingStatus(Service, healthpb.HealthCheckResponse_NOT_SERVING)
		default:
			hs.SetServingStatus(Service, healthpb.HealthCheckResponse_SERVING)
		}
		return h(ctx, req)
	})}
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(ln)
	s.stop = gs.Stop
	return s
}

// Stream serves a request/answer protocol on ln (inside TLS when cfg is
// not nil): it reads Request (and hangs up on anything else) and answers Answer (right) or WrongAnswer
// (wrong), or nothing (silent); with banner it answers at once, before
// reading anything.
func Stream(ln net.Listener, cfg *tls.Config, proxy, banner bool) *Server {
	ln, log := withProxy(ln, proxy)
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	s := newServer(ln.Addr(), log)
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if !banner {
					buf := make([]byte, len(Request))
					if _, err := io.ReadFull(c, buf); err != nil || string(buf) != Request {
						return // not the protocol: hang up
					}
				}
				switch s.get() {
				case Wrong:
					io.WriteString(c, WrongAnswer)
				case Right:
					io.WriteString(c, Answer)
				}
				io.Copy(io.Discard, c) // until the prober closes
			})
		}
	}()
	s.stop = func() { ln.Close() }
	return s
}

// UDP answers datagrams on pc: Answer (right), WrongAnswer (wrong) or
// nothing (silent), whatever they hold.
func UDP(pc net.PacketConn) *Server {
	s := newServer(pc.LocalAddr(), nil)
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			switch s.get() {
			case Wrong:
				pc.WriteTo([]byte(WrongAnswer), from)
			case Right:
				pc.WriteTo([]byte(Answer), from)
			}
		}
	}()
	s.stop = func() { pc.Close() }
	return s
}

var quietLog = log.New(io.Discard, "", 0)

// ProxyLog records the PROXY v1 lines a server received.
type ProxyLog struct {
	mu    sync.Mutex
	lines []ProxyLine
}

// ProxyLine is one PROXY v1 line and the connection it came on.
type ProxyLine struct {
	Line           string // without CRLF
	Local, Remote  string // the connection's addresses, as the server saw them
	MatchesSockets bool   // the line names exactly these addresses
}

// Lines returns the lines received so far.
func (l *ProxyLog) Lines() []ProxyLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ProxyLine(nil), l.lines...)
}

// withProxy wraps ln so that each connection's PROXY v1 line is read,
// checked and recorded before the server sees the connection. A
// connection without one is closed.
func withProxy(ln net.Listener, on bool) (net.Listener, *ProxyLog) {
	if !on {
		return ln, nil
	}
	pl := &proxyListener{Listener: ln, log: &ProxyLog{}}
	return pl, pl.log
}

type proxyListener struct {
	net.Listener
	log *ProxyLog
}

func (pl *proxyListener) Accept() (net.Conn, error) {
	for {
		c, err := pl.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := readLine(c)
		c.SetReadDeadline(time.Time{})
		if err != nil || !strings.HasPrefix(line, "PROXY ") {
			c.Close()
			continue
		}
		local, remote := c.LocalAddr().String(), c.RemoteAddr().String()
		pl.log.mu.Lock()
		pl.log.lines = append(pl.log.lines, ProxyLine{Line: line, Local: local, Remote: remote, MatchesSockets: matches(line, remote, local)})
		pl.log.mu.Unlock()
		return c, nil
	}
}

// readLine reads one CRLF-terminated line a byte at a time, so nothing
// after it is consumed.
func readLine(c net.Conn) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for len(b) < 108 { // the longest v1 line
		if _, err := c.Read(one); err != nil {
			return "", err
		}
		b = append(b, one[0])
		if strings.HasSuffix(string(b), "\r\n") {
			return strings.TrimSuffix(string(b), "\r\n"), nil
		}
	}
	return "", errors.New("PROXY line too long")
}

// matches reports whether line is "PROXY TCP4|TCP6 src dst sport dport"
// with src = the prober's address (the connection's remote) and dst = the
// server's.
func matches(line, remote, local string) bool {
	f := strings.Fields(line)
	if len(f) != 6 {
		return false
	}
	rh, rp, err1 := net.SplitHostPort(remote)
	lh, lp, err2 := net.SplitHostPort(local)
	if err1 != nil || err2 != nil {
		return false
	}
	fam := "TCP4"
	if strings.Contains(rh, ":") {
		fam = "TCP6"
	}
	return f[1] == fam && f[2] == rh && f[3] == lh && f[4] == rp && f[5] == lp
}

// Cert is a self-signed certificate for "backend.example", 127.0.0.1 and
// ::1, valid for a day, in a server configuration.
func Cert() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "backend.example"},
		DNSNames:     []string{"backend.example"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, nil
}
