package ring_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/ring"
)

// small is a geometry that makes full rings and wraparound cheap to reach.
var small = ring.Options{FrameSize: 2048, NumFrames: 32, RingSize: 8}

func newFake(t testing.TB, o ring.Options, start uint32) (*ring.Fake, *ring.Rings) {
	t.Helper()
	f, err := ring.NewFakeAt(o, start)
	if err != nil {
		t.Fatal(err)
	}
	return f, f.Rings()
}

// packet returns a test packet of n bytes (n >= 8) carrying seq.
func packet(seq uint64, n int) []byte {
	p := make([]byte, n)
	binary.BigEndian.PutUint64(p, seq)
	for i := 8; i < n; i++ {
		p[i] = byte(seq) + byte(i)
	}
	return p
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    ring.Options
		want string // substring of the error, "" for none
	}{
		{"defaults", ring.Options{}, ""},
		{"2048 frames", ring.Options{FrameSize: 2048}, ""},
		{"frame 3000", ring.Options{FrameSize: 3000}, "frame size 3000"},
		{"ring not power of two", ring.Options{RingSize: 1000}, "ring size 1000"},
		{"too few frames", ring.Options{RingSize: 64, NumFrames: 32}, "32 frames"},
		{"headroom too big", ring.Options{FrameSize: 2048, ExtraHeadroom: 1800}, "headroom 1800"},
		{"negative headroom", ring.Options{ExtraHeadroom: -1}, "headroom -1"},
		{"negative queue", ring.Options{Queue: -1}, "queue -1"},
		{"bad bind mode", ring.Options{Bind: 9}, "bind mode 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestFramesLIFO(t *testing.T) {
	_, r := newFake(t, small, 0)
	if got, want := r.Frames.Len(), 32; got != want {
		t.Fatalf("free frames = %d, want %d", got, want)
	}
	got := make([]uint64, 3)
	if n := r.Frames.Alloc(got); n != 3 {
		t.Fatalf("Alloc = %d, want 3", n)
	}
	for i, a := range got {
		if want := uint64(i) * 2048; a != want {
			t.Errorf("first allocation %d = %#x, want %#x", i, a, want)
		}
	}
	// Free an address inside chunk 1 and then chunk 2: LIFO hands back 2, then 1.
	r.Frames.Free([]uint64{2048 + 300, 2*2048 + 256})
	again := make([]uint64, 2)
	r.Frames.Alloc(again)
	if again[0] != 2*2048 || again[1] != 2048 {
		t.Errorf("after free, Alloc = %#x, want [0x1000 0x800] (last freed first, rounded to chunk)", again)
	}
	all := make([]uint64, 64)
	if n := r.Frames.Alloc(all); n != 29 {
		t.Errorf("Alloc of the rest = %d, want 29", n)
	}
	if n := r.Frames.Alloc(all); n != 0 {
		t.Errorf("Alloc from empty = %d, want 0", n)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Free of an address outside the UMEM did not panic")
			}
		}()
		r.Frames.Free([]uint64{32 * 2048})
	}()
	r.Frames.Free(all[:29])
	r.Frames.Free(got)
	defer func() {
		if recover() == nil {
			t.Error("double free of a full allocator did not panic")
		}
	}()
	r.Frames.Free(got[:1])
}

