package conntrack

import (
	"context"
	"testing"
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
