package conntrack

import (
	"sync"
	"testing"
)

// scanAll runs Scan over the whole table from bucket 0 until it wraps and
// returns how many entries the visitor saw.
func scanAll(t *testing.T, tb *Table, now Time, all bool, budget int, visit ScanVisitor) int {
	t.Helper()
	seen := 0
	counting := func(e *Entry, left Ticks, marked bool) ScanVerdict {
		seen++
		return visit(e, left, marked)
	}
	cursor := 0
	for range tb.Buckets() + 1 {
		next, wrapped := tb.Scan(cursor, budget, now, all, counting)
		if wrapped {
			return seen
		}
		cursor = next
	}
	t.Fatal("scan never wrapped")
	return 0
}

// TestScanMarks: a scan of every entry marks those the visitor calls
// exceptions; a scan of the marked ones visits exactly those, with their
// time to live, and clears what the visitor calls plain; listings show
// the marks; expired entries are never visited.
func TestScanMarks(t *testing.T) {
	tb := mustNew(t, 4096)
	const n = 1000
	for i := range n {
		k := flowKey(uint32(i))
		tb.Insert(&k, uint16(i%3), Value{Backend: uint32(i)}, 0, minute, false)
		tb.Lookup(&k, uint16(i%3), 0, minute, false) // confirm: life is the minute
	}
	dead := flowKey(n)
	tb.Insert(&dead, 0, Value{Backend: 3}, 0, 1, false) // expired by 10
	now := Time(10)
	exception := func(e *Entry) bool { return e.Backend()%4 == 0 }
	visited := scanAll(t, tb, now, true, 7, func(e *Entry, left Ticks, marked bool) ScanVerdict {
		if marked {
			t.Errorf("entry %d marked before any scan", e.Backend())
		}
		if exception(e) {
			return ScanException
		}
		return ScanPlain
	})
	if visited != n {
		t.Fatalf("scan of all visited %d entries, want %d (the expired one never)", visited, n)
	}
	var lefts []Ticks
	visited = scanAll(t, tb, now, false, 3, func(e *Entry, left Ticks, marked bool) ScanVerdict {
		if !marked || !exception(e) {
			t.Errorf("marked scan visited entry %d (marked %v)", e.Backend(), marked)
		}
		lefts = append(lefts, left)
		if e.Backend()%8 == 0 {
			return ScanPlain // no longer an exception
		}
		return ScanException
	})
	if visited != n/4 {
		t.Errorf("marked scan visited %d, want %d", visited, n/4)
	}
	for _, l := range lefts {
		if l != minute-10 {
			t.Fatalf("time to live %d, want %d", l, minute-10)
		}
	}
	marked := 0
	for i := range n {
		k := flowKey(uint32(i))
		rec, ok := tb.peek(&k, uint16(i%3), now)
		if !ok {
			t.Fatalf("entry %d gone", i)
		}
		want := i%4 == 0 && i%8 != 0
		if rec.Exception != want {
			t.Errorf("entry %d: Exception %v, want %v", i, rec.Exception, want)
		}
		if rec.Exception {
			marked++
		}
	}
	if marked != n/8 {
		t.Errorf("%d marked after clearing, want %d", marked, n/8)
	}
}

// TestScanStop: a visitor that stops makes the next call start again at
// the entry it refused, so no entry is skipped or visited twice.
func TestScanStop(t *testing.T) {
	tb := mustNew(t, 512)
	for i := range 300 {
		k := flowKey(uint32(i))
		tb.Insert(&k, 0, Value{Backend: uint32(i)}, 0, minute, false)
	}
	seen := map[uint32]int{}
	calls, cursor := 0, 0
	for {
		budget := 0
		next, wrapped := tb.Scan(cursor, 1000, 1, true, func(e *Entry, _ Ticks, _ bool) ScanVerdict {
			if budget == 5 { // room for five per call, as a nearly full ring
				return ScanStop
			}
			budget++
			seen[e.Backend()]++
			return ScanException
		})
		calls++
		if wrapped {
			break
		}
		cursor = next
		if calls > 1000 {
			t.Fatal("scan makes no progress")
		}
	}
	if len(seen) != 300 {
		t.Errorf("saw %d of 300 entries", len(seen))
	}
	for b, n := range seen {
		if n != 1 {
			t.Errorf("entry %d visited %d times", b, n)
		}
	}
	if calls < 60 {
		t.Errorf("%d calls for 300 entries at five per call", calls)
	}
}

