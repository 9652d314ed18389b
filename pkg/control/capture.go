package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/xlbnet/xlb/pkg/capture"
)

// CaptureQuery is GET /v1/capture: which packets to capture and for how
// long. Empty fields take everything; the capture ends after Count
// packets, after Duration, or when the client goes away, whichever comes
// first.
type CaptureQuery struct {
	Point    string `json:"point,omitempty"`   // rx | tx | both (default both)
	Rule     string `json:"rule,omitempty"`    // rule name
	Backend  string `json:"backend,omitempty"` // backend address
	Verdict  string `json:"verdict,omitempty"` // tx, reply, drop, pass; a comma-separated list
	Reason   string `json:"reason,omitempty"`  // a drop or pass reason (implies verdict drop or pass)
	Src      string `json:"src,omitempty"`     // client ADDR, ADDR:PORT or PREFIX
	Dst      string `json:"dst,omitempty"`     // destination ADDR, ADDR:PORT or PREFIX
	Port     int    `json:"port,omitempty"`    // either port
	Proto    string `json:"proto,omitempty"`   // TCP, UDP, ICMP, … or a number
	Count    int    `json:"count,omitempty"`   // packets (records) to capture; 0 = until Duration or the client stops
	Duration string `json:"duration,omitempty"`
	Snaplen  int    `json:"snaplen,omitempty"` // bytes per frame (default capture.DefaultSnaplen)
	Rate     int    `json:"rate,omitempty"`    // packets per second per queue (default capture.DefaultRate)
}

