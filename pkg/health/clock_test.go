package health

import (
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when the test calls Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c        chan time.Time
	at       time.Time
	d        time.Duration
	clock    *fakeClock
	inactive bool // fired or stopped
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{c: make(chan time.Time, 1), at: f.now.Add(d), d: d, clock: f}
	f.timers = append(f.timers, t)
	if d <= 0 {
		t.fire()
	}
	return t
}

// Advance moves the clock and fires every timer that is due, in order.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	for _, t := range f.timers {
		if !t.inactive && !t.at.After(f.now) {
			t.fire()
		}
	}
}

// Pending returns the durations the active timers were created with.
func (f *fakeClock) Pending() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for _, t := range f.timers {
		if !t.inactive {
			out = append(out, t.d)
		}
	}
	return out
}

// PendingAt returns the times the active timers are due at.
func (f *fakeClock) PendingAt() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Time
	for _, t := range f.timers {
		if !t.inactive {
			out = append(out, t.at)
		}
	}
	return out
}

func (t *fakeTimer) fire() { // clock.mu held
	t.inactive = true
	t.c <- t.at
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.inactive
	t.inactive = true
	return was
}
