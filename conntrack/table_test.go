package conntrack

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/xlbnet/xlb/hash"
)

// flowKey returns a distinct TCP 5-tuple key for i: client 198.18.0.0/15,
// VIP 203.0.113.10:443.
func flowKey(i uint32) hash.Key {
	k := hash.Key{Proto: 6, Kind: hash.Tuple5, DstPort: 443}
	k.Src[10], k.Src[11] = 0xff, 0xff
	k.Dst[10], k.Dst[11] = 0xff, 0xff
	binary.BigEndian.PutUint32(k.Src[12:], 198<<24|18<<16|(i>>16)&1<<16|i&0xffff)
	k.SrcPort = uint16(1024 + i>>17)
	copy(k.Dst[12:], []byte{203, 0, 113, 10})
	return k
}

const minute = 60 * TicksPerSecond

func mustNew(tb testing.TB, n int) *Table {
	tb.Helper()
	t, err := New(n, 0x5eed)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func TestLayout(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  reflect.Type
		want uintptr
	}{
		{"Entry", reflect.TypeFor[Entry](), 64},
		{"header", reflect.TypeFor[header](), 64},
		{"bucket", reflect.TypeFor[bucket](), bucketSize},
		{"sharedBucket", reflect.TypeFor[sharedBucket](), 512},
	} {
		if got := c.typ.Size(); got != c.want {
			t.Errorf("size of %s = %d, want %d", c.name, got, c.want)
		}
	}
	if per := bucketSize / Ways; per > 72 {
		t.Errorf("bytes per flow = %d, want ≤ 72", per)
	}
	// Every part of a bucket is whole cache lines: the header, and each
	// slot (key and value), so one prefetch covers each.
	if f, _ := reflect.TypeFor[bucket]().FieldByName("slots"); f.Offset != 64 {
		t.Errorf("slots start at %d, want 64", f.Offset)
	}
	if bucketSize%64 != 0 {
		t.Errorf("bucket size %d is not whole lines", bucketSize)
	}
}

func TestNew(t *testing.T) {
	for _, c := range []struct {
		max     int
		wantCap int
		wantErr bool
	}{
		{0, 0, true},
		{-1, 0, true},
		{maxTableEntries + 1, 0, true},
		{1, 8, false},
		{8, 8, false},
		{9, 16, false},
		{1000, 1000, false},
		{1001, 1008, false},
	} {
		tb, err := New(c.max, 1)
		if c.wantErr {
			if !errors.Is(err, ErrMaxEntries) {
				t.Errorf("New(%d) error = %v, want ErrMaxEntries", c.max, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("New(%d): %v", c.max, err)
		}
		if tb.Cap() != c.wantCap || tb.ArenaBytes() != c.wantCap*72 {
			t.Errorf("New(%d): Cap = %d, ArenaBytes = %d, want %d, %d", c.max, tb.Cap(), tb.ArenaBytes(), c.wantCap, c.wantCap*72)
		}
	}
}

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want Ticks
	}{
		{0, 0},
		{-time.Second, 0},
		{1, 1},
		{time.Second / 16, 1},
		{time.Second/16 + 1, 2},
		{60 * time.Second, 960},
		{5 * time.Second, 80},
		{100 * 365 * 24 * time.Hour, maxTicks},
	} {
		if got := TicksOf(c.d); got != c.want {
			t.Errorf("TicksOf(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	if DefaultIdle != 960 {
		t.Errorf("DefaultIdle = %d, want 960", DefaultIdle)
	}
	var fc FakeClock
	fc.Set(90 * time.Second)
	fc.Advance(time.Second / 2)
	if got := Now(&fc); got != 90*16+8 {
		t.Errorf("Now = %d, want %d", got, 90*16+8)
	}
	// Wrap-safe ordering across the 32-bit boundary.
	if !Time(0xffff_fff0).Before(Time(5)) || Time(5).Before(Time(0xffff_fff0)) {
		t.Error("Before is not wrap-safe")
	}
}

func TestLookupInsert(t *testing.T) {
	k1, k2 := flowKey(1), flowKey(2)
	v1 := Value{Backend: 7, RuleGen: 3, BackendGen: 11}
	v2 := Value{Backend: 9, RuleGen: 4, BackendGen: 12}
	tests := []struct {
		name    string
		lookKey hash.Key
		rule    uint16
		want    *Value
	}{
		{"hit", k1, 0, &v1},
		{"hit on second rule", k1, 1, &v2},
		{"miss other key", k2, 0, nil},
		{"miss other rule", k1, 2, nil},
	}
	tb := mustNew(t, 1024)
	if _, ok := tb.Insert(&k1, 0, v1, 0, minute, false); !ok {
		t.Fatal("insert rule 0 failed")
	}
	if _, ok := tb.Insert(&k1, 1, v2, 0, minute, false); !ok {
		t.Fatal("insert rule 1 failed")
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			e := tb.Lookup(&c.lookKey, c.rule, 10, minute, false)
			switch {
			case c.want == nil && e != nil:
				t.Fatalf("Lookup = %+v, want miss", e.Value())
			case c.want != nil && e == nil:
				t.Fatal("Lookup missed, want hit")
			case c.want != nil:
				if e.Value() != *c.want || e.Backend() != c.want.Backend || e.RuleGen() != c.want.RuleGen || e.BackendGen() != c.want.BackendGen {
					t.Errorf("Lookup value = %+v, want %+v", e.Value(), *c.want)
				}
				if e.Key() != c.lookKey || e.Rule() != c.rule {
					t.Errorf("Lookup entry key/rule = %v/%d, want %v/%d", e.Key(), e.Rule(), c.lookKey, c.rule)
				}
			}
		})
	}
	st := tb.Stats()
	if st.Lookups != 4 || st.Hits != 2 || st.Misses != 2 || st.Inserts != 2 || tb.Len() != 2 {
		t.Errorf("stats = %+v, len %d", st, tb.Len())
	}
}

