// Package benchutil measures CPU time for benchmarks, and starts their
// helper processes. The machines xlb is built on are shared: wall-clock
// ns/op includes the time a benchmark waited for a core, CPU time does
// not. Benchmarks report both, and compare against references measured in
// the same run. A helper whose CPU must not count as the benchmark's (a
// fleet peer, a health-check backend) runs as a Child: the test binary
// started again in a role its TestMain dispatches on.
package benchutil

import (
	"testing"
	"time"
)

// ProcessCPU returns the user + system CPU time of the whole process, or
// false where the platform cannot say.
func ProcessCPU() (time.Duration, bool) { return processCPU() }

// ThreadCPU returns the user + system CPU time of the calling OS thread
// (lock the goroutine to its thread around the measurement).
func ThreadCPU() (time.Duration, bool) { return threadCPU() }

// Meter measures the CPU time of a benchmark's loop.
type Meter struct {
	start  time.Duration
	ok     bool
	thread bool
}

// Process starts a meter of the process's CPU time (for benchmarks whose
// work spans goroutines).
func Process() Meter {
	d, ok := ProcessCPU()
	return Meter{start: d, ok: ok}
}

// Thread starts a meter of the calling thread's CPU time.
func Thread() Meter {
	d, ok := ThreadCPU()
	return Meter{start: d, ok: ok, thread: true}
}

// Elapsed returns the CPU time since the meter started.
func (m Meter) Elapsed() time.Duration {
	now, _ := ProcessCPU()
	if m.thread {
		now, _ = ThreadCPU()
	}
	return now - m.start
}

// Report adds the CPU nanoseconds per iteration under unit (for example
// "cpu-ns/op" or "cpu-ns/pkt"). Nothing is reported where CPU time is not
// available.
func (m Meter) Report(b *testing.B, unit string) {
	if m.ok && b.N > 0 {
		b.ReportMetric(float64(m.Elapsed().Nanoseconds())/float64(b.N), unit)
	}
}
