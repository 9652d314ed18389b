package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
)

// TestEstimatorFixedWindow: a rate is the difference of the two latest
// samples over their distance, so it is 0 one window after traffic
// stopped, however long ago the previous request was (an estimator that
// waited for requests once said "459/s twenty seconds after traffic
// stopped").
func TestEstimatorFixedWindow(t *testing.T) {
	t0 := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	var at time.Time
	var rx uint64
	e := newEstimator(2*time.Second, func() *sample {
		return &sample{at: at, rx: rx, backend: map[[2]uint32]dataplane.Totals{{0, 1}: {Packets: rx / 2, Bytes: rx * 50, Conns: rx / 10}}}
	})
	rate := func() float64 { return e.latest().of(func(s *sample) uint64 { return s.rx }) }

	if w := e.latest(); w.ok() || rate() != 0 || w.nominal != 2*time.Second {
		t.Fatalf("before any sample: ok %v, rate %v, window %v", w.ok(), rate(), w.nominal)
	}
	at = t0
	e.tick()
	if e.latest().ok() {
		t.Fatal("one sample is not a window")
	}
	// 1000 packets/s for three windows.
	for i := 1; i <= 3; i++ {
		at, rx = t0.Add(time.Duration(i)*2*time.Second), uint64(i)*2000
		e.tick()
		w := e.latest()
		if got := rate(); got != 1000 {
			t.Fatalf("window %d: rx rate %v, want 1000", i, got)
		}
		if got := w.of(func(s *sample) uint64 { return s.backend[[2]uint32{0, 1}].Packets }); got != 500 {
			t.Fatalf("window %d: backend rate %v, want 500", i, got)
		}
		if b, c := w.of(func(s *sample) uint64 { return s.backend[[2]uint32{0, 1}].Bytes }), w.of(func(s *sample) uint64 { return s.backend[[2]uint32{0, 1}].Conns }); b != 50000 || c != 100 {
			t.Fatalf("window %d: backend bytes/s %v, connections/s %v, want 50000 and 100", i, b, c)
		}
		if w.seconds() != 2 {
			t.Fatalf("window %d: %v s, want 2", i, w.seconds())
		}
	}
	// Traffic stops: the next window says 0, and stays 0.
	for i := 4; i <= 14; i++ {
		at = t0.Add(time.Duration(i) * 2 * time.Second)
		e.tick()
		if got := rate(); got != 0 {
			t.Fatalf("%v after traffic stopped: rate %v, want 0", at.Sub(t0.Add(6*time.Second)), got)
		}
	}
	// A counter that went backwards (a worker restarted) is no rate.
	at, rx = at.Add(2*time.Second), 10
	e.tick()
	if got := rate(); got != 0 {
		t.Fatalf("counter went backwards: rate %v, want 0", got)
	}
}

// TestEstimatorNoWait: reading rates takes no sample and never waits for
// one (status answers at once; the old code slept 500 ms).
func TestEstimatorNoWait(t *testing.T) {
	calls := 0
	e := newEstimator(time.Hour, func() *sample { calls++; return &sample{at: time.Now()} })
	for range 100 {
		e.latest()
	}
	if calls != 0 {
		t.Fatalf("latest took %d samples", calls)
	}
}

// TestIdleQueueWarnings: a bound queue that received nothing over a whole
// window while the appliance was under load is named, with the likely cause
// for the XDP mode (docs/design.md#observability); no warning without load,
// with one queue, or before the first window ended.
func TestIdleQueueWarnings(t *testing.T) {
	t0 := time.Now()
	window := rateWindow{nominal: 2 * time.Second, prev: &sample{at: t0}, cur: &sample{at: t0.Add(2 * time.Second)}}
	busy := []control.QueueStat{{Queue: 0, RXPerSec: 500}, {Queue: 1, RXPerSec: 0}, {Queue: 2, RXPerSec: 3}}
	for _, tc := range []struct {
		name   string
		qs     []control.QueueStat
		total  float64
		mode   string
		window rateWindow
		want   []string
	}{
		{"generic", busy, 503, "generic", window, []string{"queue 1 received nothing over the last 2s while the appliance received 503 packets/s: the XDP program runs in generic mode, where a veth delivers every packet on queue 0"}},
		{"native", busy, 503, "native", window, []string{"queue 1 received nothing over the last 2s while the appliance received 503 packets/s: the NIC's receive hashing (RSS) sends it no flow"}},
		{"below load", busy, 99, "generic", window, nil},
		{"every queue busy", []control.QueueStat{{Queue: 0, RXPerSec: 500}, {Queue: 1, RXPerSec: 1}}, 501, "generic", window, nil},
		{"one queue", []control.QueueStat{{Queue: 3, RXPerSec: 0}}, 500, "generic", window, nil},
		{"no window yet", busy, 503, "generic", rateWindow{nominal: 2 * time.Second}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := idleQueueWarnings(tc.qs, tc.total, tc.mode, tc.window)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("got %q, want it to start with %q", got[i], tc.want[i])
				}
			}
		})
	}
}
