package daemon

import (
	"testing"
	"time"
)

// TestEstimatorFixedWindow: a rate is the difference of the two latest
// samples over their distance, so it is 0 one window after traffic
// stopped, however long ago the previous request was (issue 12 item 5:
// "459/s twenty seconds after traffic stopped").
func TestEstimatorFixedWindow(t *testing.T) {
	t0 := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	var at time.Time
	var rx uint64
	e := newEstimator(2*time.Second, func() *sample {
		return &sample{at: at, rx: rx, backend: map[[2]uint32]uint64{{0, 1}: rx / 2}}
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
		if got := w.of(func(s *sample) uint64 { return s.backend[[2]uint32{0, 1}] }); got != 500 {
			t.Fatalf("window %d: backend rate %v, want 500", i, got)
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