// CaptureLine is one line of the capture stream (JSON lines): a packet,
// then, last, how the capture ended, or an error.
type CaptureLine struct {
	Packet *capture.Packet `json:"packet,omitempty"`
	Done   *CaptureDone    `json:"done,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// CaptureDone ends a capture stream.
type CaptureDone struct {
	Packets int    `json:"packets"` // packets sent in the stream
	Ended   string `json:"ended"`   // count | duration | client
	// What the taps counted: packets captured, refused by the rate
	// limit, refused because the daemon's reader fell behind.
	capture.TapStats
}

func captureQuery(q url.Values) (CaptureQuery, error) {
	var c CaptureQuery
	if err := noParams(q, "point", "rule", "backend", "verdict", "reason", "src", "dst", "port", "proto", "count", "duration", "snaplen", "rate"); err != nil {
		return c, err
	}
	c.Point, c.Rule, c.Backend, c.Verdict, c.Reason = q.Get("point"), q.Get("rule"), q.Get("backend"), q.Get("verdict"), q.Get("reason")
	c.Src, c.Dst, c.Proto, c.Duration = q.Get("src"), q.Get("dst"), q.Get("proto"), q.Get("duration")
	for _, p := range []struct {
		key string
		dst *int
	}{{"port", &c.Port}, {"count", &c.Count}, {"snaplen", &c.Snaplen}, {"rate", &c.Rate}} {
		if err := intParam(q, p.key, p.dst); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c CaptureQuery) values() url.Values {
	v := url.Values{}
	for _, kv := range [][2]string{{"point", c.Point}, {"rule", c.Rule}, {"backend", c.Backend}, {"verdict", c.Verdict}, {"reason", c.Reason},
		{"src", c.Src}, {"dst", c.Dst}, {"proto", c.Proto}, {"duration", c.Duration}} {
		set(v, kv[0], kv[1])
	}
	for _, kv := range []struct {
		k string
		n int
	}{{"port", c.Port}, {"count", c.Count}, {"snaplen", c.Snaplen}, {"rate", c.Rate}} {
		if kv.n != 0 {
			v.Set(kv.k, strconv.Itoa(kv.n))
		}
	}
	return v
}

// Check validates the shape of a capture query (the daemon resolves
// names and addresses).
func (c CaptureQuery) Check() error {
	if c.Point != "" {
		if _, ok := capture.ParsePoint(c.Point); !ok {
			return BadRequest("capture: point %q: want rx, tx or both", c.Point)
		}
	}
	if c.Port < 0 || c.Port > 65535 {
		return BadRequest("capture: port %d is outside [1, 65535]", c.Port)
	}
	if c.Count < 0 {
		return BadRequest("capture: count %d is negative", c.Count)
	}
	if c.Duration != "" {
		d, err := time.ParseDuration(c.Duration)
		if err != nil || d <= 0 {
			return BadRequest("capture: duration %q: want a positive duration such as 10s", c.Duration)
		}
	}
	if c.Snaplen != 0 && (c.Snaplen < 64 || c.Snaplen > capture.MaxSnaplen) {
		return BadRequest("capture: snaplen %d is outside [64, %d]", c.Snaplen, capture.MaxSnaplen)
	}
	if c.Rate != 0 && (c.Rate < 1 || c.Rate > capture.MaxRate) {
		return BadRequest("capture: rate %d is outside [1, %d]", c.Rate, capture.MaxRate)
	}
	return nil
}

// Capturer is the part of the API that streams packets; the daemon
// implements it beside API.
type Capturer interface {
	// Capture calls emit for every packet captured, in order, and returns
	// how the capture ended. An error before the first emit is the
	// request's error; emit's error (the client went away) ends the
	// capture.
	Capture(ctx context.Context, q CaptureQuery, emit func(*capture.Packet) error) (*CaptureDone, error)
}

// handleCapture serves GET /v1/capture as a stream of JSON lines
// (application/x-ndjson): the status line is sent with the first packet
// (or the end), so an error found before anything was captured is an
// ordinary error reply.
func handleCapture(mux *http.ServeMux, api API) {
	mux.HandleFunc("GET /v1/capture", func(w http.ResponseWriter, r *http.Request) {
		c, ok := api.(Capturer)
		if !ok {
			writeError(w, Errorf(http.StatusNotFound, "this daemon does not capture"))
			return
		}
		q, err := captureQuery(r.URL.Query())
		if err == nil {
			err = q.Check()
		}
		if err != nil {
			writeError(w, err)
			return
		}
		fl, _ := w.(http.Flusher)
		started := false
		enc := json.NewEncoder(w)
		line := func(l CaptureLine) error {
			if !started {
				started = true
				w.Header().Set("Content-Type", "application/x-ndjson")
				w.WriteHeader(http.StatusOK)
			}
			if err := enc.Encode(l); err != nil {
				return err
			}
			if fl != nil {
				fl.Flush()
			}
			return nil
		}
		done, err := c.Capture(r.Context(), q, func(p *capture.Packet) error { return line(CaptureLine{Packet: p}) })
		switch {
		case err != nil && !started:
			writeError(w, err)
		case err != nil:
			line(CaptureLine{Error: err.Error()})
		default:
			line(CaptureLine{Done: done})
		}
	})
}

// Capture runs a capture on the daemon and calls fn with every packet
// until the daemon ends it (count, duration) or ctx ends; it returns how
// it ended. fn's error stops the capture and is returned.
func (c *Client) Capture(ctx context.Context, q CaptureQuery, fn func(*capture.Packet) error) (*CaptureDone, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://xlb/v1/capture?"+q.values().Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("control request: %w", err)
	}
	// A capture lasts as long as it is asked to: no client timeout.
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil { // stopped before the first packet
			return &CaptureDone{Ended: "client"}, nil
		}
		return nil, c.dialError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, replyError(resp)
	}
	rd := bufio.NewReader(resp.Body)
	dec := json.NewDecoder(rd)
	for {
		var l CaptureLine
		if err := dec.Decode(&l); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				if ctx.Err() != nil {
					return &CaptureDone{Ended: "client"}, nil
				}
				return nil, fmt.Errorf("capture: the daemon ended the stream without saying why")
			}
			if ctx.Err() != nil {
				return &CaptureDone{Ended: "client"}, nil
			}
			return nil, fmt.Errorf("capture: read stream: %w", err)
		}
		switch {
		case l.Error != "":
			return nil, fmt.Errorf("capture: %s", l.Error)
		case l.Done != nil:
			return l.Done, nil
		case l.Packet != nil:
			if err := fn(l.Packet); err != nil {
				return nil, err
			}
		}
	}
}