// establish inserts (k, rule) and confirms it with a non-SYN lookup at
// the same instant: an established flow.
func establish(t testing.TB, tb *Table, k *hash.Key, rule uint16, v Value, at Time, idle Ticks) bool {
	t.Helper()
	if _, ok := tb.Insert(k, rule, v, at, idle, false); !ok {
		return false
	}
	if tb.Lookup(k, rule, at, idle, false) == nil {
		t.Fatalf("entry of %v gone right after its insert", k)
	}
	return true
}

func TestIdleBoundary(t *testing.T) {
	for _, c := range []struct {
		name    string
		at      Time
		wantHit bool
	}{
		{"one tick before", 100 + minute - 1, true},
		{"exactly at the boundary", 100 + minute, false},
		{"long after", 100 + 10*minute, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := mustNew(t, 64)
			k := flowKey(5)
			establish(t, tb, &k, 0, Value{Backend: 1}, 100, minute)
			got := tb.Lookup(&k, 0, c.at, minute, false) != nil
			if got != c.wantHit {
				t.Fatalf("hit = %v, want %v", got, c.wantHit)
			}
			if st := tb.Stats(); !c.wantHit && (st.Expired != 1 || tb.Len() != 0) {
				t.Errorf("expired = %d, len = %d, want 1, 0", st.Expired, tb.Len())
			}
		})
	}
	// A hit refreshes: a flow seen every 59 s lives forever.
	tb := mustNew(t, 64)
	k := flowKey(6)
	establish(t, tb, &k, 0, Value{Backend: 1}, 0, minute)
	for now := Time(minute - 16); now < 20*minute; now += minute - 16 {
		if tb.Lookup(&k, 0, now, minute, false) == nil {
			t.Fatalf("refreshed entry expired at %d", now)
		}
	}
}