// TestRoundTrip follows frames through all four rings once and checks
// contents, headroom and ownership accounting.
func TestRoundTrip(t *testing.T) {
	f, r := newFake(t, small, 0)
	if n := r.Refill(); n != 8 {
		t.Fatalf("Refill = %d, want 8 (ring size)", n)
	}
	if got := r.Frames.Len(); got != 24 {
		t.Fatalf("free frames after refill = %d, want 24", got)
	}
	for i := range 5 {
		if !f.Deliver(packet(uint64(i), 60+i)) {
			t.Fatalf("Deliver %d failed", i)
		}
	}
	descs := make([]ring.Desc, 16)
	n := r.RX.Peek(descs)
	if n != 5 {
		t.Fatalf("Peek = %d, want 5", n)
	}
	for i, d := range descs[:n] {
		p := r.Frame(d)
		if got := binary.BigEndian.Uint64(p); got != uint64(i) || len(p) != 60+i {
			t.Errorf("frame %d: seq %d len %d, want seq %d len %d", i, got, len(p), i, 60+i)
		}
		if h := d.Addr - r.UMEM.ChunkStart(d.Addr); h != uint64(r.UMEM.Headroom()) || h != ring.XDPPacketHeadroom {
			t.Errorf("frame %d: headroom %d, want %d", i, h, ring.XDPPacketHeadroom)
		}
		// Prepend an 8-byte "outer header" in place, as encap does.
		d.Addr -= 8
		d.Len += 8
		copy(r.Frame(d), "OUTERHDR")
		descs[i] = d
	}
	r.RX.Release(n)
	if got := r.TX.Submit(descs[:n]); got != n {
		t.Fatalf("TX Submit = %d, want %d", got, n)
	}
	var sent [][]byte
	if got := f.Transmit(100, func(p []byte) { sent = append(sent, append([]byte(nil), p...)) }); got != 5 {
		t.Fatalf("kernel transmitted %d, want 5", got)
	}
	for i, p := range sent {
		if string(p[:8]) != "OUTERHDR" || binary.BigEndian.Uint64(p[8:]) != uint64(i) {
			t.Errorf("sent %d = %q…, want OUTERHDR then seq %d", i, p[:16], i)
		}
	}
	if got := r.Reclaim(); got != 5 {
		t.Fatalf("Reclaim = %d, want 5", got)
	}
	if got := r.Refill(); got != 5 {
		t.Fatalf("second Refill = %d, want 5", got)
	}
	if got := r.Frames.Len(); got != 24 {
		t.Errorf("free frames at the end = %d, want 24 (no frame lost)", got)
	}
}

// TestWraparound runs thousands of packets through the rings in random,
// partial batches with indices starting just below 2^32, checking that
// every packet arrives once, in order, and no frame is lost.
func TestWraparound(t *testing.T) {
	for _, start := range []uint32{0, 0xFFFFFFF0, 0x7FFFFFFB} {
		f, r := newFake(t, small, start)
		rng := rand.New(rand.NewPCG(1, uint64(start)))
		descs := make([]ring.Desc, 8)
		var next, want uint64
		for round := 0; round < 2000; round++ {
			r.Refill()
			for k := rng.IntN(6); k > 0; k-- {
				if f.Deliver(packet(next, 64)) {
					next++
				}
			}
			n := r.RX.Peek(descs[:1+rng.IntN(8)])
			n = min(n, r.TX.Reserve(n))
			r.RX.Release(n)
			if got := r.TX.Submit(descs[:n]); got != n {
				t.Fatalf("start %#x round %d: Submit = %d after Reserve = %d", start, round, got, n)
			}
			f.Transmit(rng.IntN(8), func(p []byte) {
				if got := binary.BigEndian.Uint64(p); got != want {
					t.Fatalf("start %#x: sent seq %d, want %d", start, got, want)
				}
				want++
			})
			r.Reclaim()
		}
		// Drain everything and count frames.
		for {
			n := r.RX.Peek(descs)
			n = min(n, r.TX.Reserve(n))
			r.RX.Release(n)
			r.TX.Submit(descs[:n])
			sent := f.Transmit(100, func(p []byte) { want++ })
			r.Reclaim()
			if n == 0 && sent == 0 {
				break
			}
		}
		if want != next || next < 2000 {
			t.Errorf("start %#x: delivered %d, transmitted %d", start, next, want)
		}
		onFill := r.Fill.Size() - r.Fill.Reserve(r.Fill.Size())
		if got := r.Frames.Len() + onFill; got != 32 {
			t.Errorf("start %#x: free %d + on fill ring %d = %d, want 32 frames", start, r.Frames.Len(), onFill, got)
		}
	}
}

