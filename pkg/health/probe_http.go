package health

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
)

// runHTTP is HTTP and HTTPS: one HTTP/1.1 request on a fresh connection.
func (p *prober) runHTTP(ctx context.Context) Result {
	conn, release, err := p.connect(ctx)
	if err != nil {
		return Result{Err: err}
	}
	defer release()
	if conn, err = p.handshake(ctx, conn); err != nil {
		return Result{Err: err}
	}
	if _, err := conn.Write(p.request); err != nil {
		return Result{Err: fmt.Errorf("send request: %w", err)}
	}
	br := bufio.NewReaderSize(io.LimitReader(conn, maxResponseHead+2*MaxBodyMatch), 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return Result{Err: fmt.Errorf("read response: %w", err)}
	}
	return p.judge(resp)
}

// judge turns an HTTP response into a result: the weight header counts
// whatever the status; the check passes on 200 OK and, with a response
// to match, when the body's first MaxBodyMatch bytes contain it. The body
// is read only then; closing the connection ends it.
func (p *prober) judge(resp *http.Response) Result {
	w, ws := parseWeight(resp.Header.Values(WeightHeader))
	r := Result{OK: resp.StatusCode == http.StatusOK, WeightKnown: true, Weight: w, WeightState: ws}
	if !r.OK {
		r.Err = fmt.Errorf("%w: %s", ErrStatus, resp.Status)
		return r
	}
	if p.response == "" {
		return r
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyMatch))
	if !bytes.Contains(body, []byte(p.response)) {
		r.OK = false
		if err != nil {
			r.Err = fmt.Errorf("read body (%d bytes): %w", len(body), err)
		} else {
			r.Err = fmt.Errorf("%w: the body's first %d bytes lack %s", ErrResponse, len(body), quote([]byte(p.response)))
		}
	}
	return r
}

// runHTTP2 is one HTTP/2 request on a fresh connection, h2c or TLS with
// ALPN h2, through net/http's HTTP/2 client (doc.go, "Decisions").
func (p *prober) runHTTP2(ctx context.Context) Result {
	scheme := "http"
	if p.tls != nil {
		scheme = "https"
	}
	cc, err := p.h2.NewClientConn(ctx, scheme, p.addr.String())
	if err != nil {
		return Result{Err: err}
	}
	defer cc.Close()
	req := &http.Request{
		Method: http.MethodGet,
		URL:    &url.URL{Scheme: scheme, Host: p.host, Opaque: p.path},
		Host:   p.host,
		Header: http.Header{"User-Agent": {userAgent}, "Accept": {"*/*"}},
	}
	resp, err := cc.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return Result{Err: fmt.Errorf("request: %w", err)}
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		return Result{Err: fmt.Errorf("the answer is %s, not HTTP/2", resp.Proto)}
	}
	return p.judge(resp)
}

// http2Transport makes the HTTP/2-only transport of an HTTP2 prober,
// whose dialers are the prober's own: the DialFunc, the PROXY line and
// the TLS handshake, which must choose h2.
func (p *prober) http2Transport() *http.Transport {
	tr := &http.Transport{
		Protocols:              new(http.Protocols),
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxResponseHead,
	}
	if p.tls == nil {
		tr.Protocols.SetUnencryptedHTTP2(true)
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return p.open(ctx) }
		return tr
	}
	tr.Protocols.SetHTTP2(true)
	tr.DialTLSContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		conn, err := p.open(ctx)
		if err != nil {
			return nil, err
		}
		tc, err := p.handshake(ctx, conn)
		if err != nil {
			conn.Close()
			return nil, err
		}
		if proto := tc.(*tls.Conn).ConnectionState().NegotiatedProtocol; proto != "h2" {
			conn.Close()
			return nil, fmt.Errorf("tls handshake: the server chose %q in ALPN, not h2", proto)
		}
		return tc, nil
	}
	return tr
}