// TestFlagsDoNotRemove: the API removes nothing on TCP flags; FIN and RST
// packets are plain non-SYN lookups and the entry lives until idle.
func TestFlagsDoNotRemove(t *testing.T) {
	tb := mustNew(t, 64)
	k := flowKey(9)
	tb.Insert(&k, 0, Value{Backend: 3}, 0, minute, true) // SYN
	for i, pkt := range []string{"ACK", "FIN", "RST", "ACK after RST"} {
		if e := tb.Lookup(&k, 0, Time(i+1), minute, false); e == nil || e.Backend() != 3 {
			t.Fatalf("%s: entry gone", pkt)
		}
	}
	if tb.Lookup(&k, 0, 4+minute-1, minute, false) == nil {
		t.Fatal("entry gone before idle timeout")
	}
	if tb.Lookup(&k, 0, 4+2*minute, minute, false) != nil {
		t.Fatal("entry alive after idle timeout")
	}
}

func unconfirmed(tb *Table, k *hash.Key, rule uint16) (present, unconf bool) {
	p := tb.Locate(k, rule)
	for _, b := range []*bucket{&tb.buckets[p.b1], &tb.buckets[p.b2]} {
		if i := b.find(p.tag, k, rule); i >= 0 {
			return true, b.flags[i]&flagUnconfirmed != 0
		}
	}
	return false, false
}

func TestSYNConfirm(t *testing.T) {
	tb := mustNew(t, 64)
	k := flowKey(1)
	steps := []struct {
		name      string
		do        func()
		wantUncon bool
	}{
		{"SYN insert", func() { tb.Insert(&k, 0, Value{Backend: 1}, 0, minute, true) }, true},
		{"SYN retransmit looked up", func() { tb.Lookup(&k, 0, 1, minute, true) }, true},
		{"ACK confirms", func() { tb.Lookup(&k, 0, 2, minute, false) }, false},
		{"later SYN looked up keeps it confirmed", func() { tb.Lookup(&k, 0, 3, minute, true) }, false},
		{"SYN re-selects: new connection, unconfirmed", func() { tb.Insert(&k, 0, Value{Backend: 2}, 4, minute, true) }, true},
		{"non-SYN insert over it keeps it unconfirmed", func() { tb.Insert(&k, 0, Value{Backend: 3}, 5, minute, false) }, true},
	}
	for _, s := range steps {
		s.do()
		present, unconf := unconfirmed(tb, &k, 0)
		if !present || unconf != s.wantUncon {
			t.Fatalf("%s: present %v unconfirmed %v, want true %v", s.name, present, unconf, s.wantUncon)
		}
	}
	if tb.Len() != 1 || tb.Stats().Updates != 2 || tb.Stats().Inserts != 1 {
		t.Errorf("len %d stats %+v, want 1 entry, 1 insert, 2 updates", tb.Len(), tb.Stats())
	}
	if e := tb.Lookup(&k, 0, 6, minute, false); e == nil || e.Backend() != 3 {
		t.Fatal("re-selected value not stored")
	}
	// A new flow of any kind starts unconfirmed, on the short timeout,
	// and its next packet confirms it onto the rule's.
	for _, syn := range []bool{false, true} {
		u := flowKey(2)
		if syn {
			u = flowKey(3)
		}
		tb.Insert(&u, 0, Value{Backend: 7}, 10, minute, syn)
		if present, unconf := unconfirmed(tb, &u, 0); !present || !unconf {
			t.Fatalf("new entry (syn %v): present %v unconfirmed %v", syn, present, unconf)
		}
		if tb.Lookup(&u, 0, 10+Time(DefaultUnconfirmedIdle), minute, syn) != nil {
			t.Fatalf("unconfirmed entry (syn %v) alive after the unconfirmed timeout", syn)
		}
		tb.Insert(&u, 0, Value{Backend: 7}, 20, minute, syn)
		if tb.Lookup(&u, 0, 21, minute, false) == nil {
			t.Fatal("the next packet found no entry")
		}
		if tb.Lookup(&u, 0, 21+minute-1, minute, false) == nil {
			t.Fatalf("confirmed entry (syn %v) gone before the rule's idle timeout", syn)
		}
	}
}

