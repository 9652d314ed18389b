package ring_test

import (
	"encoding/binary"
	"github.com/xlbnet/xlb/pkg/benchutil"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	asavie "github.com/asavie/xdp"
	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/testutil"
	"github.com/xlbnet/xlb/ring"
	"github.com/xlbnet/xlb/ring/xsk"
)

// BenchmarkVethForward measures a one-armed reflector on x0 (what the
// dataplane does minus the lookups): receive from the AF_XDP socket, swap
// MACs, addresses and ports in place, transmit on the same socket. A
// generator on the peer end (an xlb ring socket on p0, with its own copy
// of the XDP program catching the reflected packets) keeps x0 saturated.
// Sub-benchmarks run xlb's ring and asavie/xdp's Socket over the same
// topology in one run; ns/pkt is the reflector's wall time per forwarded
// packet (both cores are shared with the generator and the kernel's veth
// work, so only the ratio between the two is meaningful).
func BenchmarkVethForward(b *testing.B) {
	testutil.RequireRoot(b)
	v := newVethPair(b)
	vip := netip.MustParseAddr("203.0.113.10")
	v.routeVIP(b, vip.String())
	p, err := xsk.Load()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	if err := p.AddVIP(xsk.VIP{Addr: vip, Proto: 17, Port: 5000}); err != nil {
		b.Fatal(err)
	}
	if err := v.lb.Do(func() error { _, err := p.Attach(v.lbIndex, xsk.AttachAuto); return err }); err != nil {
		b.Fatal(err)
	}
	gen := startGenerator(b, v, vip)
	defer gen.stop()

	// Each socket is opened once, on its own queue, and kept for every
	// round of its sub-benchmark: asavie's Close never unmaps its rings, so
	// its socket stays bound (EBUSY on the next bind) until the process
	// exits. xlb runs on x0 queue 1, asavie on queue 0; the generator sends
	// on the matching p0 queue (veth maps the peer's TX queue to our RX
	// queue).
	var (
		xs *ring.Socket
		as *asavie.Socket
	)
	if err := v.lb.Do(func() (err error) {
		if xs, err = ring.Open(ring.Options{Ifindex: v.lbIndex, Queue: 0, NumFrames: 1024, RingSize: 256}); err != nil {
			return err
		}
		as, err = asavie.NewSocket(v.lbIndex, 1, &asavie.SocketOptions{
			NumFrames: 1024, FrameSize: 4096,
			FillRingNumDescs: 256, CompletionRingNumDescs: 256,
			RxRingNumDescs: 256, TxRingNumDescs: 256,
		})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer xs.Close()
	defer as.Close()
	if err := p.Register(0, xs.FD()); err != nil {
		b.Fatal(err)
	}
	if err := p.Register(1, as.FD()); err != nil {
		b.Fatal(err)
	}

	b.Run("xlb", func(b *testing.B) {
		gen.queue.Store(0)
		r := xs.Rings()
		descs := make([]ring.Desc, 64)
		b.ReportAllocs()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpu0 := threadCPU(b)
		pkts := 0
		before := gen.received.Load()
		for b.Loop() {
			for {
				r.Reclaim()
				r.Refill()
				r.KickRX()
				n := r.RX.Peek(descs[:r.TX.Reserve(len(descs))])
				for _, d := range descs[:n] {
					reflect(r.Frame(d))
				}
				r.RX.Release(n)
				r.TX.Submit(descs[:n])
				r.KickTX()
				if n > 0 {
					pkts += n
					break
				}
				idle(b, xs.FD())
			}
		}
		report(b, pkts, gen.received.Load()-before, threadCPU(b)-cpu0)
	})

	b.Run("asavie", func(b *testing.B) {
		gen.queue.Store(1)
		s := as
		b.ReportAllocs()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpu0 := threadCPU(b)
		pkts := 0
		before := gen.received.Load()
		for b.Loop() {
			for {
				if n := s.NumFreeFillSlots(); n > 0 {
					s.Fill(s.GetDescs(n))
				}
				if n := s.NumCompleted(); n > 0 {
					s.Complete(n)
				}
				rx := s.Receive(min(64, s.NumFreeTxSlots()))
				for _, d := range rx {
					reflect(s.GetFrame(d))
				}
				n := 0
				if len(rx) > 0 {
					n = s.Transmit(rx)
				}
				if n > 0 {
					pkts += n
					break
				}
				idle(b, s.FD())
			}
		}
		report(b, pkts, gen.received.Load()-before, threadCPU(b)-cpu0)
	})
}

// idle waits up to 1 ms for RX on fd, the same way for both libraries (their
// own Poll methods differ: asavie's also waits for POLLOUT, which is always
// ready, so it never sleeps), letting the kernel's softirq work run.
func idle(b *testing.B, fd int) {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds[:], 1); err != nil && err != unix.EINTR {
		b.Fatal(err)
	}
}

// threadCPU returns the CPU time (user + system) of the calling OS thread.
func threadCPU(b *testing.B) time.Duration {
	d, ok := benchutil.ThreadCPU()
	if !ok {
		b.Fatal("no thread CPU clock")
	}
	return d
}

// report gives wall time and, less sensitive to a loaded machine, the
// reflector thread's own CPU time per packet: the ring code, the frame
// rewrite, the sendto kicks (which in copy mode run the kernel's whole TX
// path) and the idle polls.
func report(b *testing.B, forwarded int, atPeer uint64, cpu time.Duration) {
	if forwarded == 0 {
		return
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(forwarded), "cpu-ns/pkt")
	ns := float64(b.Elapsed().Nanoseconds())
	b.ReportMetric(ns/float64(forwarded), "ns/pkt")
	b.ReportMetric(float64(forwarded)/ns*1e3, "Mpps")
	b.ReportMetric(float64(atPeer)/float64(forwarded), "peer-rx/fwd")
}

// reflect turns a client→VIP UDP frame into VIP→client in place: swap
// MACs, IPv4 addresses and ports. Swapping keeps the IPv4 header
// checksum valid (the one's-complement sum is order-independent).
func reflect(f []byte) {
	if len(f) < 42 {
		return
	}
	var mac [6]byte
	copy(mac[:], f[0:6])
	copy(f[0:6], f[6:12])
	copy(f[6:12], mac[:])
	var a [4]byte
	copy(a[:], f[26:30])
	copy(f[26:30], f[30:34])
	copy(f[30:34], a[:])
	sp := binary.BigEndian.Uint16(f[34:])
	copy(f[34:36], f[36:38])
	binary.BigEndian.PutUint16(f[36:], sp)
}

// generator transmits client→VIP frames from p0 as fast as the rings take
// them, on the p0 queue named by queue, and counts the reflected frames its
// own XDP program hands back on either queue.
type generator struct {
	queue    atomic.Int32
	done     atomic.Bool
	received atomic.Uint64
	wg       sync.WaitGroup
}

func (g *generator) stop() { g.done.Store(true); g.wg.Wait() }

// genQueue is the generator's socket on one p0 queue.
type genQueue struct {
	r     *ring.Rings
	ready []ring.Desc // TX frames not on the TX ring
}

func startGenerator(b *testing.B, v *vethPair, vip netip.Addr) *generator {
	b.Helper()
	gp, err := xsk.Load()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gp.Close() })
	if err := gp.AddVIP(xsk.VIP{Addr: v.peerAddr, Proto: 17, Port: 7000}); err != nil {
		b.Fatal(err)
	}
	frame := udpFrame(v.lbMAC, v.peerMAC, v.peerAddr, vip, 7000, 5000, make([]byte, 18))
	var queues []*genQueue
	if err := v.peer.Do(func() error {
		if _, err := gp.Attach(v.peerIndex, xsk.AttachAuto); err != nil {
			return err
		}
		for q := range 2 {
			s, err := ring.Open(ring.Options{Ifindex: v.peerIndex, Queue: q, NumFrames: 2048, RingSize: 512})
			if err != nil {
				return err
			}
			b.Cleanup(func() { s.Close() })
			if err := gp.Register(q, s.FD()); err != nil {
				return err
			}
			// 512 chunks hold the outgoing frame for good; the rest serve RX.
			r := s.Rings()
			addrs := make([]uint64, 512)
			r.Frames.Alloc(addrs)
			g := &genQueue{r: r, ready: make([]ring.Desc, 512)}
			for i, a := range addrs {
				g.ready[i] = ring.Desc{Addr: a + uint64(r.UMEM.Headroom()), Len: uint32(len(frame))}
				copy(r.Frame(g.ready[i]), frame)
			}
			queues = append(queues, g)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	g := &generator{}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		rx := make([]ring.Desc, 64)
		done := make([]uint64, 512)
		for !g.done.Load() {
			busy := false
			for q, gq := range queues {
				r := gq.r
				if int(g.queue.Load()) == q {
					if n := r.TX.Submit(gq.ready); n > 0 {
						gq.ready = gq.ready[:copy(gq.ready, gq.ready[n:])]
					}
					r.KickTX()
				}
				if n := r.Completion.Peek(done); n > 0 {
					for _, a := range done[:n] {
						gq.ready = append(gq.ready, ring.Desc{Addr: a, Len: uint32(len(frame))})
					}
					r.Completion.Release(n)
				}
				n := r.RX.Peek(rx)
				for i, d := range rx[:n] {
					done[i] = d.Addr
				}
				r.RX.Release(n)
				r.Frames.Free(done[:n])
				g.received.Add(uint64(n))
				r.Refill()
				r.KickRX()
				busy = busy || n > 0 || len(gq.ready) > 0
			}
			if !busy {
				// Everything is in flight: yield the CPU to the softirq
				// work that moves it, rather than spin against it.
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	return g
}