func TestPartialBatchesAndFullRings(t *testing.T) {
	f, r := newFake(t, small, 0xFFFFFFFE)
	r.Refill()
	for i := range 3 {
		f.Deliver(packet(uint64(i), 64))
	}
	descs := make([]ring.Desc, 8)
	if n := r.RX.Peek(descs[:2]); n != 2 {
		t.Fatalf("Peek(2) = %d, want 2", n)
	}
	if n := r.RX.Peek(descs); n != 3 {
		t.Fatalf("Peek again = %d, want the same 3 unreleased", n)
	}
	r.RX.Release(1)
	if n := r.RX.Peek(descs); n != 2 || binary.BigEndian.Uint64(r.Frame(descs[0])) != 1 {
		t.Fatalf("after Release(1): Peek = %d starting at seq %d, want 2 starting at 1", n, binary.BigEndian.Uint64(r.Frame(descs[0])))
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Release(3) after 2 available did not panic")
			}
		}()
		r.RX.Release(3)
	}()
	r.RX.Release(2)

	// Fill ring holds 8; 3 were used, 5 remain. Deliver until RX is full.
	for i := 3; i < 8; i++ {
		f.Deliver(packet(uint64(i), 64))
	}
	r.Refill() // replace the 8 used chunks
	for i := 0; i < 3; i++ {
		f.Deliver(packet(uint64(i), 64))
	}
	if f.Deliver(packet(99, 64)) {
		t.Fatal("Deliver into a full RX ring succeeded")
	}
	st, _ := f.Stats()
	if st.RXRingFull != 1 {
		t.Errorf("RXRingFull = %d, want 1", st.RXRingFull)
	}
	// TX: 8 slots. Submit 10 → 8.
	tx := make([]ring.Desc, 10)
	for i := range tx {
		tx[i] = ring.Desc{Addr: uint64(i) * 2048, Len: 64}
	}
	if n := r.TX.Reserve(10); n != 8 {
		t.Errorf("TX Reserve(10) = %d, want 8", n)
	}
	if n := r.TX.Submit(tx); n != 8 {
		t.Errorf("TX Submit(10) = %d, want 8", n)
	}
	if n := r.TX.Reserve(1); n != 0 {
		t.Errorf("full TX Reserve(1) = %d, want 0", n)
	}
	if n := f.Transmit(3, nil); n != 3 {
		t.Errorf("Transmit(3) = %d", n)
	}
	if n := r.TX.Submit(tx[8:]); n != 2 {
		t.Errorf("TX Submit after 3 completed = %d, want 2", n)
	}
	// Fill ring empty: drain RX and deliver past the 8 filled chunks.
	for n := r.RX.Peek(descs); n > 0; n = r.RX.Peek(descs) {
		r.RX.Release(n)
	}
	for i := 0; i < 5; i++ {
		f.Deliver(packet(0, 64))
	}
	if f.Deliver(packet(0, 64)) {
		t.Error("Deliver with an empty fill ring succeeded")
	}
	if st, _ := f.Stats(); st.RXFillRingEmpty != 1 {
		t.Errorf("RXFillRingEmpty = %d, want 1", st.RXFillRingEmpty)
	}
	if f.Deliver(make([]byte, 2048)) {
		t.Error("Deliver of a packet larger than frame minus headroom succeeded")
	}
}

func TestInvalidTXDescriptorIsCountedNotCompleted(t *testing.T) {
	f, r := newFake(t, small, 0)
	bad := []ring.Desc{
		{Addr: 2048 - 10, Len: 64},  // crosses into the next chunk
		{Addr: 32 * 2048, Len: 64},  // past the UMEM
		{Addr: 2048 + 256, Len: 0},  // empty
		{Addr: 4096 + 256, Len: 64}, // fine
	}
	r.TX.Submit(bad)
	if n := f.Transmit(10, nil); n != 1 {
		t.Errorf("Transmit = %d, want 1", n)
	}
	addrs := make([]uint64, 8)
	if n := r.Completion.Peek(addrs); n != 1 || addrs[0] != 4096+256 {
		t.Errorf("completion = %#x, want [0x1100]", addrs[:n])
	}
	if st, _ := f.Stats(); st.TXInvalidDescs != 3 {
		t.Errorf("TXInvalidDescs = %d, want 3", st.TXInvalidDescs)
	}
}