func TestReselect(t *testing.T) {
	tb := mustNew(t, 64)
	k := flowKey(1)
	tb.Insert(&k, 0, Value{Backend: 1, RuleGen: 1, BackendGen: 1}, 0, minute, false)
	e := tb.Lookup(&k, 0, 1, minute, false)
	tb.Reselect(e, Value{Backend: 2, RuleGen: 2, BackendGen: 5})
	if got := tb.Lookup(&k, 0, 2, minute, false).Value(); got != (Value{2, 2, 5}) {
		t.Fatalf("after Reselect value = %+v", got)
	}
}

// oneBucket returns a table whose 8 slots form one bucket, so both
// candidate buckets of every key are that bucket.
func oneBucket(t *testing.T) *Table {
	tb := mustNew(t, Ways)
	if len(tb.buckets) != 1 {
		t.Fatalf("buckets = %d, want 1", len(tb.buckets))
	}
	return tb
}

func TestEvictionOrder(t *testing.T) {
	type slot struct {
		syn     bool
		at      Time // insert time; idle is one minute
		confirm bool // the flow's next packet, at `at`
	}
	const now = 1000
	u := Time(DefaultUnconfirmedIdle)
	tests := []struct {
		name      string
		fill      [Ways]slot
		insertSYN bool
		wantOK    bool
		wantGone  int // index of the evicted fill entry, -1 for none
		wantKind  string
	}{
		{
			name: "expired first, even over unconfirmed",
			fill: [Ways]slot{
				{false, now - 100, true}, {true, now - 10, false}, {false, now - minute - 5, true}, {false, now - 50, true},
				{false, now - 40, true}, {false, now - 30, true}, {false, now - 20, false}, {false, now - 10, true},
			},
			insertSYN: true, wantOK: true, wantGone: 2, wantKind: "expired",
		},
		{
			name: "the unconfirmed entry closest to expiry before any confirmed",
			fill: [Ways]slot{
				{false, now - 500, true}, {true, now - u + 20, false}, {false, now - u + 5, false}, {true, now - u + 10, false},
				{false, now - 40, true}, {false, now - 30, true}, {false, now - 20, true}, {false, now - 10, true},
			},
			insertSYN: false, wantOK: true, wantGone: 2, wantKind: "unconfirmed",
		},
		{
			name: "a SYN never evicts a confirmed entry",
			fill: [Ways]slot{
				{false, now - 100, true}, {false, now - 90, true}, {false, now - 300, true}, {false, now - 80, true},
				{true, now - 40, true}, {false, now - 30, true}, {false, now - 20, true}, {false, now - 10, true},
			},
			insertSYN: true, wantOK: false, wantGone: -1,
		},
		{
			name: "nor does any other new flow (a random-tuple ACK or UDP flood)",
			fill: [Ways]slot{
				{false, now - 100, true}, {false, now - 90, true}, {false, now - 500, true}, {false, now - 80, true},
				{true, now - 40, true}, {false, now - 30, true}, {false, now - 20, true}, {false, now - 10, true},
			},
			insertSYN: false, wantOK: false, wantGone: -1,
		},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			tb := oneBucket(t)
			for i, s := range c.fill {
				k := flowKey(uint32(i))
				if _, ok := tb.Insert(&k, 0, Value{Backend: uint32(i)}, s.at, minute, s.syn); !ok {
					t.Fatalf("fill %d failed", i)
				}
				if s.confirm && tb.Lookup(&k, 0, s.at, minute, false) == nil {
					t.Fatalf("confirm %d failed", i)
				}
			}
			nk := flowKey(100)
			_, ok := tb.Insert(&nk, 0, Value{Backend: 100}, now, minute, c.insertSYN)
			if ok != c.wantOK {
				t.Fatalf("insert ok = %v, want %v", ok, c.wantOK)
			}
			for i := range c.fill {
				k := flowKey(uint32(i))
				present, _ := unconfirmed(tb, &k, 0)
				if present == (i == c.wantGone) {
					t.Errorf("fill %d present = %v, want %v", i, present, i != c.wantGone)
				}
			}
			st := tb.Stats()
			got := map[string]uint64{"expired": st.EvictedExpired, "unconfirmed": st.EvictedUnconfirmed, "lru": st.EvictedLRU}
			for kind, n := range got {
				want := uint64(0)
				if kind == c.wantKind {
					want = 1
				}
				if n != want {
					t.Errorf("evictions %s = %d, want %d", kind, n, want)
				}
			}
			if !c.wantOK && st.InsertFailures != 1 {
				t.Errorf("insert failures = %d, want 1", st.InsertFailures)
			}
			if tb.Len() != Ways {
				t.Errorf("len = %d, want %d", tb.Len(), Ways)
			}
		})
	}
}

