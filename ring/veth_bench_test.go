package ring_test

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	asavie "github.com/asavie/xdp"

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

	b.Run("xlb", func(b *testing.B) {
		var s *ring.Socket
		if err := v.lb.Do(func() (err error) {
			s, err = ring.Open(ring.Options{Ifindex: v.lbIndex, NumFrames: 1024, RingSize: 256})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if err := p.Register(0, s.FD()); err != nil {
			b.Fatal(err)
		}
		defer p.Unregister(0)
		r := s.Rings()
		descs := make([]ring.Desc, 64)
		b.ReportAllocs()
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
				s.Poll(1) // idle: let the kernel's softirq work run
			}
		}
		report(b, pkts, gen.received.Load()-before)
	})

	b.Run("asavie", func(b *testing.B) {
		var s *asavie.Socket
		if err := v.lb.Do(func() (err error) {
			s, err = asavie.NewSocket(v.lbIndex, 0, &asavie.SocketOptions{
				NumFrames: 1024, FrameSize: 4096,
				FillRingNumDescs: 256, CompletionRingNumDescs: 256,
				RxRingNumDescs: 256, TxRingNumDescs: 256,
			})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if err := p.Register(0, s.FD()); err != nil {
			b.Fatal(err)
		}
		defer p.Unregister(0)
		b.ReportAllocs()
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
				s.Poll(1) // idle: let the kernel's softirq work run
			}
		}
		report(b, pkts, gen.received.Load()-before)
	})
}

func report(b *testing.B, forwarded int, atPeer uint64) {
	if forwarded == 0 {
		return
	}
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
// them, and counts the reflected frames its own XDP program hands back.
type generator struct {
	done     atomic.Bool
	received atomic.Uint64
	wg       sync.WaitGroup
}

func (g *generator) stop() { g.done.Store(true); g.wg.Wait() }

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
	var s *ring.Socket
	if err := v.peer.Do(func() error {
		if _, err := gp.Attach(v.peerIndex, xsk.AttachAuto); err != nil {
			return err
		}
		s, err = ring.Open(ring.Options{Ifindex: v.peerIndex, NumFrames: 2048, RingSize: 512})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := gp.Register(0, s.FD()); err != nil {
		b.Fatal(err)
	}
	r := s.Rings()
	frame := udpFrame(v.lbMAC, v.peerMAC, v.peerAddr, vip, 7000, 5000, make([]byte, 18))
	// 512 chunks hold the outgoing frame for good; the rest serve RX.
	tx := make([]ring.Desc, 512)
	addrs := make([]uint64, 512)
	r.Frames.Alloc(addrs)
	for i, a := range addrs {
		tx[i] = ring.Desc{Addr: a + uint64(r.UMEM.Headroom()), Len: uint32(len(frame))}
		copy(r.Frame(tx[i]), frame)
	}
	g := &generator{}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ready := make([]ring.Desc, 0, len(tx)) // frames not on the TX ring
		ready = append(ready, tx...)
		rx := make([]ring.Desc, 64)
		done := make([]uint64, 512)
		for !g.done.Load() {
			if n := r.TX.Submit(ready); n > 0 {
				ready = ready[:copy(ready, ready[n:])]
			}
			r.KickTX()
			if n := r.Completion.Peek(done); n > 0 {
				for _, a := range done[:n] {
					ready = append(ready, ring.Desc{Addr: a, Len: uint32(len(frame))})
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
			if n == 0 && len(ready) == 0 {
				// Everything is in flight: yield the CPU to the softirq
				// work that moves it, rather than spin against it.
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	return g
}