// TestMarksAcrossUpdates: confirmation keeps the marks, a SYN re-selecting
// over the entry clears both, MarkAt reports a missing entry, and a
// removed entry's slot starts without marks.
func TestMarksAcrossUpdates(t *testing.T) {
	tb := mustNew(t, 64)
	k := flowKey(7)
	p := tb.Locate(&k, 0)
	if tb.MarkAt(p, &k, 0, MarkFromPeer) {
		t.Error("MarkAt found an entry that does not exist")
	}
	tb.InsertAt(p, &k, 0, Value{Backend: 1}, 0, minute, false)
	if !tb.MarkAt(p, &k, 0, MarkException|MarkFromPeer) {
		t.Fatal("MarkAt did not find the entry")
	}
	tb.Lookup(&k, 0, 1, minute, false) // confirms
	rec, _ := tb.peek(&k, 0, 1)
	if !rec.Exception || !rec.FromPeer || rec.Unconfirmed {
		t.Errorf("after confirmation: %+v", rec)
	}
	tb.Insert(&k, 0, Value{Backend: 2}, 2, minute, true) // a SYN: a new connection
	rec, _ = tb.peek(&k, 0, 2)
	if rec.Exception || rec.FromPeer || rec.Value.Backend != 2 {
		t.Errorf("after a SYN's re-selection: %+v", rec)
	}
	tb.MarkAt(p, &k, 0, MarkException)
	tb.Sweep(minute+10, tb.Buckets())
	tb.Insert(&k, 0, Value{Backend: 3}, minute+10, minute, false)
	if rec, _ = tb.peek(&k, 0, minute+10); rec.Exception {
		t.Errorf("a new entry in a swept slot carries the old mark: %+v", rec)
	}
}

func TestScanAllocatesNothing(t *testing.T) {
	tb := mustNew(t, 4096)
	for i := range 2000 {
		k := flowKey(uint32(i))
		tb.Insert(&k, 0, Value{Backend: uint32(i)}, 0, minute, false)
	}
	n := 0
	visit := func(e *Entry, _ Ticks, _ bool) ScanVerdict {
		n++
		if e.Backend()%2 == 0 {
			return ScanException
		}
		return ScanPlain
	}
	cursor := 0
	if a := testing.AllocsPerRun(100, func() { cursor, _ = tb.Scan(cursor, 16, 1, true, visit) }); a != 0 {
		t.Errorf("Scan allocates %v per call", a)
	}
	if n == 0 {
		t.Error("nothing visited")
	}
}

