package conntrack

import (
	"testing"
	"time"
)

// TestMonotonicClockShared: two clocks with one base (as a process and
// its successor have) read the same time, which advances with the
// system's monotonic clock.
func TestMonotonicClockShared(t *testing.T) {
	a := NewMonotonicClock()
	time.Sleep(20 * time.Millisecond)
	b := MonotonicClockAt(a.Base())
	// b's reading between two of a's: the test may be preempted between
	// any two of them.
	na, nb, na2 := a.Nanotime(), b.Nanotime(), a.Nanotime()
	if nb < na-int64(time.Millisecond) || nb > na2+int64(time.Millisecond) {
		t.Errorf("clocks with one base differ: b read %v between a's %v and %v", time.Duration(nb), time.Duration(na), time.Duration(na2))
	}
	if na < int64(20*time.Millisecond) {
		t.Errorf("clock read %v after sleeping 20ms", time.Duration(na))
	}
	if d := a.Base() - b.Base(); d < -int64(time.Microsecond)*100 || d > int64(time.Microsecond)*100 {
		t.Errorf("bases differ by %v", time.Duration(d))
	}
	late := MonotonicClockAt(MonotonicNow() - int64(time.Hour))
	if got := late.Nanotime(); got < int64(time.Hour) || got > int64(time.Hour+time.Second) {
		t.Errorf("a clock based an hour ago reads %v", time.Duration(got))
	}
	if n := testing.AllocsPerRun(100, func() { a.Nanotime() }); n != 0 {
		t.Errorf("Nanotime allocates %v", n)
	}
}