func TestSweepBounded(t *testing.T) {
	const n = 1000
	tb := mustNew(t, n)
	for i := range uint32(n / 2) {
		k := flowKey(i)
		idle := Ticks(minute)
		if i%2 == 0 {
			idle = 10 * minute
		}
		establish(t, tb, &k, 0, Value{}, 0, idle)
	}
	if tb.Len() != n/2 {
		t.Fatalf("len = %d", tb.Len())
	}
	// Nothing is expired yet: a sweep removes nothing.
	if got := tb.Sweep(minute-1, tb.Cap()); got != 0 {
		t.Fatalf("early sweep removed %d", got)
	}
	const budget = 8 // buckets
	nb := tb.Cap() / Ways
	total, calls := 0, 0
	for range (nb + budget - 1) / budget {
		before := tb.cursor
		got := tb.Sweep(minute, budget)
		calls++
		if got > budget*Ways {
			t.Fatalf("sweep removed %d > budget %d buckets", got, budget)
		}
		if moved := (tb.cursor - before + nb) % nb; moved != budget%nb {
			t.Fatalf("sweep examined %d buckets, want %d", moved, budget)
		}
		total += got
	}
	if total != n/4 || tb.Len() != n/4 || tb.Stats().Expired != n/4 {
		t.Errorf("after one pass in %d calls: removed %d, len %d, expired %d; want %d each", calls, total, tb.Len(), tb.Stats().Expired, n/4)
	}
	if got := tb.Control().Len(); got != n/4 {
		t.Errorf("published len = %d, want %d", got, n/4)
	}
}

