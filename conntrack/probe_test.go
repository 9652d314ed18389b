package conntrack

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestFirstTagAndEmpties: firstTag and empties agree with a plain scan.
func TestFirstTagAndEmpties(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		var b bucket
		pool := []uint16{0, 1, 0xffff, uint16(rng.Uint32())}
		for i := range Ways {
			b.tags[i] = pool[rng.IntN(len(pool))]
		}
		tag := pool[1+rng.IntN(len(pool)-1)]
		first, empty, empties := -1, -1, 0
		for i := range Ways {
			if b.tags[i] == tag && first < 0 {
				first = i
			}
			if b.tags[i] == 0 {
				if empty < 0 {
					empty = i
				}
				empties++
			}
		}
		if got := b.firstTag(tag); got != first {
			t.Fatalf("tags %x: firstTag(%#x) = %d, want %d", b.tags, tag, got, first)
		}
		if f, n := b.empties(); f != empty || n != empties {
			t.Fatalf("tags %x: empties = %d, %d; want %d, %d", b.tags, f, n, empty, empties)
		}
	}
}

// TestProbeAPI: Locate + LookupAt/InsertAt behave exactly as Lookup and
// Insert on a twin table, and the prefetches change nothing.
func TestProbeAPI(t *testing.T) {
	a, b := mustNew(t, 256), mustNew(t, 256)
	rng := rand.New(rand.NewPCG(7, 8))
	for step := range 5000 {
		k := flowKey(uint32(rng.IntN(400)))
		rule := uint16(rng.IntN(2))
		now := Time(step / 50)
		syn := rng.IntN(4) == 0
		p := a.Locate(&k, rule)
		a.PrefetchBuckets(p)
		a.PrefetchSlot(p)
		ea := a.LookupAt(p, &k, rule, now, 30, syn)
		eb := b.Lookup(&k, rule, now, 30, syn)
		if (ea == nil) != (eb == nil) || (ea != nil && ea.Value() != eb.Value()) {
			t.Fatalf("step %d: LookupAt %v, Lookup %v", step, ea, eb)
		}
		if ea == nil {
			v := Value{Backend: uint32(step)}
			_, oka := a.InsertAt(p, &k, rule, v, now, 30, syn)
			_, okb := b.Insert(&k, rule, v, now, 30, syn)
			if oka != okb {
				t.Fatalf("step %d: InsertAt %v, Insert %v", step, oka, okb)
			}
		}
		if step%100 == 0 {
			a.Sweep(now, 4)
			b.Sweep(now, 4)
		}
	}
	if !reflect.DeepEqual(arenaState(a), arenaState(b)) || a.Stats() != b.Stats() {
		t.Fatalf("the tables differ: stats %+v vs %+v", a.Stats(), b.Stats())
	}
}

// TestArenaLineAligned: the arena starts on a cache line, so with
// 576-byte buckets every header and every slot is one whole line. (Go
// places objects of these sizes at multiples of their 64-byte-multiple
// size class in page-aligned spans, and large ones on page boundaries.)
func TestArenaLineAligned(t *testing.T) {
	for _, n := range []int{1, 8, 24, 100, 1000, 5000, 1 << 16} {
		tb := mustNew(t, n)
		if p := reflect.ValueOf(&tb.buckets[0]).Pointer(); p%64 != 0 {
			t.Errorf("New(%d): arena at %#x, not on a 64-byte line", n, p)
		}
	}
}
