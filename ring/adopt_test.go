package ring_test

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/ring"
)

// TestAdoptAtRandomBatchBoundaries drives a Fake queue with a worker-like
// owner (reclaim, refill, receive a batch, forward some packets and drop
// the others) while the kernel side delivers and transmits at random, and
// hands the queue to a new owner (Fake.Adopt with the old owner's free
// list) at random batch boundaries. Every packet delivered must be
// received exactly once across the owners, every packet forwarded must
// be transmitted exactly once, and at the end every chunk is in exactly
// one hand.
func TestAdoptAtRandomBatchBoundaries(t *testing.T) {
	o := ring.Options{FrameSize: 2048, NumFrames: 64, RingSize: 16}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		f, r := newFake(t, o, ^uint32(0)-40) // indices wrap during the run
		var (
			next      uint64 // next sequence number to deliver
			delivered = map[uint64]bool{}
			received  = map[uint64]int{}
			sent      = map[uint64]int{}
			forwarded = map[uint64]bool{}
			handovers int
			descs     = make([]ring.Desc, 8)
			drops     = make([]ring.Desc, 0, 8)
		)
		for range 3000 {
			switch rng.IntN(4) {
			case 0: // the kernel receives a burst
				for range rng.IntN(6) {
					if f.Deliver(packet(next, 64)) {
						delivered[next] = true
					}
					next++
				}
			case 1: // the kernel transmits some
				f.Transmit(rng.IntN(6), func(p []byte) { sent[binary.BigEndian.Uint64(p)]++ })
			case 2: // one worker step
				r.Reclaim()
				r.Refill()
				n := r.RX.Peek(descs[:1+rng.IntN(len(descs))])
				r.RX.Release(n)
				drops = drops[:0]
				var tx []ring.Desc
				for _, d := range descs[:n] {
					seq := binary.BigEndian.Uint64(r.Frame(d))
					received[seq]++
					if seq%2 == 0 {
						tx = append(tx, d)
					} else {
						drops = append(drops, d)
					}
				}
				k := r.TX.Submit(tx)
				for _, d := range tx[:k] {
					forwarded[binary.BigEndian.Uint64(r.Frame(d))] = true
				}
				drops = append(drops, tx[k:]...)
				r.Frames.FreeDescs(drops)
			case 3: // hand over at this batch boundary
				nr, err := f.Adopt(r.Frames.FreeList())
				if err != nil {
					t.Fatalf("seed %d: adopt: %v", seed, err)
				}
				r = nr
				handovers++
			}
		}
		// Drain: receive everything left, transmit everything forwarded.
		for range 200 {
			f.Transmit(64, func(p []byte) { sent[binary.BigEndian.Uint64(p)]++ })
			r.Reclaim()
			r.Refill()
			n := r.RX.Peek(descs)
			r.RX.Release(n)
			for _, d := range descs[:n] {
				received[binary.BigEndian.Uint64(r.Frame(d))]++
			}
			r.Frames.FreeDescs(descs[:n])
		}
		for seq := range delivered {
			if received[seq] != 1 {
				t.Fatalf("seed %d: packet %d delivered, received %d times", seed, seq, received[seq])
			}
		}
		for seq, n := range received {
			if !delivered[seq] {
				t.Fatalf("seed %d: packet %d received %d times but never delivered", seed, seq, n)
			}
		}
		for seq := range forwarded {
			if sent[seq] != 1 {
				t.Fatalf("seed %d: packet %d forwarded, transmitted %d times", seed, seq, sent[seq])
			}
		}
		if len(sent) != len(forwarded) {
			t.Fatalf("seed %d: %d packets transmitted, %d forwarded", seed, len(sent), len(forwarded))
		}
		// Every chunk is now either free or on the fill ring, once.
		if got := r.Frames.Len() + r.Fill.Size(); got != o.NumFrames {
			t.Fatalf("seed %d: %d free + %d on fill = %d chunks, want %d", seed, r.Frames.Len(), r.Fill.Size(), got, o.NumFrames)
		}
		if _, err := f.Adopt(r.Frames.FreeList()); err != nil {
			t.Fatalf("seed %d: final ownership check: %v", seed, err)
		}
		if handovers == 0 || len(delivered) < 500 {
			t.Fatalf("seed %d: %d hand-overs, %d packets: the test did not exercise anything", seed, handovers, len(delivered))
		}
	}
}

// TestAdoptRejectsBadFreeLists: a free list that would hand a chunk out
// twice, or one the kernel holds, is refused.
func TestAdoptRejectsBadFreeLists(t *testing.T) {
	f, r := newFake(t, small, 0)
	r.Refill() // chunks 0..7 on the fill ring
	if !f.Deliver(packet(1, 64)) {
		t.Fatal("deliver failed")
	}
	good := r.Frames.FreeList()
	if _, err := f.Adopt(good); err != nil {
		t.Fatalf("adopt of the owner's own free list: %v", err)
	}
	onFill := []uint64{7 * 2048}              // still on the fill ring
	onRX := []uint64{0}                       // chunk 0 went to RX
	dup := append([]uint64{good[0]}, good...) // one chunk twice
	tests := []struct {
		name string
		free []uint64
		want string
	}{
		{"duplicate", dup, "listed twice"},
		{"unaligned", []uint64{100}, "not a chunk"},
		{"outside", []uint64{32 * 2048}, "not a chunk"},
		{"on fill", onFill, "on the fill ring"},
		{"on rx", onRX, "on the rx ring"},
		{"too many", make([]uint64, 33), "33 chunks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Adopt(tt.free)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Adopt = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
