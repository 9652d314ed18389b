package engine

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestProcsFollowWorkers: every running worker adds a P to GOMAXPROCS,
// across engines, and takes it back when it stops; the control plane's
// share (ControlProcs) stays what GOMAXPROCS was without workers.
func TestProcsFollowWorkers(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(base) })
	steps := []struct {
		name       string
		add        int // > 0 adds, < 0 removes
		gomaxprocs int
	}{
		{"first engine's two workers", 2, base + 2},
		{"a second engine's worker", 1, base + 3},
		{"the first engine stops", -2, base + 1},
		{"no worker left", -1, base},
		{"an engine without workers", 0, base},
	}
	for _, s := range steps {
		if s.add >= 0 {
			addProcs(s.add)
		} else {
			removeProcs(-s.add)
		}
		if got := runtime.GOMAXPROCS(0); got != s.gomaxprocs {
			t.Errorf("%s: GOMAXPROCS %d, want %d", s.name, got, s.gomaxprocs)
		}
		if got := ControlProcs(); got != base {
			t.Errorf("%s: ControlProcs %d, want %d", s.name, got, base)
		}
	}
	removeProcs(0)
	if procs.added != 0 {
		t.Errorf("%d Ps still counted as added", procs.added)
	}
}

// BenchmarkControlBesideIdleWorkers: the control plane's parallel work
// (two builders fed by a control goroutine, as a publication's table
// builds are) beside two idle workers, each a goroutine locked to its
// thread that sleeps in ppoll for 1 ms at a time as an idle worker does.
// "workers-share-Ps" is GOMAXPROCS as it was; "workers-own-Ps" adds a P
// per worker (addProcs). ns/op is one round of the work; compare the two
// in the same run (bench/README.md §6); cpu-ns/op is the process's CPU
// time per round.
func BenchmarkControlBesideIdleWorkers(b *testing.B) {
	for _, own := range []bool{false, true} {
		name := "workers-share-Ps"
		if own {
			name = "workers-own-Ps"
		}
		b.Run(name, func(b *testing.B) {
			const workers = 2
			builders := runtime.GOMAXPROCS(0)
			if own {
				addProcs(workers)
				defer removeProcs(workers)
			}
			defer idleWorkers(b, workers, false, 1)()
			var r0, r1 unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &r0)
			b.ResetTimer()
			defer func() {
				unix.Getrusage(unix.RUSAGE_SELF, &r1)
				cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}()
			for range b.N {
				items := make(chan int, 64)
				var built sync.WaitGroup
				for range builders {
					built.Add(1)
					go func() {
						defer built.Done()
						for range items {
							spin(2 * time.Millisecond) // a table
						}
					}()
				}
				for i := range 100 {
					spin(300 * time.Microsecond) // an eligible set
					items <- i
				}
				close(items)
				built.Wait()
			}
		})
	}
}

// spin burns CPU for d.
func spin(d time.Duration) {
	x := uint64(1)
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	spinSink += x
}

var spinSink uint64

// BenchmarkIdleWorkers: the process's CPU while two idle workers (locked
// goroutines asleep in ppolls, each with a P of its own) wait, with and
// without the pass through the scheduler every yieldEvery (idleWait), and
// by the poll's timeout: 1 ms (a worker with work to finish), 4,
// settledPollMs and 20 ms. Without the pass Go's monitor takes them for
// goroutines running for over 10 ms, preempts them and retakes their P at
// every poll, waking every 20 µs itself; a poll of over 10 ms has its P
// retaken in the system call, with the same effect on the monitor.
// cpu-%/op is the process's CPU over the round, in percent of one CPU;
// compare them in the same run.
func BenchmarkIdleWorkers(b *testing.B) {
	for _, c := range []struct {
		yield bool
		ms    int
	}{{false, 1}, {true, 1}, {true, 4}, {true, settledPollMs}, {true, 20}} {
		name := fmt.Sprintf("poll-%dms", c.ms)
		if c.yield {
			name += "-and-yield"
		}
		yield, ms := c.yield, c.ms
		b.Run(name, func(b *testing.B) {
			const workers = 2
			addProcs(workers)
			defer removeProcs(workers)
			for b.Loop() {
				stop := idleWorkers(b, workers, yield, ms)
				var r0, r1 unix.Rusage
				unix.Getrusage(unix.RUSAGE_SELF, &r0)
				const window = 500 * time.Millisecond
				time.Sleep(window)
				unix.Getrusage(unix.RUSAGE_SELF, &r1)
				stop()
				cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
				b.ReportMetric(100*cpu.Seconds()/window.Seconds(), "cpu-%/op")
			}
		})
	}
}

// idleWorkers starts n idle workers: goroutines locked to their threads,
// asleep in ppolls of ms milliseconds of an eventfd that is never
// readable, through idleWait when yield is set. stop ends them and waits.
func idleWorkers(b *testing.B, n int, yield bool, ms int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
			if err != nil {
				b.Error(err)
				return
			}
			defer unix.Close(fd)
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			idle := func() { unix.Poll(fds, ms) }
			if yield {
				idle = idleWait(idle)
			}
			for {
				select {
				case <-done:
					return
				default:
				}
				idle()
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}
