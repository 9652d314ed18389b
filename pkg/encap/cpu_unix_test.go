//go:build unix

package encap_test

import (
	"syscall"
	"time"
)

// cpuTime returns the process's user+system CPU time. On a shared machine
// the benchmarks' wall-clock ns/op includes time spent waiting for a CPU;
// CPU time per packet does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
