package conntrack

import (
	"github.com/xlbnet/xlb/pkg/benchutil"
	"math/rand/v2"
	"testing"

	"github.com/xlbnet/xlb/hash"
)

// benchKeys returns n distinct keys in random order.
func benchKeys(n int) []hash.Key {
	keys := make([]hash.Key, n)
	for i := range keys {
		keys[i] = flowKey(uint32(i))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// BenchmarkConntrack measures the per-packet operations on one queue's
// table. "lookup" hits a table of 64 Ki slots (4 MiB arena) filled to 3/4;
// "lookup-1M" does the same on 1 Mi slots (72 MiB, past the caches);
// "miss" looks up absent keys; "insert" inserts fresh flows into a full
// table, so every insert evicts (the steady state under load).
func BenchmarkConntrack(b *testing.B) {
	lookup := func(size, active int) func(b *testing.B) {
		return func(b *testing.B) {
			tb := mustNew(b, size)
			keys := benchKeys(size * 65 / 100) // below the first eviction (about 72 %)
			for i := range keys {
				if _, ok := tb.Insert(&keys[i], 0, Value{Backend: uint32(i)}, 0, DefaultIdle, false); !ok {
					b.Fatal("fill failed")
				}
			}
			if tb.Stats().EvictedLRU != 0 {
				b.Fatal("fill evicted")
			}
			keys = keys[:min(active, len(keys))]
			b.ReportAllocs()
			cpu := benchutil.Process()
			i := 0
			for b.Loop() {
				if tb.Lookup(&keys[i], 0, 1, DefaultIdle, false) == nil {
					b.Fatal("miss")
				}
				i++
				if i == len(keys) {
					i = 0
				}
			}
			cpu.Report(b, "cpu-ns/op")
		}
	}
	b.Run("lookup", lookup(1<<16, 4096))
	b.Run("lookup-64Ki-all", lookup(1<<16, 1<<16))
	b.Run("lookup-1Mi-all", lookup(1<<20, 1<<20))
	b.Run("miss", func(b *testing.B) {
		tb := mustNew(b, 1<<16)
		keys := benchKeys(1 << 17)
		for i := range 1 << 15 {
			tb.Insert(&keys[i], 0, Value{}, 0, DefaultIdle, false)
		}
		absent := keys[1<<16:]
		b.ReportAllocs()
		cpu := benchutil.Process()
		defer cpu.Report(b, "cpu-ns/op")
		i := 0
		for b.Loop() {
			if tb.Lookup(&absent[i], 0, 1, DefaultIdle, false) != nil {
				b.Fatal("hit")
			}
			i = (i + 1) % len(absent)
		}
	})
	b.Run("insert", func(b *testing.B) {
		const size = 1 << 16
		tb := mustNew(b, size)
		keys := benchKeys(4 * size)
		b.ReportAllocs()
		cpu := benchutil.Process()
		defer cpu.Report(b, "cpu-ns/op")
		i := 0
		now := Time(0)
		for b.Loop() {
			if _, ok := tb.Insert(&keys[i], 0, Value{Backend: 1}, now, DefaultIdle, false); !ok {
				b.Fatal("insert failed")
			}
			i++
			if i == len(keys) {
				i = 0
				now++
			}
		}
	})
	// sweep-32: the worker's idle-loop budget, 32 buckets (256 slots), over
	// a 1 Mi-slot table 60 % full: the headers come from memory.
	b.Run("sweep-32", func(b *testing.B) {
		tb := mustNew(b, 1<<20)
		keys := benchKeys(1 << 20 * 6 / 10)
		for i := range keys {
			tb.Insert(&keys[i], 0, Value{}, 0, DefaultIdle, false)
		}
		b.ReportAllocs()
		cpu := benchutil.Process()
		defer cpu.Report(b, "cpu-ns/op")
		for b.Loop() {
			tb.Sweep(1, 32)
		}
	})
}
