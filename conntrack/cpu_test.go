package conntrack

import (
	"syscall"
	"testing"
	"time"
)

// cpuTimer reports the process's CPU time per op next to wall time: the
// build machine is shared, and wall ns/op there includes time spent
// waiting for a core.
type cpuTimer struct{ start time.Duration }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuTimer { return cpuTimer{cpuNow()} }

func (c cpuTimer) report(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64(cpuNow()-c.start)/float64(b.N), "cpu-ns/op")
	}
}
