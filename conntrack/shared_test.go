package conntrack

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/xlbnet/xlb/hash"
)

func mustShared(tb testing.TB, n int) *Shared {
	tb.Helper()
	s, err := NewShared(n, 0x5eed)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestSharedGetSet(t *testing.T) {
	s := mustShared(t, 1024)
	if s.Cap() != 1024 {
		t.Fatalf("Cap = %d", s.Cap())
	}
	if _, err := NewShared(0, 1); err == nil {
		t.Fatal("NewShared(0) succeeded")
	}
	k1, k2 := flowKey(1), flowKey(2)
	v1 := Value{Backend: 4, RuleGen: 5, BackendGen: 6}
	v2 := Value{Backend: 7, RuleGen: 8, BackendGen: 9}
	if !s.Set(&k1, 0, v1, 0, 5*TicksPerSecond) || !s.Set(&k1, 1, v2, 0, 5*TicksPerSecond) {
		t.Fatal("Set failed without contention")
	}
	for _, c := range []struct {
		name string
		k    hash.Key
		rule uint16
		now  Time
		want *Value
	}{
		{"hit", k1, 0, 1, &v1},
		{"other rule", k1, 1, 1, &v2},
		{"absent rule", k1, 2, 1, nil},
		{"absent key", k2, 0, 1, nil},
		{"one tick before the TTL", k1, 0, 5*TicksPerSecond - 1, &v1},
		{"exactly at the TTL", k1, 0, 5 * TicksPerSecond, nil},
	} {
		got, ok := s.Get(&c.k, c.rule, c.now, 0)
		if ok != (c.want != nil) || (ok && got != *c.want) {
			t.Errorf("%s: Get = %+v, %v; want %+v", c.name, got, ok, c.want)
		}
	}
	// Overwrite in place.
	s.Set(&k1, 0, v2, 1, 10)
	if got, ok := s.Get(&k1, 0, 2, 0); !ok || got != v2 {
		t.Errorf("after overwrite Get = %+v, %v", got, ok)
	}
	if n := s.Count(Filter{}, 2); n != 2 {
		t.Errorf("Count = %d, want 2 (overwrite must not duplicate)", n)
	}
}

func TestSharedRefresh(t *testing.T) {
	s := mustShared(t, 64)
	k := flowKey(3)
	const idle = 60 * TicksPerSecond
	s.Set(&k, 0, Value{Backend: 1}, 0, idle)
	// Hits within the first second do not move the deadline (rate limit).
	if _, ok := s.Get(&k, 0, TicksPerSecond-1, idle); !ok {
		t.Fatal("miss")
	}
	if _, ok := s.Get(&k, 0, idle, 0); ok {
		t.Fatal("deadline moved by a hit within refreshStep")
	}
	s.Set(&k, 0, Value{Backend: 1}, 0, idle)
	if _, ok := s.Get(&k, 0, 2*TicksPerSecond, idle); !ok {
		t.Fatal("miss")
	}
	if _, ok := s.Get(&k, 0, idle+TicksPerSecond, 0); !ok {
		t.Fatal("refreshed entry expired early")
	}
	if _, ok := s.Get(&k, 0, idle+2*TicksPerSecond, 0); ok {
		t.Fatal("refreshed entry outlived its new deadline")
	}
}

func TestSharedEviction(t *testing.T) {
	s := mustShared(t, SharedWays) // one bucket
	for i := range uint32(SharedWays) {
		k := flowKey(i)
		s.Set(&k, 0, Value{Backend: i}, 0, Ticks(100+i)) // key 0 expires first
	}
	k := flowKey(100)
	s.Set(&k, 0, Value{Backend: 100}, 10, 100)
	for i := range uint32(SharedWays) {
		k := flowKey(i)
		_, ok := s.Get(&k, 0, 11, 0)
		if ok == (i == 0) {
			t.Errorf("key %d present = %v after eviction", i, ok)
		}
	}
	// An expired slot is taken before the closest-to-expiry live one.
	k3 := flowKey(3)
	s.Set(&k3, 0, Value{Backend: 3}, 10, 1) // expires at 11
	k = flowKey(101)
	s.Set(&k, 0, Value{Backend: 101}, 12, 100)
	if _, ok := s.Get(&k3, 0, 12, 0); ok {
		t.Error("expired key 3 still present")
	}
	if n := s.Count(Filter{}, 12); n != SharedWays {
		t.Errorf("Count = %d, want %d", n, SharedWays)
	}
}

func TestSharedFlushList(t *testing.T) {
	s := mustShared(t, 4096)
	for r := range uint16(2) {
		for i := range uint32(100) {
			k := flowKey(i)
			s.Set(&k, r, Value{Backend: i % 5}, 0, minute)
		}
	}
	if n := s.Count(Filter{ByRule: true, Rule: 1}, 1); n != 100 {
		t.Errorf("Count rule 1 = %d", n)
	}
	recs := s.List(Filter{ByBackend: true, Backend: 2}, 1, 1000)
	if len(recs) != 40 {
		t.Fatalf("List backend 2 = %d records, want 40", len(recs))
	}
	for _, r := range recs {
		i := uint32(r.Key.Src[14])<<8 | uint32(r.Key.Src[15])
		if r.Value.Backend != 2 || i%5 != 2 || r.ExpiresIn != minute-1 || r.Key != flowKey(i) {
			t.Errorf("bad record %+v", r)
		}
	}
	if got := len(s.List(Filter{}, 1, 7)); got != 7 {
		t.Errorf("List limit 7 = %d", got)
	}
	if n := s.Flush(Filter{ByBackend: true, Backend: 2}); n != 40 {
		t.Errorf("Flush backend 2 = %d, want 40", n)
	}
	if n := s.Flush(Filter{ByRule: true, Rule: 0}); n != 80 {
		t.Errorf("Flush rule 0 = %d, want 80", n)
	}
	if n := s.Count(Filter{}, 1); n != 80 {
		t.Errorf("Count after flushes = %d, want 80", n)
	}
	k := flowKey(2)
	if _, ok := s.Get(&k, 1, 1, 0); ok {
		t.Error("flushed entry still found")
	}
}

func TestFragmentKey(t *testing.T) {
	src, dst := flowKey(1).Src, flowKey(1).Dst
	a := FragmentKey(src, dst, 17, 0x00010002)
	b := FragmentKey(src, dst, 17, 0x00020001)
	c := FragmentKey(src, dst, 6, 0x00010002)
	if a == b || a == c || a.SrcPort != 1 || a.DstPort != 2 || a.Kind != hash.Tuple3 {
		t.Fatalf("FragmentKey: %+v %+v %+v", a, b, c)
	}
	s := mustShared(t, 64)
	s.Set(&a, 0, Value{Backend: 1}, 0, TicksOf(5e9))
	if _, ok := s.Get(&b, 0, 1, 0); ok {
		t.Fatal("other datagram's fragment matched")
	}
}

// valueOf makes a value that names its key, so a torn or mixed-up read is
// detectable: all three fields must agree.
func valueOf(i uint32, gen uint32) Value {
	return Value{Backend: i, RuleGen: i*3 + 1, BackendGen: gen<<16 | i}
}

// TestSharedConcurrent: writers and readers on overlapping keys from
// several goroutines; a Get must return a value written for that key.
// Run with -race.
func TestSharedConcurrent(t *testing.T) {
	s := mustShared(t, 2*SharedWays) // two buckets: constant eviction and contention
	const keys, ops, workers = 64, 100000, 4
	keySet := make([]hash.Key, keys)
	for i := range keySet {
		keySet[i] = flowKey(uint32(i))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var hits, drops int
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			h, d := 0, 0
			for n := range ops {
				i := rng.Uint32N(keys)
				now := Time(n / 1000)
				if rng.Uint32N(4) == 0 {
					if !s.Set(&keySet[i], uint16(i%2), valueOf(i, uint32(w)), now, 50) {
						d++
					}
					continue
				}
				v, ok := s.Get(&keySet[i], uint16(i%2), now, 50)
				if !ok {
					continue
				}
				h++
				if v.Backend != i || v.RuleGen != i*3+1 || v.BackendGen&0xffff != i {
					t.Errorf("Get(key %d) = %+v: another key's or a torn value", i, v)
					return
				}
			}
			mu.Lock()
			hits += h
			drops += d
			mu.Unlock()
		}()
	}
	// An off-path flusher and counter running at the same time.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			s.Flush(Filter{ByBackend: true, Backend: 7})
			s.Count(Filter{}, 0)
		}
	}()
	wg.Wait()
	if hits == 0 {
		t.Fatal("no hits at all")
	}
	t.Logf("hits %d, contended sets %d", hits, drops)
}

