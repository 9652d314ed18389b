package ring_test

import (
	"encoding/binary"
	"testing"

	"github.com/xlbnet/xlb/ring"
)

// FuzzRings drives the user side and the Fake kernel with an arbitrary
// sequence of operations and checks, after every step, that no frame is
// lost or duplicated (every chunk is in exactly one place) and that
// forwarded packets leave in the order they arrived.
func FuzzRings(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xf0, 6, 0, 9, 1, 5, 3, 2, 8, 4, 7, 5, 6})
	f.Add([]byte{0, 0, 0, 0, 0, 9, 0, 9, 1, 8, 8, 2, 3, 3, 1, 4, 9, 5})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) < 4 {
			return
		}
		const frames = 24
		fk, err := ring.NewFakeAt(ring.Options{FrameSize: 2048, NumFrames: frames, RingSize: 8}, binary.BigEndian.Uint32(prog))
		if err != nil {
			t.Fatal(err)
		}
		r := fk.Rings()
		var (
			held     []ring.Desc // frames the user owns
			peek     = make([]ring.Desc, 8)
			addrs    = make([]uint64, 8)
			nextSeq  uint64
			lastSent = int64(-1)
		)
		prog = prog[4:]
		for i := 0; i+1 < len(prog); i += 2 {
			op, k := prog[i]%7, int(prog[i+1]%10)
			switch op {
			case 0:
				for range k {
					if fk.Deliver(packet(nextSeq, 64)) {
						nextSeq++
					}
				}
			case 1:
				n := r.RX.Peek(peek[:min(k, 8)])
				j := min(n, int(prog[i+1]/10)%(n+1))
				held = append(held, peek[:j]...)
				r.RX.Release(j)
			case 2:
				n := r.TX.Submit(held[:min(k, len(held))])
				held = held[n:]
			case 3:
				n := min(k, len(held))
				for x, d := range held[:n] {
					addrs[x%8] = d.Addr
					if x%8 == 7 || x == n-1 {
						r.Frames.Free(addrs[:x%8+1])
					}
				}
				held = held[n:]
			case 4:
				fk.Transmit(k, func(p []byte) {
					seq := int64(binary.BigEndian.Uint64(p))
					if seq <= lastSent {
						t.Fatalf("sent seq %d after %d", seq, lastSent)
					}
					lastSent = seq
				})
			case 5:
				r.Reclaim()
			case 6:
				r.Refill()
			}
			// Conservation: free + held + fill + RX + TX + completion.
			onFill := r.Fill.Size() - r.Fill.Reserve(r.Fill.Size())
			onTX := r.TX.Size() - r.TX.Reserve(r.TX.Size())
			onRX := r.RX.Peek(make([]ring.Desc, 8))
			onComp := r.Completion.Peek(make([]uint64, 8))
			if got := r.Frames.Len() + len(held) + onFill + onTX + onRX + onComp; got != frames {
				t.Fatalf("step %d (op %d): free %d + held %d + fill %d + tx %d + rx %d + completion %d = %d, want %d",
					i/2, op, r.Frames.Len(), len(held), onFill, onTX, onRX, onComp, got, frames)
			}
		}
	})
}
