package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/ring"
	"github.com/xlbnet/xlb/ring/xsk"
)

// reflector is the ceiling: the same XDP program and rings as xlb, and per
// packet only what any forwarder must do, rewrite the MACs (towards the
// sinks in turn) and transmit on the socket it arrived on. It runs as its
// own process (`xlbbench reflect`) inside the appliance's namespace, one
// goroutine per queue pinned to CPU queue mod NumCPU, as xlb's workers.
func reflector(dev string, queues int, sinks []net.HardwareAddr) error {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return err
	}
	prog, err := xsk.Load()
	if err != nil {
		return fmt.Errorf("load xdp program: %w", err)
	}
	defer prog.Close()
	mode, err := prog.Attach(ifi.Index, xsk.AttachAuto)
	if err != nil {
		return fmt.Errorf("attach xdp program: %w", err)
	}
	defer prog.Detach()
	for _, proto := range []uint8{6, 17} {
		if err := prog.AddVIP(xsk.VIP{Addr: netip.MustParseAddr(vipAddr), Proto: proto, Port: vipPort}); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	socks := make([]*ring.Socket, queues)
	for q := range queues {
		s, err := ring.Open(ring.Options{Ifindex: ifi.Index, Queue: q})
		if err != nil {
			return fmt.Errorf("open queue %d: %w", q, err)
		}
		defer s.Close()
		if err := prog.Register(q, s.FD()); err != nil {
			return fmt.Errorf("register queue %d: %w", q, err)
		}
		socks[q] = s
	}
	var macs [][6]byte
	for _, m := range sinks {
		macs = append(macs, [6]byte(m))
	}
	own := [6]byte(ifi.HardwareAddr)
	fmt.Printf("reflector ready: %d queue(s), xdp %s\n", queues, mode)
	var wg sync.WaitGroup
	for q, s := range socks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(q % runtime.NumCPU())
			_ = unix.SchedSetaffinity(0, &set)
			reflect(ctx, s, own, macs)
		}()
	}
	wg.Wait()
	return nil
}

// reflect is one queue's loop until ctx ends.
func reflect(ctx context.Context, s *ring.Socket, own [6]byte, macs [][6]byte) {
	rf := newReflectQueue(s.Rings(), own, macs)
	done := ctx.Done()
	for {
		select {
		case <-done:
			return
		default:
		}
		if rf.step() == 0 {
			_ = s.Poll(1)
		}
	}
}

// reflectQueue is one queue of the reflector: RX → rewrite MACs → TX on
// the same rings. It allocates nothing after newReflectQueue.
type reflectQueue struct {
	r     *ring.Rings
	own   [6]byte
	macs  [][6]byte
	next  int
	descs []ring.Desc
	drop  []uint64
}

func newReflectQueue(r *ring.Rings, own [6]byte, macs [][6]byte) *reflectQueue {
	return &reflectQueue{r: r, own: own, macs: macs, descs: make([]ring.Desc, 64), drop: make([]uint64, 64)}
}

// step runs one batch and returns how many packets it received. Frames
// the TX ring has no room for are dropped (freed), as a forwarder must.
func (q *reflectQueue) step() int {
	r := q.r
	r.Reclaim()
	r.Refill()
	_ = r.KickRX()
	n := r.RX.Peek(q.descs)
	if n == 0 {
		_ = r.KickTX()
		return 0
	}
	r.RX.Release(n)
	for _, d := range q.descs[:n] {
		f := r.Frame(d)
		copy(f[0:6], q.macs[q.next][:])
		copy(f[6:12], q.own[:])
		if q.next++; q.next == len(q.macs) {
			q.next = 0
		}
	}
	room := r.TX.Reserve(n)
	r.TX.Submit(q.descs[:room])
	for i, d := range q.descs[room:n] {
		q.drop[i] = d.Addr
	}
	r.Frames.Free(q.drop[:n-room])
	_ = r.KickTX()
	return n
}
