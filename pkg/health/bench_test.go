package health

import (
	"context"
	"net"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkProbeHTTP is one whole HTTP probe against a loopback server:
// connect, request, status and headers, close. It shows what a probe costs
// the appliance (1000 backends at a 5 s interval = 200 probes/s).
func BenchmarkProbeHTTP(b *testing.B) {
	srv := httptest.NewServer(weightHandler(200, "37"))
	defer srv.Close()
	p := newProber(serverTarget(b, HTTP, srv.Listener.Addr().String()), DirectDial, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := p.probe(ctx); !r.OK {
			b.Fatal(r.Err)
		}
	}
}

func BenchmarkProbeTCP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	p := newProber(serverTarget(b, TCP, ln.Addr().String()), DirectDial, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := p.probe(ctx); !r.OK {
			b.Fatal(r.Err)
		}
	}
}

func BenchmarkParseWeight(b *testing.B) {
	v := []string{"737"}
	b.ReportAllocs()
	for b.Loop() {
		if w, _ := parseWeight(v); w != 737 {
			b.Fatal(w)
		}
	}
}

// BenchmarkObserve is the tracker's cost per probe result.
func BenchmarkObserve(b *testing.B) {
	tr := newTracker(Key{Rule: "r"}, 2, 2, time.Time{})
	now := time.Now()
	pass, fail := results['P'], results['F']
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if i&1 == 0 {
			tr.observe(pass, now)
		} else {
			tr.observe(fail, now)
		}
	}
}