func TestKickOnlyWhenAsked(t *testing.T) {
	f, r := newFake(t, small, 0)
	for _, tc := range []struct {
		tx, fill, pending bool
		wantTX            bool
	}{
		{false, false, false, false},
		{false, false, true, false},
		{true, false, false, false}, // asked, but nothing left to send
		{true, false, true, true},
		{false, true, false, false},
		{true, true, true, true},
	} {
		f.SetNeedWakeup(tc.tx, tc.fill)
		if tc.pending {
			var a [1]uint64
			r.Frames.Alloc(a[:])
			r.TX.Submit([]ring.Desc{{Addr: a[0] + 256, Len: 64}})
		}
		tx0, rx0 := f.Kicks()
		if err := r.KickTX(); err != nil {
			t.Fatal(err)
		}
		if err := r.KickRX(); err != nil {
			t.Fatal(err)
		}
		tx1, rx1 := f.Kicks()
		if (tx1 > tx0) != tc.wantTX || (rx1 > rx0) != tc.fill {
			t.Errorf("need wakeup tx=%v fill=%v, tx pending=%v: kicked tx=%v rx=%v", tc.tx, tc.fill, tc.pending, tx1 > tx0, rx1 > rx0)
		}
		f.Transmit(100, nil)
		r.Reclaim()
	}
}

// TestBusyPollKicks: a busy-polling socket's RX is woken once per
// BusyPoll call whatever the fill ring's flag says, and KickRX leaves it
// alone; without busy polling BusyPoll does nothing.
func TestBusyPollKicks(t *testing.T) {
	for _, tc := range []struct {
		busyPoll, fillAsks bool
		wantBusy, wantKick uint64 // RX wake-ups by BusyPoll, by KickRX
	}{
		{false, false, 0, 0},
		{false, true, 0, 1},
		{true, false, 1, 0},
		{true, true, 1, 0},
	} {
		f, r := newFake(t, small, 0)
		f.SetBusyPoll(tc.busyPoll)
		f.SetNeedWakeup(false, tc.fillAsks)
		_, rx0 := f.Kicks()
		if err := r.BusyPoll(); err != nil {
			t.Fatal(err)
		}
		_, rx1 := f.Kicks()
		if err := r.KickRX(); err != nil {
			t.Fatal(err)
		}
		_, rx2 := f.Kicks()
		if rx1-rx0 != tc.wantBusy || rx2-rx1 != tc.wantKick {
			t.Errorf("busy poll %v, fill ring asks %v: BusyPoll woke RX %d times, KickRX %d; want %d, %d",
				tc.busyPoll, tc.fillAsks, rx1-rx0, rx2-rx1, tc.wantBusy, tc.wantKick)
		}
	}
}

// TestZeroAllocs proves the per-batch ring operations allocate nothing.
func TestZeroAllocs(t *testing.T) {
	f, r := newFake(t, ring.Options{FrameSize: 2048, NumFrames: 256, RingSize: 64}, 0)
	f.SetNeedWakeup(true, true)
	pkt := packet(1, 64)
	descs := make([]ring.Desc, 64)
	allocs := testing.AllocsPerRun(100, func() {
		r.Refill()
		r.KickRX()
		for range 32 {
			f.Deliver(pkt)
		}
		n := r.RX.Peek(descs)
		_ = r.Frame(descs[0])
		r.RX.Release(n)
		r.Frames.FreeDescs(descs[:2]) // drop two
		r.TX.Reserve(n)
		r.TX.Submit(descs[2:n])
		r.KickTX()
		f.Transmit(64, nil)
		r.Reclaim()
	})
	if allocs != 0 {
		t.Errorf("allocations per batch = %v, want 0", allocs)
	}
}

