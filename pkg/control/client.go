package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// Client talks to a daemon's control socket. It is safe for concurrent
// use.
type Client struct {
	path string
	http *http.Client
}

// NewClient returns a client of the socket at path; it connects on the
// first call.
func NewClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 4,
	}
	return &Client{path: path, http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Status returns the appliance's status.
func (c *Client) Status(ctx context.Context, q StatusQuery) (*Status, error) {
	var s Status
	return &s, c.call(ctx, http.MethodGet, "/v1/status", q.values(), nil, &s)
}

// Backends lists the backends of the rules q selects (every rule's
// without a selection), paged by rule as Status pages.
func (c *Client) Backends(ctx context.Context, q StatusQuery) ([]Backend, error) {
	var bs []Backend
	q.Summary = false
	return bs, c.call(ctx, http.MethodGet, "/v1/backends", q.values(), nil, &bs)
}

// StatusReply and BackendsReply return the daemon's JSON answer as it
// arrives, for a caller that copies it on without holding it whole (the
// command line's --json); the caller closes it.
func (c *Client) StatusReply(ctx context.Context, q StatusQuery) (io.ReadCloser, error) {
	return c.open(ctx, "/v1/status", q.values())
}

// BackendsReply: see StatusReply.
func (c *Client) BackendsReply(ctx context.Context, q StatusQuery) (io.ReadCloser, error) {
	q.Summary = false
	return c.open(ctx, "/v1/backends", q.values())
}

// open does one GET and returns the body of a 200 reply.
func (c *Client) open(ctx context.Context, path string, q url.Values) (io.ReadCloser, error) {
	u := "http://xlb" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("control request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.dialError(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, replyError(resp)
	}
	return resp.Body, nil
}

// ChangeBackend marks, drains, undrains, re-weights or resets a backend;
// it returns once the change is saved and published.
func (c *Client) ChangeBackend(ctx context.Context, ch BackendChange) (*BackendChangeResult, error) {
	var r BackendChangeResult
	return &r, c.call(ctx, http.MethodPost, "/v1/backend/"+url.PathEscape(string(ch.Action)), nil, ch, &r)
}

// Reload makes the daemon re-read its configuration and state file. A
// rejected configuration is an *Error whose Issues name file, line and key.
func (c *Client) Reload(ctx context.Context, req ReloadRequest) (*ReloadResult, error) {
	var r ReloadResult
	return &r, c.call(ctx, http.MethodPost, "/v1/reload", nil, req, &r)
}

// Conntrack lists, counts or flushes tracked flows (q.Op).
func (c *Client) Conntrack(ctx context.Context, q ConntrackQuery) (*ConntrackResult, error) {
	var r ConntrackResult
	switch q.Op {
	case ConntrackList:
		return &r, c.call(ctx, http.MethodGet, "/v1/conntrack", q.values(), nil, &r)
	case ConntrackCount:
		return &r, c.call(ctx, http.MethodGet, "/v1/conntrack/count", q.values(), nil, &r)
	case ConntrackFlush:
		return &r, c.call(ctx, http.MethodPost, "/v1/conntrack/flush", nil, q, &r)
	}
	return nil, fmt.Errorf("conntrack: unknown operation %q", q.Op)
}

// Lookup explains where a flow would go.
func (c *Client) Lookup(ctx context.Context, q LookupQuery) (*LookupResult, error) {
	var r LookupResult
	return &r, c.call(ctx, http.MethodGet, "/v1/lookup", q.values(), nil, &r)
}

// call does one request. A reply that is not 200 becomes an *Error; a
// socket nobody serves becomes one line that says so.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, body, out any) error {
	u := "http://xlb" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("control request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.dialError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return replyError(resp)
	}
	// Decoded as it arrives: a reply of every rule is streamed.
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("control socket %s: read reply: %w", c.path, err)
	}
	return nil
}

// dialError says in one line why a request did not reach the daemon.
func (c *Client) dialError(err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no xlb daemon is serving the control socket %s (is xlb running?)", c.path)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("control socket %s: permission denied (run as root)", c.path)
	}
	return fmt.Errorf("control socket %s: %w", c.path, err)
}

// replyError turns a reply that is not 200 into an *Error.
func replyError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &Error{}
	if json.Unmarshal(data, e) != nil || e.Message == "" {
		e.Message = fmt.Sprintf("daemon answered %s", resp.Status)
	}
	e.Status = resp.StatusCode
	return e
}
