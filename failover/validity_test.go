package failover

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestGensValid is the validity rule cell by cell, in the 16 bits an entry
// records, across the wrap from 65535 to 0.
func TestGensValid(t *testing.T) {
	stamp := func(unhealthy, drain uint16) Stamp { return Gens{UnhealthyGen: unhealthy, DrainGen: drain}.Stamp() }
	for _, tc := range []struct {
		name                     string
		g                        Gens
		s                        Stamp
		persists, beforeDeadline bool
		want                     bool
	}{
		{"current", Gens{3, 7, 7}, stamp(3, 7), false, false, true},
		{"unhealthy since, does not persist", Gens{4, 7, 7}, stamp(3, 7), false, true, false},
		{"unhealthy since, persists", Gens{4, 7, 7}, stamp(3, 7), true, false, true},
		{"departed since, before the deadline", Gens{3, 8, 7}, stamp(3, 7), false, true, true},
		{"departed since, at the deadline", Gens{3, 8, 7}, stamp(3, 7), false, false, false},
		{"older than the floor", Gens{3, 9, 8}, stamp(3, 7), false, true, false},
		{"unhealthy and departed, persists, before the deadline", Gens{4, 8, 7}, stamp(3, 7), true, true, true},
		{"unhealthy and departed, persists, at the deadline", Gens{4, 8, 7}, stamp(3, 7), true, false, false},
		// The wrap: generation 65536 is 0 in an entry.
		{"unhealthy generation wrapped", Gens{0, 7, 7}, stamp(65535, 7), false, true, false},
		{"unhealthy generation wrapped, persists", Gens{0, 7, 7}, stamp(65535, 7), true, false, true},
		{"drain generation wrapped, floor before the wrap", Gens{3, 0, 65535}, stamp(3, 65535), false, true, true},
		{"drain generation wrapped, floor after the wrap", Gens{3, 1, 0}, stamp(3, 65535), false, true, false},
		{"drain generation wrapped, entry at the floor", Gens{3, 2, 0}, stamp(3, 0), false, true, true},
		{"floor far back, within half the range", Gens{3, 100, 65535 - 32666}, stamp(3, 65535), false, true, true},
	} {
		if got := tc.g.Valid(tc.s, tc.persists, tc.beforeDeadline); got != tc.want {
			t.Errorf("%s: %+v.Valid(%#x, persists %v, before deadline %v) = %v, want %v", tc.name, tc.g, uint32(tc.s), tc.persists, tc.beforeDeadline, got, tc.want)
		}
	}
}

// TestValidWhenCurrent: an entry stamped with the backend's current
// generations is valid whatever the persistence and the deadline, the
// shortcut the dataplane takes; and Current holds for nothing else.
func TestValidWhenCurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		g := Gens{UnhealthyGen: uint16(rng.Uint32()), DrainGen: uint16(rng.Uint32()), DrainFloor: uint16(rng.Uint32())}
		s := g.Stamp()
		if !g.Current(s) {
			t.Fatalf("%+v: Current(Stamp()) is false", g)
		}
		for _, args := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			if !g.Valid(s, args[0], args[1]) {
				t.Fatalf("%+v: Valid(Stamp(), %v, %v) is false", g, args[0], args[1])
			}
		}
		other := Stamp(rng.Uint32())
		if g.Current(other) != (other == s) {
			t.Fatalf("%+v: Current(%#x) = %v", g, uint32(other), g.Current(other))
		}
	}
}

// TestGensCutTo16Bits: a BackendState's generations reach the rule (and a
// new entry's stamp) as their low 16 bits, the width an entry records.
func TestGensCutTo16Bits(t *testing.T) {
	b := BackendState{UnhealthyGen: 1<<16 + 2, DrainGen: 3<<16 + 5, DrainFloor: 1<<17 + 4}
	if g := b.Gens(); g != (Gens{UnhealthyGen: 2, DrainGen: 5, DrainFloor: 4}) {
		t.Errorf("Gens() = %+v", g)
	}
	if s := b.Stamp(); s != 2<<16|5 {
		t.Errorf("Stamp() = %#x, want 0x20005", uint32(s))
	}
}

// TestGenerationsAcrossTheWrap drives Compute across generation 65536 (0
// in an entry): drains and health changes keep their meaning for the
// entries made before and after.
func TestGenerationsAcrossTheWrap(t *testing.T) {
	p := DefaultPolicy()
	p.ConnectionDrainingTimeout = time.Minute
	gs := []Group{primary("a")}
	clk := newClock()
	st := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", up)}, nil, clk.now)
	// As if a1 had been drained 65535 times and failed 65535 times.
	aged := *st
	aged.Backends = append([]BackendState(nil), st.Backends...)
	a1 := &aged.Backends[0]
	a1.UnhealthyGen, a1.DrainGen, a1.DrainFloor = 65535, 65535, 65535
	old := a1.Stamp()

	// Drain: DrainGen becomes 65536 (0 in an entry); the old entry drains.
	now := clk.Advance(time.Second)
	st1 := mustCompute(t, p, gs, []Backend{be("a1", "a", up, drained(now)), be("a2", "a", up)}, &aged, now)
	b := backendState(t, st1, "a1")
	if b.DrainGen != 65536 || b.DrainFloor != 65535 {
		t.Fatalf("after the drain: gen %d floor %d, want 65536, 65535", b.DrainGen, b.DrainFloor)
	}
	if !entryValid(b, old, now.Add(time.Minute-time.Nanosecond), true) || entryValid(b, old, now.Add(time.Minute), true) {
		t.Error("an entry from generation 65535 is not bounded by the drain across the wrap")
	}
	// Undrain after the deadline, then drain again: the floor crosses the
	// wrap, the entry from before the first drain stays dead and the one
	// from the undrained period drains.
	st2 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", up)}, st1, clk.Advance(2*time.Minute))
	mid := backendState(t, st2, "a1").Stamp()
	if uint16(mid) != 0 {
		t.Fatalf("stamp after the undrain %#x, want drain generation 0", uint32(mid))
	}
	now = clk.Advance(time.Second)
	st3 := mustCompute(t, p, gs, []Backend{be("a1", "a", up, drained(now)), be("a2", "a", up)}, st2, now)
	b = backendState(t, st3, "a1")
	if !entryValid(b, mid, now.Add(30*time.Second), true) {
		t.Error("entry of the undrained period (generation 0) invalid during the second drain")
	}
	if entryValid(b, old, now.Add(30*time.Second), true) {
		t.Error("entry of generation 65535 came back with the drain after the wrap")
	}
	// Health across the wrap: UnhealthyGen 65535 → 65536 (0 in an entry).
	st4 := mustCompute(t, p, gs, []Backend{be("a1", "a", up), be("a2", "a", up)}, st3, clk.Advance(2*time.Minute))
	fresh := backendState(t, st4, "a1").Stamp()
	st5 := mustCompute(t, p, gs, []Backend{be("a1", "a", down), be("a2", "a", up)}, st4, clk.Advance(time.Second))
	b = backendState(t, st5, "a1")
	if b.UnhealthyGen != 65536 {
		t.Fatalf("UnhealthyGen %d, want 65536", b.UnhealthyGen)
	}
	if entryValid(b, fresh, clk.now, false) || !entryValid(b, fresh, clk.now, true) {
		t.Error("a failure across the wrap does not divert the non-persisting entry only")
	}
	if !entryValid(b, b.Stamp(), clk.now, false) {
		t.Error("entry made after the failure invalid")
	}
}