// TestSharedPeekWalk: Peek returns value and time to live without
// refreshing; Walk sees every live entry once and never a torn one while
// writers change the table.
func TestSharedPeekWalk(t *testing.T) {
	s, err := NewShared(1<<12, 9)
	if err != nil {
		t.Fatal(err)
	}
	k := flowKey(1)
	if _, _, ok := s.Peek(&k, 0, 0); ok {
		t.Error("Peek found a missing key")
	}
	s.Set(&k, 2, Value{Backend: 5, RuleGen: 6, BackendGen: 7}, 100, 50)
	v, left, ok := s.Peek(&k, 2, 110)
	if !ok || v != (Value{Backend: 5, RuleGen: 6, BackendGen: 7}) || left != 40 {
		t.Errorf("Peek: %+v %d %v", v, left, ok)
	}
	s.Get(&k, 2, 110, 0)
	if _, left, _ := s.Peek(&k, 2, 110); left != 40 {
		t.Errorf("Get without refresh moved the deadline: %d left", left)
	}
	s.Set(&k, 2, Value{Backend: 5}, 120, 0) // idle 0 ends the entry
	if _, _, ok := s.Peek(&k, 2, 120); ok {
		t.Error("an entry set with idle 0 is still live")
	}

	const n = 2000
	for i := range n {
		k := flowKey(uint32(i))
		for !s.Set(&k, uint16(i%5), Value{Backend: uint32(i), RuleGen: uint32(i) * 3}, 200, 100) {
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a writer rewriting the same keys with consistent values
		defer wg.Done()
		for j := 0; ; j++ {
			select {
			case <-stop:
				return
			default:
			}
			i := j % n
			k := flowKey(uint32(i))
			s.Set(&k, uint16(i%5), Value{Backend: uint32(i), RuleGen: uint32(i) * 3, BackendGen: uint32(j)}, 200, 100)
		}
	}()
	for range 5 {
		seen := 0
		s.Walk(250, func(r Record) bool {
			i := int(r.Value.Backend)
			if r.Key != flowKey(uint32(i)) || r.Rule != uint16(i%5) || r.Value.RuleGen != uint32(i)*3 {
				t.Errorf("torn record %+v", r)
			}
			seen++
			return true
		})
		if seen < n*9/10 || seen > n { // a bucket writers keep busy may be skipped
			t.Errorf("Walk saw %d of %d", seen, n)
		}
	}
	close(stop)
	wg.Wait()
	seen := 0
	s.Walk(250, func(Record) bool { seen++; return seen < 10 })
	if seen != 10 {
		t.Errorf("Walk went on after false: %d", seen)
	}
	s.Walk(301, func(r Record) bool { t.Errorf("expired entry walked: %+v", r); return true })
}

// TestSharedPresence: with a presence filter every stored key is still
// found, most absent keys are turned away by the filter (false positives
// below 1 in 10 at an eighth of the slots live), a rebuild drops the bits
// of removed entries, and Get allocates nothing.
func TestSharedPresence(t *testing.T) {
	s, err := NewShared(1<<14, 11)
	if err != nil {
		t.Fatal(err)
	}
	s.EnablePresence(8, 0)
	const n = 1 << 11
	for i := range n {
		k := flowKey(uint32(i))
		if !s.Set(&k, 1, Value{Backend: uint32(i)}, 0, minute) {
			t.Fatal("set failed")
		}
	}
	for i := range n {
		k := flowKey(uint32(i))
		if v, ok := s.Get(&k, 1, 1, 0); !ok || v.Backend != uint32(i) {
			t.Fatalf("key %d lost behind the filter: %+v %v", i, v, ok)
		}
	}
	fill := s.PresenceFill()
	if fill <= 0 || fill > 0.1 {
		t.Errorf("fill %.3f with %d keys in %d bits", fill, n, 8<<14)
	}
	falsePos := 0
	for i := n; i < n+10000; i++ {
		k := flowKey(uint32(i))
		h := s.secrets.hash(&k, 1)
		if s.presence.Load().has(h) {
			falsePos++
		}
	}
	if falsePos > 1000 {
		t.Errorf("%d of 10000 absent keys pass the filter", falsePos)
	}
	for i := range n / 2 {
		k := flowKey(uint32(i))
		s.Set(&k, 1, Value{}, 2, 0) // removed
	}
	s.RebuildPresence(3)
	if after := s.PresenceFill(); after >= fill*0.7 {
		t.Errorf("fill %.3f after removing half and rebuilding, %.3f before", after, fill)
	}
	for i := n / 2; i < n; i++ {
		k := flowKey(uint32(i))
		if _, ok := s.Get(&k, 1, 3, 0); !ok {
			t.Fatalf("key %d lost by the rebuild", i)
		}
	}
	k := flowKey(n + 5)
	if a := testing.AllocsPerRun(100, func() { s.Get(&k, 1, 3, 0) }); a != 0 {
		t.Errorf("Get allocates %v", a)
	}
}

// BenchmarkScan is the worker's exception scan over a 2^20-slot table
// with 2^19 live entries, a tenth of them marked: ns per bucket of a pass
// over every entry (all: each live slot read and judged) and of a pass
// over the marked ones (header lines, and the slot line of a marked
// entry), with a visitor that only counts.
func BenchmarkScan(b *testing.B) {
	tb := mustNew(b, 1<<20)
	for i := range 1 << 19 {
		k := flowKey(uint32(i))
		tb.Insert(&k, 0, Value{Backend: uint32(i)}, 0, minute, false)
	}
	tb.Scan(0, tb.Buckets(), 1, true, func(e *Entry, _ Ticks, _ bool) ScanVerdict {
		if e.Backend()%10 == 0 {
			return ScanException
		}
		return ScanPlain
	})
	for _, all := range []bool{true, false} {
		name := map[bool]string{true: "all", false: "marked"}[all]
		b.Run(name, func(b *testing.B) {
			n := 0
			visit := func(e *Entry, _ Ticks, marked bool) ScanVerdict {
				n++
				if marked {
					return ScanException
				}
				return ScanPlain
			}
			cursor := 0
			b.ReportAllocs()
			for b.Loop() {
				cursor, _ = tb.Scan(cursor, 32, 1, all, visit)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/bucket")
			if n == 0 {
				b.Fatal("nothing visited")
			}
		})
	}
}
