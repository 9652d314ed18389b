//go:build linux

package packet_test

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time used by the calling OS thread
// (getrusage RUSAGE_THREAD). On a machine shared with other jobs, wall time
// per op includes time spent waiting for a CPU; thread CPU time does not.
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD, not exported by package syscall
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
