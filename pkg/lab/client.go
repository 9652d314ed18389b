package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// VIPURL returns the URL of the HTTP servers at vip ("http://203.0.113.10:80/").
func (l *Lab) VIPURL(vip netip.Addr) string {
	return "http://" + netip.AddrPortFrom(vip, l.Opts.HTTPPort).String() + "/"
}

// HTTPClient returns an HTTP client whose connections are created in the
// client namespace and bound to src. Keep-alives are off, so every request
// is a new TCP connection (a new flow for the load balancer).
func (l *Lab) HTTPClient(src netip.Addr) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:       l.dialer(src),
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		Timeout: 10 * time.Second,
	}
}

// dialer returns a DialContext that creates its socket in the client
// namespace, bound to src. The whole dial runs inside Do: the socket is
// created and connected on the namespace's thread, then used anywhere.
func (l *Lab) dialer(src netip.Addr) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := l.Client.Do(func() error {
			d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// HTTPGet fetches url from source address src in the client namespace and
// decodes the backend's Reply.
func (l *Lab) HTTPGet(ctx context.Context, src netip.Addr, url string) (Reply, error) {
	return l.httpDo(ctx, src, http.MethodGet, url, nil)
}

// HTTPPost posts body to url from src; the backend's Reply says in Size
// how many body bytes it received (large bodies exercise full-size TCP
// segments from the client through the forwarder).
func (l *Lab) HTTPPost(ctx context.Context, src netip.Addr, url string, body []byte) (Reply, error) {
	return l.httpDo(ctx, src, http.MethodPost, url, body)
}

func (l *Lab) httpDo(ctx context.Context, src netip.Addr, method, url string, body []byte) (Reply, error) {
	var rep Reply
	c := l.HTTPClient(src)
	defer c.CloseIdleConnections()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return rep, fmt.Errorf("http %s %s from %v: %w", method, url, src, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return rep, fmt.Errorf("http %s %s from %v: %w", method, url, src, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return rep, fmt.Errorf("http %s %s from %v: read body: %w", method, url, src, err)
	}
	if resp.StatusCode != http.StatusOK {
		return rep, fmt.Errorf("http %s %s from %v: status %s", method, url, src, resp.Status)
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return rep, fmt.Errorf("http %s %s from %v: decode reply %q: %w", method, url, src, out, err)
	}
	return rep, nil
}

// ListenUDP opens a UDP socket in the client namespace bound to src (port 0
// picks one).
func (l *Lab) ListenUDP(src netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := l.Client.Do(func() (err error) {
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(src))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen udp %v in %s: %w", src, l.Client.Name, err)
	}
	return c, nil
}

// UDPExchange sends payload from src (a fresh port) to dst and returns the
// first reply that comes from dst. Datagrams larger than the client MTU are
// fragmented by the client's kernel. It gives up when ctx ends; without a
// deadline in ctx it waits 2 s.
func (l *Lab) UDPExchange(ctx context.Context, src netip.Addr, dst netip.AddrPort, payload []byte) ([]byte, error) {
	c, err := l.ListenUDP(netip.AddrPortFrom(src, 0))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(2 * time.Second)
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.WriteToUDPAddrPort(payload, dst); err != nil {
		return nil, fmt.Errorf("udp %v → %v: send: %w", src, dst, err)
	}
	buf := make([]byte, 65536)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return nil, fmt.Errorf("udp %v → %v: no reply: %w", src, dst, err)
		}
		if from.Addr().Unmap() == dst.Addr().Unmap() && from.Port() == dst.Port() {
			return buf[:n], nil
		}
	}
}

// UDPWho sends a WHO? datagram of size bytes (at least len(WhoPrefix))
// from src to dst and decodes the backend's Reply, which says which backend
// received it and how many bytes arrived.
func (l *Lab) UDPWho(ctx context.Context, src netip.Addr, dst netip.AddrPort, size int) (Reply, error) {
	var rep Reply
	if size < len(WhoPrefix) {
		size = len(WhoPrefix)
	}
	payload := make([]byte, size)
	copy(payload, WhoPrefix)
	out, err := l.UDPExchange(ctx, src, dst, payload)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return rep, fmt.Errorf("udp who %v: decode reply %q: %w", dst, out, err)
	}
	return rep, nil
}
