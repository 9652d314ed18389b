package benchutil

import (
	"runtime"
	"testing"
	"time"
)

func TestCPUTimeAdvancesWithWork(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, t0 := Process(), Thread()
	x := uint64(1)
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if x == 0 {
		t.Log(x)
	}
	if !p.ok || !t0.ok {
		t.Skip("skipped: getrusage unavailable on this platform")
	}
	if p.Elapsed() < 10*time.Millisecond {
		t.Errorf("process CPU after 50 ms of spinning: %v", p.Elapsed())
	}
	if t0.Elapsed() <= 0 {
		t.Errorf("thread CPU did not advance: %v", t0.Elapsed())
	}
}
