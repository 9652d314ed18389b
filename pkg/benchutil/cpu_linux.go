package benchutil

import (
	"time"

	"golang.org/x/sys/unix"
)

// The CPU-time clocks count in nanoseconds; getrusage counts in scheduler
// ticks, too coarse for short benchmarks.
func clock(id int32) (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

func processCPU() (time.Duration, bool) { return clock(unix.CLOCK_PROCESS_CPUTIME_ID) }
func threadCPU() (time.Duration, bool)  { return clock(unix.CLOCK_THREAD_CPUTIME_ID) }