// TestFlood: a table full of established flows takes ten times its
// capacity in new flows from random tuples — SYNs, TCP segments without
// SYN, UDP datagrams; no established flow is evicted, every insert fails
// and is counted, and no memory is allocated.
func TestFlood(t *testing.T) {
	const capacity = 4096
	tb := mustNew(t, capacity)
	vals := map[hash.Key]uint32{}
	for i := uint32(0); tb.Len() < tb.Cap(); i++ {
		k := flowKey(i)
		if establish(t, tb, &k, 0, Value{Backend: i}, 0, minute) {
			vals[k] = i
		}
		if i > 100*capacity {
			t.Fatal("table never filled")
		}
	}
	if len(vals) != tb.Cap() {
		t.Fatalf("established = %d, want %d", len(vals), tb.Cap())
	}
	before := tb.Stats()
	arena := tb.ArenaBytes()
	rng := rand.New(rand.NewPCG(1, 2))
	var k hash.Key
	kinds := [3]struct {
		proto uint8
		syn   bool
	}{{6, true}, {6, false}, {17, false}}
	allocs := testing.AllocsPerRun(1, func() {
		for i := range 10 * capacity {
			kind := kinds[i%3]
			k = flowKey(rng.Uint32())
			k.SrcPort, k.Proto = uint16(rng.Uint32()), kind.proto
			if _, ok := tb.Insert(&k, 0, Value{Backend: 1 << 31}, 1, minute, kind.syn); ok {
				t.Fatalf("a new flow (proto %d, syn %v) evicted an established one", kind.proto, kind.syn)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("flood allocated %v times", allocs)
	}
	st := tb.Stats()
	if got := st.InsertFailures - before.InsertFailures; got != 2*10*capacity { // AllocsPerRun runs twice
		t.Errorf("insert failures = %d, want %d", got, 2*10*capacity)
	}
	if st.EvictedLRU != 0 || st.EvictedUnconfirmed != 0 || tb.Len() != tb.Cap() || tb.ArenaBytes() != arena {
		t.Errorf("after flood: stats %+v, len %d, arena %d", st, tb.Len(), tb.ArenaBytes())
	}
	for k, v := range vals {
		if e := tb.Lookup(&k, 0, 2, minute, false); e == nil || e.Backend() != v {
			t.Fatalf("established flow lost or changed: %v", k)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	tb := mustNew(t, 1<<12)
	keys := make([]hash.Key, 1<<13)
	for i := range keys {
		keys[i] = flowKey(uint32(i))
	}
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		tb.Insert(&keys[i%len(keys)], 0, Value{Backend: 1}, Time(i), minute, i%3 == 0)
		i++
	}); a != 0 {
		t.Errorf("Insert allocs = %v, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		tb.Lookup(&keys[i%len(keys)], 0, Time(i), minute, false)
		i++
	}); a != 0 {
		t.Errorf("Lookup allocs = %v, want 0", a)
	}
	if a := testing.AllocsPerRun(100, func() { tb.Sweep(Time(i), 64); tb.Serve(Time(i), 64) }); a != 0 {
		t.Errorf("Sweep+Serve allocs = %v, want 0", a)
	}
}

// runWorker plays the dataplane worker: it owns tb and serves its mailbox
// between "batches" until the returned stop func is called.
func runWorker(tb *Table, now Time, budget int) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			tb.Serve(now, budget)
			tb.Sweep(now, budget)
			time.Sleep(10 * time.Microsecond)
		}
	}()
	return func() { close(quit); <-done }
}

