package health

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// TestProbesSpread: 10 000 targets added at once, with TCP checks every
// 5 s, have their probes spread evenly over the interval: their first
// probes (the seeded offsets) and the probes that start in the third
// interval (the ±10 % periods keep them spread). No 250 ms of the
// interval holds far more than its share, none far less. The fake clock
// moves in 250 ms steps; every probe records the time it started.
func TestProbesSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("10 000 targets over three intervals")
	}
	const n, interval, step = 10000, 5 * time.Second, 250 * time.Millisecond
	const buckets = int(interval / step) // 20, so 500 probes in each on average
	clock := newFakeClock()
	start := clock.Now()
	var mu sync.Mutex
	var started []time.Duration
	refused := errors.New("refused")
	dial := func(context.Context, string, Key, netip.AddrPort) (net.Conn, error) {
		at := clock.Now().Sub(start)
		mu.Lock()
		started = append(started, at)
		mu.Unlock()
		return nil, refused
	}
	c := New(Options{Seed: 11, Clock: clock, Dial: dial})
	defer c.Stop()
	targets := make([]Target, n)
	for i := range targets {
		targets[i] = Target{
			Key:   Key{Rule: "spread", Backend: netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})},
			Check: Check{Kind: TCP, Port: 80, Interval: interval, Timeout: time.Second, HealthyThreshold: 2, UnhealthyThreshold: 2},
		}
	}
	if err := c.Set(targets); err != nil {
		t.Fatal(err)
	}
	// settle waits until the scheduler has started every probe due by
	// now, they have all ended, and it sleeps on its timer again.
	settle := func() {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			due, busy := c.queued()
			if busy == 0 && len(due) == n && due[0].After(clock.Now()) && len(clock.Pending()) == 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("probes did not settle")
			}
		}
	}
	settle()
	first, _ := c.queued()
	for range 3 * buckets {
		clock.Advance(step)
		settle()
	}
	// check fails unless every 250 ms bucket holds 375 to 625 of the about
	// 10 000 times (each falls into a bucket with probability 1/20:
	// 500 ± 22 at one standard deviation, ±125 is over five).
	check := func(what string, times []time.Duration) {
		counts := make([]int, buckets)
		for _, at := range times {
			counts[int(at%interval/step)]++
		}
		if len(times) < n*9/10 || len(times) > n*11/10 {
			t.Errorf("%s: %d probes, want about %d", what, len(times), n)
		}
		lo, hi := len(times), 0
		for _, k := range counts {
			lo, hi = min(lo, k), max(hi, k)
		}
		if lo < 375 || hi > 625 {
			t.Errorf("%s: 250 ms buckets hold %d to %d probes, want 375 to 625: %v", what, lo, hi, counts)
		}
		t.Logf("%s: %d probes, 250 ms buckets hold %d to %d", what, len(times), lo, hi)
	}
	var firsts []time.Duration
	for _, at := range first {
		firsts = append(firsts, at.Sub(start))
	}
	check("first probes (due times)", firsts)
	// Later, the periods' jitter keeps them spread. (The first interval's
	// end also holds some second probes, of targets with a short first
	// delay and a short period: the starts are compared from the third.)
	mu.Lock()
	defer mu.Unlock()
	var third []time.Duration
	for _, at := range started {
		if at >= 2*interval && at < 3*interval {
			third = append(third, at)
		}
	}
	check("probes started in the third interval", third)
}
