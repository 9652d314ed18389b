package conntrack

import (
	"github.com/xlbnet/xlb/pkg/benchutil"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/xlbnet/xlb/hash"
)

// sharedStore is what BenchmarkShared compares: this package's Shared
// table and a ristretto cache used the way the shared tables need.
type sharedStore interface {
	get(k *hash.Key, rule uint16) (Value, bool)
	set(k *hash.Key, rule uint16, v Value) bool
	settle()
}

type xlbStore struct{ s *Shared }

func (x xlbStore) get(k *hash.Key, rule uint16) (Value, bool) {
	return x.s.Get(k, rule, 1, DefaultIdle)
}
func (x xlbStore) set(k *hash.Key, rule uint16, v Value) bool {
	return x.s.Set(k, rule, v, 1, DefaultIdle)
}
func (xlbStore) settle() {}

// ristrettoEntry carries the whole key: ristretto identifies entries by a
// 64-bit hash (its conflict hash is 0 for uint64 keys), so Get compares
// the key to turn a hash collision into a miss instead of a wrong answer.
type ristrettoEntry struct {
	key  hash.Key
	rule uint16
	v    Value
}

type ristrettoStore struct {
	c    *ristretto.Cache[uint64, ristrettoEntry]
	seed uint64
}

func newRistrettoStore(tb testing.TB, n int) ristrettoStore {
	c, err := ristretto.NewCache(&ristretto.Config[uint64, ristrettoEntry]{
		NumCounters:        int64(10 * n), // ristretto's advice: 10× the entries
		MaxCost:            int64(n),      // cost 1 per entry
		BufferItems:        64,            // ristretto's advice
		IgnoreInternalCost: true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return ristrettoStore{c: c, seed: 0x5eed}
}

func (r ristrettoStore) get(k *hash.Key, rule uint16) (Value, bool) {
	e, ok := r.c.Get(hash.Sum64(k, r.seed^uint64(rule)))
	if !ok || e.key != *k || e.rule != rule {
		return Value{}, false
	}
	return e.v, true
}

func (r ristrettoStore) set(k *hash.Key, rule uint16, v Value) bool {
	return r.c.SetWithTTL(hash.Sum64(k, r.seed^uint64(rule)), ristrettoEntry{*k, rule, v}, 1, DefaultIdle.Duration())
}

func (r ristrettoStore) settle() { r.c.Wait() }

// BenchmarkShared compares the shared tables (PER_SESSION sessions,
// fragments) with ristretto from 2 goroutines: a table for 64 Ki entries
// holding 32 Ki keys; "get" reads present keys, "set" overwrites them,
// "mixed" is 90 % get / 10 % set. It reports the share of Gets that did not
// find a key that was set (ristretto drops and rejects Sets by design).
func BenchmarkShared(b *testing.B) {
	const capacity, live = 1 << 16, 1 << 15
	keys := benchKeys(live)
	stores := []struct {
		name string
		make func(b *testing.B) sharedStore
	}{
		{"xlb", func(b *testing.B) sharedStore { return xlbStore{mustShared(b, capacity)} }},
		{"ristretto", func(b *testing.B) sharedStore { return newRistrettoStore(b, capacity) }},
	}
	for _, st := range stores {
		for _, mode := range []struct {
			name    string
			setEach uint32 // one Set every setEach ops; 0 = none; 1 = only Sets
		}{{"get", 0}, {"set", 1}, {"mixed", 10}} {
			b.Run(st.name+"/"+mode.name, func(b *testing.B) {
				s := st.make(b)
				for i := range keys {
					for !s.set(&keys[i], 0, Value{Backend: uint32(i)}) {
						s.settle()
					}
				}
				s.settle()
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
				var gets, misses, wrong atomic.Int64
				var seq atomic.Uint64
				b.ReportAllocs()
				b.ResetTimer()
				cpu := benchutil.Process()
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(seq.Add(1), 1))
					var g, m, w int64
					for pb.Next() {
						i := rng.Uint32N(live)
						if mode.setEach != 0 && rng.Uint32N(mode.setEach) == 0 {
							s.set(&keys[i], 0, Value{Backend: i})
							continue
						}
						g++
						v, ok := s.get(&keys[i], 0)
						if !ok {
							m++
						} else if v.Backend != i {
							w++
						}
					}
					gets.Add(g)
					misses.Add(m)
					wrong.Add(w)
				})
				cpu.Report(b, "cpu-ns/op")
				if wrong.Load() != 0 {
					b.Fatalf("%d Gets returned another key's value", wrong.Load())
				}
				if g := gets.Load(); g > 0 {
					b.ReportMetric(float64(misses.Load())/float64(g), "miss/get")
				}
			})
		}
	}
}
