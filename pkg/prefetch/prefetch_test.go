package prefetch

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestLineNeverFaults: a prefetch of nil, of a stale address and of an
// address past any mapping returns quietly.
func TestLineNeverFaults(t *testing.T) {
	b := make([]byte, 64)
	Line(nil)
	Line(unsafe.Pointer(&b[0]))
	Line(unsafe.Add(unsafe.Pointer(&b[0]), 1<<40))
}

func TestTouchKeepsLoads(t *testing.T) {
	b := []byte{3, 4}
	var s Sink
	s.Touch(unsafe.Pointer(&b[0]))
	s.Touch(unsafe.Pointer(&b[1]))
	if s.acc != 7 {
		t.Fatalf("sink folded %d, want 7", s.acc)
	}
	s.Flush()
	if sunk.Load() != 7 {
		t.Fatalf("flushed %d", sunk.Load())
	}
	if a := testing.AllocsPerRun(100, func() { Line(unsafe.Pointer(&b[0])); s.Touch(unsafe.Pointer(&b[1])) }); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

// BenchmarkGather plays a batch of 64 flow-table lookups over a 64 MiB
// arena (past the caches): per packet some arithmetic (the key's hash), a
// load of a random header line, and a load of a second line chosen by
// what the first held (the slot). "none" runs each packet to completion;
// "line" and "touch" run the batch in stages, hinting every header line
// and then every slot line before the loads that use them, with the
// PREFETCHT0 stub and with independent loads. ns/pkt is per lookup.
func BenchmarkGather(b *testing.B) {
	const size, batch, lines = 64 << 20, 64, 64 << 20 / 64
	mem := make([]uint64, size/8)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range mem {
		mem[i] = rng.Uint64()
	}
	keys := make([]uint64, 1<<16)
	for i := range keys {
		keys[i] = rng.Uint64()
	}
	work := func(k uint64) uint64 { // about 10 ns of dependent arithmetic
		for range 8 {
			k = (k ^ k>>29) * 0xbf58476d1ce4e5b9
		}
		return k
	}
	line := func(h uint64) int { return int(h%lines) * 8 }
	var s Sink
	var hs, slot [batch]int
	var sum uint64
	for _, mode := range []string{"none", "line", "touch"} {
		b.Run(mode, func(b *testing.B) {
			n := 0
			for b.Loop() {
				ks := keys[n%len(keys) : n%len(keys)+batch]
				if mode == "none" {
					for _, k := range ks {
						h := mem[line(work(k))]
						sum += mem[line(h)]
					}
					n += batch
					continue
				}
				for i, k := range ks {
					hs[i] = line(work(k))
					if mode == "line" {
						Line(unsafe.Pointer(&mem[hs[i]]))
					} else {
						s.Touch(unsafe.Pointer(&mem[hs[i]]))
					}
				}
				for i := range ks {
					slot[i] = line(mem[hs[i]])
					if mode == "line" {
						Line(unsafe.Pointer(&mem[slot[i]]))
					} else {
						s.Touch(unsafe.Pointer(&mem[slot[i]]))
					}
				}
				for i := range ks {
					sum += mem[slot[i]]
				}
				n += batch
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/pkt")
		})
	}
	s.Flush()
	if sum == 1 {
		b.Log(sum)
	}
}