// TestConcurrentKernel runs the kernel side on another goroutine, as the
// real kernel is; under -race this checks that the ring's atomics order
// every descriptor and packet byte.
func TestConcurrentKernel(t *testing.T) {
	f, r := newFake(t, ring.Options{FrameSize: 2048, NumFrames: 64, RingSize: 16}, 0xFFFFFF00)
	const total = 5000
	var wg sync.WaitGroup
	var kernelErr error
	done := make(chan struct{})
	wg.Add(1)
	go func() { // the kernel
		defer wg.Done()
		var next, want uint64
		for want < total {
			if next < total && f.Deliver(packet(next, 64)) {
				next++
			}
			f.Transmit(8, func(p []byte) {
				if got := binary.BigEndian.Uint64(p); got != want && kernelErr == nil {
					kernelErr = errors.New("out of order")
				}
				if p[63] != byte(want)+63 && kernelErr == nil {
					kernelErr = errors.New("corrupt payload")
				}
				want++
			})
		}
		close(done)
	}()
	descs := make([]ring.Desc, 16)
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		r.Reclaim()
		r.Refill()
		n := r.RX.Peek(descs)
		n = min(n, r.TX.Reserve(n))
		r.RX.Release(n)
		r.TX.Submit(descs[:n])
	}
	wg.Wait()
	if kernelErr != nil {
		t.Fatal(kernelErr)
	}
}

// BenchmarkRing measures one full cycle per packet in batches of 64:
// kernel delivers to RX, user Peek+Release, Reserve+Submit to TX, kernel
// transmits to completion, user Reclaim+Refill. ns/pkt includes the
// Fake's kernel side (a 64-byte copy and per-packet index updates);
// user-ns/pkt is the share the worker goroutine pays, timed around the
// user-side calls only (two clock reads per batch of 64).
func BenchmarkRing(b *testing.B) {
	f, err := ring.NewFake(ring.Options{FrameSize: 2048, NumFrames: 1024, RingSize: 256})
	if err != nil {
		b.Fatal(err)
	}
	r := f.Rings()
	pkt := packet(1, 64)
	descs := make([]ring.Desc, 64)
	r.Refill()
	b.ReportAllocs()
	pkts := 0
	var user time.Duration
	for b.Loop() {
		for range 64 {
			f.Deliver(pkt)
		}
		t0 := time.Now()
		n := r.RX.Peek(descs)
		r.RX.Release(n)
		n = r.TX.Reserve(n)
		r.TX.Submit(descs[:n])
		r.KickTX()
		t1 := time.Now()
		f.Transmit(64, nil)
		t2 := time.Now()
		r.Reclaim()
		r.Refill()
		user += t1.Sub(t0) + time.Since(t2)
		pkts += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pkts), "ns/pkt")
	b.ReportMetric(float64(user.Nanoseconds())/float64(pkts), "user-ns/pkt")
}

// TestSettled: the rings are settled (an idle owner may sleep longer) only
// once the kernel has taken every TX descriptor and the fill ring holds
// enough chunks to receive into; frames the kernel has yet to complete do
// not unsettle them. Indices start just below 2^32.
func TestSettled(t *testing.T) {
	f, r := newFake(t, small, ^uint32(0)-3)
	if r.Settled(1) {
		t.Error("settled with an empty fill ring: no packet could arrive to wake the owner")
	}
	r.Refill() // 8 chunks on the fill ring
	if !r.Settled(8) || r.Settled(9) {
		t.Errorf("fill ring of 8: Settled(8) %v, Settled(9) %v; want true, false", r.Settled(8), r.Settled(9))
	}
	for i := range 3 {
		f.Deliver(packet(uint64(i), 64))
	}
	if r.Settled(6) {
		t.Error("settled with 5 chunks on the fill ring for a minimum of 6")
	}
	descs := make([]ring.Desc, 8)
	n := r.RX.Peek(descs)
	r.RX.Release(n)
	r.Refill()
	r.TX.Submit(descs[:n])
	if r.Settled(1) {
		t.Error("settled with TX descriptors the kernel has not taken: a kick is owed")
	}
	f.Transmit(2, nil)
	if r.Settled(1) {
		t.Error("settled with one TX descriptor left")
	}
	f.Transmit(8, nil)
	if !r.Settled(8) {
		t.Error("not settled once the kernel took every TX descriptor (completions pending)")
	}
	if r.Reclaim(); !r.Settled(8) {
		t.Error("not settled after the completions were taken back")
	}
}
