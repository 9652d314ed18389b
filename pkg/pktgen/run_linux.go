//go:build linux

package pktgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/ring"
)

// Run sends on cfg.Threads TX queues of cfg.Ifname until each thread has
// sent cfg.Count packets, cfg.Duration has passed or ctx ends, and returns
// each thread's result. A thread that cannot open its queue fails the run.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rep := Report{Ifname: cfg.Ifname, Results: make([]Result, cfg.Threads)}
	errs := make([]error, cfg.Threads)
	ready := make(chan error, cfg.Threads)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range cfg.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep.Results[i], errs[i] = thread(ctx, cfg, i, ready, start)
		}()
	}
	// Every queue is opened before any sends, so threads start together.
	var openErr error
	for range cfg.Threads {
		if err := <-ready; err != nil && openErr == nil {
			openErr = err
		}
	}
	if openErr != nil {
		cancel() // the threads that opened return without sending
	}
	close(start)
	wg.Wait()
	if openErr != nil {
		return Report{}, openErr
	}
	return rep, errors.Join(errs...)
}

// thread opens queue FirstThread+i, pinned to its CPU, and sends.
func thread(ctx context.Context, cfg Config, i int, ready chan<- error, start <-chan struct{}) (Result, error) {
	runtime.LockOSThread()
	if cfg.Netns != "" {
		// The thread is never unlocked: Go ends a locked thread when its
		// goroutine returns, so the namespace dies with it.
		if err := enterNetns(cfg.Netns); err != nil {
			ready <- fmt.Errorf("pktgen: %w", err)
			return Result{}, nil
		}
	} else {
		defer runtime.UnlockOSThread()
	}
	q := cfg.FirstThread + i
	cpu := q % runtime.NumCPU()
	res := Result{Device: cfg.Ifname + "@" + strconv.Itoa(q), Queue: q, CPU: cpu}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		ready <- fmt.Errorf("pktgen: pin thread %d to cpu %d: %w", i, cpu, err)
		return res, nil
	}
	ifi, err := net.InterfaceByName(cfg.Ifname)
	if err != nil {
		ready <- fmt.Errorf("pktgen: interface %s: %w", cfg.Ifname, err)
		return res, nil
	}
	ifindex := ifi.Index
	bind := map[string]ring.BindMode{"auto": ring.BindAuto, "copy": ring.BindCopy, "zerocopy": ring.BindZeroCopy}[cfg.Bind]
	sock, err := ring.Open(ring.Options{Ifindex: ifindex, Queue: q, Bind: bind})
	if err != nil {
		ready <- fmt.Errorf("pktgen: open tx queue %d of %s: %w", q, cfg.Ifname, err)
		return res, nil
	}
	defer sock.Close()
	res.Mode = "copy"
	if sock.ZeroCopy() {
		res.Mode = "zerocopy"
	}
	p := cfg.Packet
	p.Seed += uint64(q)
	gen, err := NewGenerator(p)
	if err != nil {
		ready <- err
		return res, nil
	}
	res.Size = gen.Size()
	s := newSender(sock.Rings(), gen, cfg.Batch)
	ready <- nil
	<-start
	if ctx.Err() != nil {
		return res, nil
	}
	if cfg.Duration > 0 {
		// The duration starts once every queue is open.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	err = send(ctx, cfg, s, &res)
	if st, serr := sock.Stats(); serr == nil {
		res.Errors += st.TXInvalidDescs
	}
	return res, err
}

// send is the thread's loop: pace, submit, kick, reclaim.
func send(ctx context.Context, cfg Config, s *sender, res *Result) error {
	done := ctx.Done()
	count := cfg.Count
	begin := time.Now()
	var idle time.Duration
	var perPkt time.Duration // pacing: time one packet is worth
	if cfg.Rate > 0 {
		perPkt = time.Duration(float64(time.Second) / cfg.Rate)
	}
	var kickErr error
loop:
	for count == 0 || s.Submitted < count {
		select {
		case <-done:
			break loop
		default:
		}
		s.Reclaim()
		want := cfg.Batch
		if count > 0 {
			want = int(min(uint64(want), count-s.Submitted))
		}
		if perPkt > 0 {
			// Packets due by now. Short of a whole batch, sleep until one
			// is due when that is worth a sleep (so a paced generator
			// leaves the CPU to what it measures), else send what is due.
			due := int64(time.Since(begin)/perPkt) + 1 - int64(s.Submitted)
			if due < int64(want) {
				wait := time.Duration(int64(want)-due) * perPkt
				if wait > 50*time.Microsecond || due <= 0 {
					t := time.Now()
					if wait > 50*time.Microsecond {
						time.Sleep(wait)
					} else {
						runtime.Gosched()
					}
					idle += time.Since(t)
					continue
				}
				want = int(due)
			}
		}
		s.Send(want)
		if err := s.Kick(); err != nil {
			res.Errors++
			kickErr = err
			if res.Errors > 1000 {
				break
			}
		}
	}
	// Let the kernel finish what is on the ring, for at most a second.
	deadline := time.Now().Add(time.Second)
	for s.Outstanding() > 0 && time.Now().Before(deadline) {
		if err := s.Kick(); err != nil {
			res.Errors++
			kickErr = err
		}
		s.Reclaim()
		if s.Outstanding() > 0 {
			runtime.Gosched()
		}
	}
	res.Elapsed = time.Since(begin)
	res.Idle = idle
	res.Packets = s.Completed
	if kickErr != nil && res.Errors > 1000 {
		return fmt.Errorf("pktgen: %s: wake-up for tx failed: %w", res.Device, kickErr)
	}
	return nil
}

// enterNetns switches the calling (locked) thread into the named network
// namespace (/run/netns/<name>, as ip-netns(8) keeps them).
func enterNetns(name string) error {
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", name, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter netns %s: %w", name, err)
	}
	return nil
}
