package control

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/capture"
)

// captureAPI is a fakeAPI that captures: it emits n packets named after
// the query's rule, or fails as the query asks.
type captureAPI struct {
	fakeAPI
	got chan CaptureQuery
}

func (f *captureAPI) Capture(ctx context.Context, q CaptureQuery, emit func(*capture.Packet) error) (*CaptureDone, error) {
	f.got <- q
	switch q.Rule {
	case "nope":
		return nil, BadRequest("capture: no rule %q", q.Rule)
	case "busy":
		return nil, Errorf(http.StatusConflict, "another capture is running")
	case "forever":
		<-ctx.Done()
		return &CaptureDone{Ended: "client"}, nil
	}
	for i := range q.Count {
		p := &capture.Packet{Time: time.Unix(int64(i), 0), Point: "rx", Verdict: "tx", Rule: q.Rule, Len: 3, Data: []byte{1, 2, byte(i)}}
		if err := emit(p); err != nil {
			return nil, err
		}
		if q.Rule == "breaks" {
			return nil, errors.New("worker gone")
		}
	}
	return &CaptureDone{Packets: q.Count, Ended: "count", TapStats: capture.TapStats{Captured: uint64(q.Count), Limited: 2}}, nil
}

func TestCaptureStream(t *testing.T) {
	api := &captureAPI{got: make(chan CaptureQuery, 10)}
	path, c := serve(t, api)
	ctx := context.Background()

	var pkts []*capture.Packet
	q := CaptureQuery{Point: "tx", Rule: "web", Backend: "10.0.1.10", Verdict: "tx,drop", Reason: "no-rule", Src: "198.51.100.0/24", Dst: "203.0.113.10:80", Port: 80, Proto: "TCP", Count: 5, Duration: "10s", Snaplen: 128, Rate: 50}
	done, err := c.Capture(ctx, q, func(p *capture.Packet) error { pkts = append(pkts, p); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := <-api.got; got != q {
		t.Errorf("daemon got %+v, want %+v", got, q)
	}
	if len(pkts) != 5 || pkts[4].Data[2] != 4 || pkts[4].Rule != "web" || done.Packets != 5 || done.Ended != "count" || done.Limited != 2 {
		t.Errorf("%d packets, done %+v", len(pkts), done)
	}

	// Errors before the first packet are plain error replies.
	for _, tc := range []struct {
		q      CaptureQuery
		status int
	}{
		{CaptureQuery{Rule: "nope", Count: 1}, 400},
		{CaptureQuery{Rule: "busy", Count: 1}, 409},
		{CaptureQuery{Point: "sideways"}, 400},
		{CaptureQuery{Count: -1}, 400},
		{CaptureQuery{Duration: "soon"}, 400},
		{CaptureQuery{Snaplen: 10}, 400},
		{CaptureQuery{Rate: capture.MaxRate + 1}, 400},
		{CaptureQuery{Port: 70000}, 400},
	} {
		_, err := c.Capture(ctx, tc.q, func(*capture.Packet) error { return nil })
		var e *Error
		if !errors.As(err, &e) || e.Status != tc.status {
			t.Errorf("%+v: %v, want status %d", tc.q, err, tc.status)
		}
		if tc.q.Rule != "" {
			<-api.got
		}
	}
	if code, msg := raw(t, path, "GET /v1/capture?bogus=1 HTTP/1.0\r\n\r\n"); code != 400 || !strings.Contains(msg, "bogus") {
		t.Errorf("unknown parameter: %d %q", code, msg)
	}

	// An error once packets flowed ends the stream with it.
	_, err = c.Capture(ctx, CaptureQuery{Rule: "breaks", Count: 3}, func(*capture.Packet) error { return nil })
	<-api.got
	if err == nil || !strings.Contains(err.Error(), "worker gone") {
		t.Errorf("mid-stream error: %v", err)
	}

	// The client stopping ends the daemon's capture.
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-api.got; time.Sleep(50 * time.Millisecond); cancel() }()
	done, err = c.Capture(cctx, CaptureQuery{Rule: "forever"}, func(*capture.Packet) error { return nil })
	if err != nil || done.Ended != "client" {
		t.Errorf("cancelled capture: %+v, %v", done, err)
	}
}

func TestCaptureNotOffered(t *testing.T) {
	_, c := serve(t, &fakeAPI{})
	_, err := c.Capture(context.Background(), CaptureQuery{Count: 1}, func(*capture.Packet) error { return nil })
	var e *Error
	if !errors.As(err, &e) || e.Status != 404 {
		t.Errorf("a daemon without capture: %v", err)
	}
}

// TestCaptureNeedsAdmin: a read-only peer may read status, not packets.
func TestCaptureNeedsAdmin(t *testing.T) {
	api := &captureAPI{got: make(chan CaptureQuery, 10)}
	h := NewHandler(api)
	for _, tc := range []struct {
		level Level
		want  int
	}{{LevelNone, 403}, {LevelReadOnly, 403}, {LevelAdmin, 200}} {
		req := httptest.NewRequest("GET", "http://xlb/v1/capture?count=1&rule=web", nil)
		req = req.WithContext(WithPeer(req.Context(), Peer{PID: 42, UID: 1000, Level: tc.level}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.level, w.Code, w.Body, tc.want)
		}
	}
	if len(api.got) != 1 {
		t.Errorf("the API ran %d captures, want 1 (the admin's)", len(api.got))
	}
}
