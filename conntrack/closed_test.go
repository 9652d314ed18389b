package conntrack

import (
	"context"
	"reflect"
	"testing"

	"github.com/xlbnet/xlb/hash"
)

// TestCloseAt: a FIN or RST marks an entry closed (inactive); later
// lookups keep the mark, a SYN re-selecting over the entry clears it, and
// listings report it.
func TestCloseAt(t *testing.T) {
	tb := mustNew(t, 64)
	k, other := flowKey(1), flowKey(2)
	closed := func() bool {
		c, found := tb.Closed(&k, 0)
		if !found {
			t.Fatal("entry gone")
		}
		return c
	}
	if tb.CloseAt(tb.Locate(&k, 0), &k, 0) {
		t.Error("CloseAt found an entry that does not exist")
	}
	tb.Insert(&k, 0, Value{Backend: 1}, 0, minute, true)
	tb.Insert(&other, 0, Value{Backend: 1}, 0, minute, false)
	tb.Lookup(&k, 0, 1, minute, false)
	if closed() {
		t.Fatal("a new entry is closed")
	}
	if !tb.CloseAt(tb.Locate(&k, 0), &k, 0) || !closed() {
		t.Fatal("CloseAt did not close")
	}
	tb.Lookup(&k, 0, 2, minute, false) // the last ACK
	if !closed() {
		t.Error("a lookup reopened the entry")
	}
	if c, _ := tb.Closed(&other, 0); c {
		t.Error("CloseAt closed another flow")
	}
	ctl := tb.Control()
	done := make(chan []Record)
	go func() {
		recs, _, err := ctl.List(context.Background(), Filter{}, 10)
		if err != nil {
			t.Error(err)
		}
		done <- recs
	}()
	var recs []Record
	for recs == nil {
		tb.Serve(3, 1024)
		select {
		case recs = <-done:
		default:
		}
	}
	for _, r := range recs {
		if want := r.Key == k; r.Closed != want {
			t.Errorf("record %v closed %v, want %v", r.Key, r.Closed, want)
		}
	}
	tb.Insert(&k, 0, Value{Backend: 2}, 4, minute, true) // the port is reused
	if closed() {
		t.Error("a SYN re-selecting left the entry closed")
	}
}

// serveUntil runs the worker's side of Control until done is closed.
func serveUntil(tb *Table, now Time, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
			tb.Serve(now, 7) // a small budget: the walk spans many calls
		}
	}
}

// TestTally: live entries counted per rule and backend, active or
// inactive (closed, or an unconfirmed SYN); expired and rejected entries
// are not counted; slots beyond the caller's arrays go to Other.
func TestTally(t *testing.T) {
	tb := mustNew(t, 256)
	ins := func(i uint32, rule uint16, backend uint32, syn bool, at Time) hash.Key {
		k := flowKey(i)
		if _, ok := tb.Insert(&k, rule, Value{Backend: backend, RuleGen: uint32(i)}, at, minute, syn); !ok {
			t.Fatal("insert failed")
		}
		return k
	}
	ins(1, 0, 0, false, minute)       // active
	ins(2, 0, 0, false, minute)       // active
	ins(3, 0, 1, true, minute)        // SYN: inactive
	k4 := ins(4, 0, 1, false, minute) // closed below: inactive
	ins(5, 1, 0, false, minute)       // rule 1 backend 0
	ins(6, 1, 5, false, minute)       // beyond the arrays: Other
	ins(7, 0, 0, false, minute)       // rejected by Valid (RuleGen 7)
	ins(8, 0, 0, false, 0)            // expired by now
	tb.CloseAt(tb.Locate(&k4, 0), &k4, 0)
	tally := &Tally{
		Counts: [][][2]int{make([][2]int, 2), make([][2]int, 1)},
		Valid:  func(rule uint16, v Value, proto uint8) bool { return v.RuleGen != 7 && proto == 6 },
	}
	done := make(chan struct{})
	var err error
	go func() { err = tb.Control().Tally(context.Background(), tally); close(done) }()
	serveUntil(tb, minute+1, done)
	if err != nil {
		t.Fatal(err)
	}
	want := [][][2]int{{{2, 0}, {0, 2}}, {{1, 0}}}
	if !reflect.DeepEqual(tally.Counts, want) || tally.Other != 1 {
		t.Errorf("counts %v other %d, want %v other 1", tally.Counts, tally.Other, want)
	}
	a := testing.AllocsPerRun(10, func() {
		r := &request{op: opTally, tally: &Tally{Counts: tally.Counts}, done: make(chan struct{})}
		tb.mail.Store(r)
		for tb.mail.Load() != nil {
			tb.Serve(minute+1, 1<<20)
		}
	})
	if a > 3 { // the request, its Tally and channel, made by the test, not the worker
		t.Errorf("%v allocations per tally", a)
	}
}