func TestSharedZeroAllocs(t *testing.T) {
	s := mustShared(t, 1024)
	k := flowKey(1)
	if a := testing.AllocsPerRun(1000, func() {
		s.Set(&k, 0, Value{Backend: 1}, 0, minute)
		s.Get(&k, 0, 1, minute)
	}); a != 0 {
		t.Errorf("Set+Get allocs = %v, want 0", a)
	}
}

// TestSharedHeldBucket: while a writer holds a bucket (odd sequence), Get
// reports a miss after its bounded retries instead of reading the slots or
// waiting, and Set gives up at once; both recover when the writer leaves.
func TestSharedHeldBucket(t *testing.T) {
	s := mustShared(t, SharedWays) // one bucket
	k := flowKey(1)
	s.Set(&k, 0, Value{Backend: 1}, 0, minute)
	b := &s.buckets[0]
	seq := b.lock()
	if _, ok := s.Get(&k, 0, 1, 0); ok {
		t.Error("Get read a bucket held by a writer")
	}
	if s.Set(&k, 0, Value{Backend: 2}, 1, minute) {
		t.Error("Set went through a held bucket")
	}
	b.seq.Store(seq + 2)
	if v, ok := s.Get(&k, 0, 1, 0); !ok || v.Backend != 1 {
		t.Errorf("after release Get = %+v, %v", v, ok)
	}
	if !s.Set(&k, 0, Value{Backend: 2}, 1, minute) {
		t.Error("Set failed on a free bucket")
	}
}