func TestControl(t *testing.T) {
	tb := mustNew(t, 1024)
	// 3 rules × 100 flows; backend = i % 4; rule 2's flows expire at 10.
	for r := range uint16(3) {
		for i := range uint32(100) {
			k := flowKey(i)
			idle := Ticks(minute)
			if r == 2 {
				idle = 10
			}
			syn := r == 1 && i < 10
			if _, ok := tb.Insert(&k, r, Value{Backend: i % 4, RuleGen: uint32(r)}, 0, idle, syn); !ok {
				t.Fatal("insert failed")
			}
			if !syn { // the flow's next packet: established
				tb.Lookup(&k, r, 0, idle, false)
			}
		}
	}
	stop := runWorker(tb, 20, 37) // an odd budget: walks span many batches
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tb.Control()

	for _, tc := range []struct {
		name string
		f    Filter
		want int
	}{
		{"all live", Filter{}, 200},
		{"by rule", Filter{ByRule: true, Rule: 1}, 100},
		{"expired rule", Filter{ByRule: true, Rule: 2}, 0},
		{"by backend", Filter{ByBackend: true, Backend: 3}, 50},
		{"by rule and backend", Filter{ByRule: true, Rule: 0, ByBackend: true, Backend: 3}, 25},
	} {
		got, err := c.Count(ctx, tc.f)
		if err != nil || got != tc.want {
			t.Errorf("Count %s = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}

	recs, total, err := c.List(ctx, Filter{ByRule: true, Rule: 1}, 30)
	if err != nil || total != 100 || len(recs) != 30 {
		t.Fatalf("List = %d records, total %d, %v; want 30, 100", len(recs), total, err)
	}
	for _, r := range recs {
		i := binary.BigEndian.Uint32(r.Key.Src[12:]) & 0xffff
		left := Ticks(minute - 20)
		if i < 10 {
			left = DefaultUnconfirmedIdle - 20
		}
		if r.Rule != 1 || r.Value.Backend != i%4 || r.Value.RuleGen != 1 || r.Unconfirmed != (i < 10) || r.ExpiresIn != left {
			t.Errorf("bad record %+v", r)
		}
	}
	if _, _, err := c.List(ctx, Filter{}, -1); !errors.Is(err, ErrLimit) {
		t.Errorf("List limit -1: err = %v, want ErrLimit", err)
	}

	n, err := c.Flush(ctx, Filter{ByBackend: true, Backend: 0})
	// rule 0: 25, rule 1: 25, rule 2 (expired, still in slots): 25 (the sweep may have taken some first)
	if err != nil || n < 50 || n > 75 {
		t.Fatalf("Flush backend 0 = %d, %v; want 50..75", n, err)
	}
	if got, _ := c.Count(ctx, Filter{ByBackend: true, Backend: 0}); got != 0 {
		t.Errorf("after flush backend 0: count %d", got)
	}
	if n, err := c.Flush(ctx, Filter{ByRule: true, Rule: 1}); err != nil || n != 75 {
		t.Fatalf("Flush rule 1 = %d, %v; want 75", n, err)
	}
	if got, _ := c.Count(ctx, Filter{}); got != 75 {
		t.Errorf("after flushes: count %d, want 75", got)
	}
	st, err := c.Stats(ctx)
	if err != nil || st.Flushed < 125 || st.Inserts != 300 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	// Len is published per batch; give the worker a few.
	deadline := time.Now().Add(10 * time.Second)
	for c.Len() != 75 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if c.Len() != 75 {
		t.Errorf("Len = %d, want 75", c.Len())
	}
}

func TestControlCancel(t *testing.T) {
	tb := mustNew(t, 64) // no worker serves it
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := tb.Control().Count(ctx, Filter{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Count without a worker: err = %v, want deadline exceeded", err)
	}
	if tb.mail.Load() != nil {
		t.Fatal("withdrawn request left in the mailbox")
	}
	// The worker starting later serves the next request normally.
	k := flowKey(1)
	tb.Insert(&k, 0, Value{}, 0, minute, false)
	stop := runWorker(tb, 1, 16)
	defer stop()
	if n, err := tb.Control().Count(context.Background(), Filter{}); err != nil || n != 1 {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
}

// TestHugeIdle: an idle timeout beyond the wrap-safe range is capped
// instead of wrapping into the past.
func TestHugeIdle(t *testing.T) {
	tb := mustNew(t, 64)
	k := flowKey(1)
	tb.Insert(&k, 0, Value{Backend: 1}, 5, Ticks(0xffff_ffff), false)
	if tb.Lookup(&k, 0, 6, Ticks(0xffff_ffff), false) == nil {
		t.Fatal("entry with a huge idle timeout missed")
	}
	if tb.Lookup(&k, 0, 6+maxTicks-1, minute, false) == nil {
		t.Fatal("entry expired before the capped timeout")
	}
	s := mustShared(t, 64)
	s.Set(&k, 0, Value{Backend: 1}, 5, Ticks(0xffff_ffff))
	if _, ok := s.Get(&k, 0, 6, 0); !ok {
		t.Fatal("shared entry with a huge idle timeout missed")
	}
}

// TestControlWhileInserting runs Control calls against a worker that keeps
// inserting and looking up; with -race it checks the mailbox protocol.
func TestControlWhileInserting(t *testing.T) {
	tb := mustNew(t, 512)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for n := uint32(0); ; n++ {
			select {
			case <-quit:
				return
			default:
			}
			for j := range uint32(16) { // one "batch"
				k := flowKey((n*16 + j) % 2048)
				if tb.Lookup(&k, uint16(j%2), Time(n/64), minute, false) == nil {
					tb.Insert(&k, uint16(j%2), Value{Backend: j % 3}, Time(n/64), minute, j%4 == 0)
				}
			}
			tb.Sweep(Time(n/64), 32)
			tb.Serve(Time(n/64), 32)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tb.Control()
	for range 20 {
		n, err := c.Count(ctx, Filter{ByRule: true, Rule: 1})
		if err != nil || n > c.Cap() {
			t.Fatalf("Count = %d, %v", n, err)
		}
		recs, _, err := c.List(ctx, Filter{ByBackend: true, Backend: 2}, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Value.Backend != 2 {
				t.Fatalf("List by backend 2 returned %+v", r)
			}
		}
		if _, err := c.Flush(ctx, Filter{ByRule: true, Rule: 0}); err != nil {
			t.Fatal(err)
		}
		if l := c.Len(); l < 0 || l > c.Cap() {
			t.Fatalf("Len = %d", l)
		}
	}
	close(quit)
	<-done
	if occupied := len(arenaState(tb)); tb.Len() != occupied {
		t.Fatalf("Len %d != occupied %d", tb.Len(), occupied)
	}
}

func TestControlGet(t *testing.T) {
	tb := mustNew(t, 1024)
	for i := range uint32(50) {
		k := flowKey(i)
		if _, ok := tb.Insert(&k, 1, Value{Backend: i}, 0, 100, i == 7); !ok {
			t.Fatal("insert failed")
		}
		if i != 7 {
			tb.Lookup(&k, 1, 0, 100, false) // established
		}
	}
	left := Ticks(min(100, DefaultUnconfirmedIdle) - 20) // 7 is unconfirmed, at 20
	stop := runWorker(tb, 20, 16)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := tb.Control()
	k := flowKey(7)
	rec, ok, err := c.Get(ctx, k, 1)
	if err != nil || !ok || rec.Value.Backend != 7 || !rec.Unconfirmed || rec.ExpiresIn != left {
		t.Errorf("Get(7, rule 1) = %+v, %v, %v; want backend 7, unconfirmed, %d ticks left", rec, ok, err, left)
	}
	if _, ok, err := c.Get(ctx, k, 2); ok || err != nil {
		t.Errorf("Get of the same key under another rule found %v, %v", ok, err)
	}
	k = flowKey(999)
	if _, ok, err := c.Get(ctx, k, 1); ok || err != nil {
		t.Errorf("Get of an absent key found %v, %v", ok, err)
	}
	// Get changes nothing: the entry stays unconfirmed with the same expiry.
	k = flowKey(7)
	if rec, _, _ := c.Get(ctx, k, 1); !rec.Unconfirmed || rec.ExpiresIn != left {
		t.Errorf("second Get: %+v", rec)
	}
}

// TestDoorbell: a Control request rings the table's doorbell once it is
// posted (the worker that wakes finds it pending), and a worker that sleeps
// until its doorbell rings, serving then and while Pending, answers every
// request, a walk over many of its loops included.
func TestDoorbell(t *testing.T) {
	tb := mustNew(t, 1024)
	for i := range uint32(100) {
		k := flowKey(i)
		if _, ok := tb.Insert(&k, 0, Value{Backend: i % 4}, 0, Ticks(minute), false); !ok {
			t.Fatal("insert failed")
		}
	}
	bell := make(chan bool, 16)
	tb.SetDoorbell(func() { bell <- tb.Pending() })
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { // the worker: asleep but for its doorbell
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case pending := <-bell:
				if !pending {
					t.Error("the doorbell rang with no request pending")
				}
				for tb.Pending() {
					tb.Serve(0, 37) // an odd budget: the count spans many loops
				}
			}
		}
	}()
	defer func() { close(quit); <-done }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tb.Control()
	k := flowKey(7)
	if rec, ok, err := c.Get(ctx, k, 0); err != nil || !ok || rec.Value.Backend != 3 {
		t.Errorf("Get = %+v, %v, %v; want backend 3", rec, ok, err)
	}
	if n, err := c.Count(ctx, Filter{ByBackend: true, Backend: 1}); err != nil || n != 25 {
		t.Errorf("Count of backend 1 = %d, %v; want 25", n, err)
	}
	tb.SetDoorbell(nil) // none: a request waits for a worker that polls
	if tb.Pending() {
		t.Error("a request pending with none posted")
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, _, err := c.Get(short, k, 0); err == nil {
		t.Error("Get without a doorbell was answered by a worker that only wakes for one")
	}
}
