package engine

import (
	"runtime"
	"sync"
	"time"
)

// procs counts the Go Ps the running workers hold, process-wide (several
// engines may run in one process: tests, a hand-over rehearsed in one
// binary). A worker is a goroutine locked to its own OS thread: while it
// runs, and while it sleeps in its socket's poll, it keeps a P, so with
// GOMAXPROCS at the CPU count two workers left the control plane (the
// publication's table builders, the next-hop pass) a fraction of two
// CPUs even with both workers idle. Each worker gets a P of its own on
// top of the control plane's; the kernel, not Go's scheduler, shares the
// CPUs between the worker threads and the rest (doc.go "Goroutines").
var procs struct {
	sync.Mutex
	base  int // GOMAXPROCS before the first worker's P was added
	added int
}

// addProcs gives n workers a P each; removeProcs takes them back.
func addProcs(n int) {
	procs.Lock()
	defer procs.Unlock()
	if procs.added == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.added += n
	runtime.GOMAXPROCS(procs.base + procs.added)
}

func removeProcs(n int) {
	if n == 0 {
		return
	}
	procs.Lock()
	defer procs.Unlock()
	procs.added -= n
	runtime.GOMAXPROCS(procs.base + procs.added)
}

// ControlProcs is how many goroutines the control plane can run at once:
// GOMAXPROCS without the Ps of the running workers. Parallel control work
// (the publication's table builders) sizes itself by it, not by
// GOMAXPROCS, so that it does not take the workers' CPUs as well.
func ControlProcs() int {
	procs.Lock()
	defer procs.Unlock()
	if procs.added == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return procs.base
}

// yieldEvery is how often an idle worker passes through Go's scheduler.
// A worker is a goroutine locked to its thread that never blocks in the
// scheduler: it sleeps in its socket's poll, a system call. Go's monitor
// (sysmon) takes a goroutine that has not been rescheduled for 10 ms for
// one running that long: from then on it preempts it and takes its P back
// at every poll, which keeps the monitor itself waking every 20 µs — on
// an idle appliance a tenth of a CPU for the monitor alone, and a P
// handed back and forth at every poll. Yielding well within the 10 ms
// (runtime.Gosched: the locked thread hands its P over and takes it back,
// two thread switches) lets the monitor see the worker rescheduled.
const yieldEvery = 4 * time.Millisecond

// settledPollMs is the longest an idle worker that is settled
// (dataplane.Worker.Settled: no TX kick owed, chunks to receive into, no
// scan under way) sleeps in its socket's poll, against 1 ms while it has
// such work to finish. A packet or a request's doorbell ends the sleep at
// once either way, so the bound only sets how often an idle queue's loop
// runs: 125 times a second instead of 1000. It stays under the 10 ms
// after which Go's monitor retakes the P of a thread in a system call
// (and wakes every 20 µs itself for a while after): BenchmarkIdleWorkers
// measures 20 ms polls costing three times 8 ms ones (bench/README.md
// §6, "An idle worker's sleep").
const settledPollMs = 8

// idleWait is a worker's sleep on an idle queue: poll (its socket's, up
// to 1 ms or settledPollMs), and every yieldEvery a pass through the
// scheduler.
func idleWait(poll func()) func() {
	last := time.Now()
	return func() {
		poll()
		if now := time.Now(); now.Sub(last) >= yieldEvery {
			last = now
			runtime.Gosched()
		}
	}
}
