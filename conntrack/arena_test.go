package conntrack

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/hash"
)

func arenaKey(i int) hash.Key {
	var k hash.Key
	binary.BigEndian.PutUint32(k.Src[12:], uint32(i))
	k.Src[10], k.Src[11] = 0xff, 0xff
	k.Dst[15] = 10
	k.SrcPort, k.DstPort, k.Proto, k.Kind = uint16(i), 80, 6, hash.Tuple5
	return k
}

func dupFD(t *testing.T, fd int) int {
	t.Helper()
	d, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestArenaHandOver fills a table in an arena, stops it cleanly, and has
// a "successor" (a second mapping of a duplicated memfd, as another
// process would get it) take it over: same entries, values, deadlines and
// count; the two mappings are one memory.
func TestArenaHandOver(t *testing.T) {
	clock := NewMonotonicClock()
	info := ArenaInfo{ClockBase: clock.Base(), Ifindex: 7, Queue: 3}
	tb, err := NewInArena(4096, 42, info)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Arena().Close()
	now := Now(clock)
	idle := TicksOf(60e9)
	const n = 3000
	for i := range n {
		k := arenaKey(i)
		if _, ok := tb.Insert(&k, uint16(i%3), Value{Backend: uint32(i), RuleGen: 1, BackendGen: 2}, now, idle, i%2 == 0); !ok {
			t.Fatalf("insert %d failed", i)
		}
	}
	tb.MarkStopped()
	got := tb.Arena().Info()
	if !got.Clean || got.Used != tb.Len() || got.ClockBase != info.ClockBase || got.Queue != 3 || got.Ifindex != 7 || got.Seed != 42 || got.MaxEntries != 4096 {
		t.Fatalf("header after MarkStopped: %+v (len %d)", got, tb.Len())
	}

	succ, err := AdoptTable(dupFD(t, tb.Arena().FD()))
	if err != nil {
		t.Fatal(err)
	}
	defer succ.Arena().Close()
	if !succ.Resume() {
		t.Error("Resume after a clean stop reports a crash")
	}
	if succ.Len() != tb.Len() || succ.Cap() != tb.Cap() {
		t.Errorf("successor len %d cap %d, want %d %d", succ.Len(), succ.Cap(), tb.Len(), tb.Cap())
	}
	if succ.Arena().Info().Clean {
		t.Error("header still clean after Resume")
	}
	sclock := MonotonicClockAt(succ.Arena().Info().ClockBase)
	snow := Now(sclock)
	if snow.Sub(now) < 0 || snow.Sub(now) > TicksPerSecond {
		t.Errorf("successor's time %d, predecessor's %d: the clock base did not carry", snow, now)
	}
	for i := range n {
		k := arenaKey(i)
		e := succ.Lookup(&k, uint16(i%3), snow, idle, false)
		if e == nil || e.Value() != (Value{Backend: uint32(i), RuleGen: 1, BackendGen: 2}) {
			t.Fatalf("entry %d after the hand-over: %+v", i, e)
		}
	}
	// One memory: what the successor writes, the old mapping sees.
	k := arenaKey(n + 1)
	succ.Insert(&k, 9, Value{Backend: 99}, snow, idle, false)
	if e := tb.Lookup(&k, 9, snow, idle, false); e == nil || e.Backend() != 99 {
		t.Errorf("the predecessor's mapping does not see the successor's entry: %+v", e)
	}
}

// TestArenaCrash: a table whose owner died (no MarkStopped) is recounted,
// and Scrub removes entries the registry does not know.
func TestArenaCrash(t *testing.T) {
	tb, err := NewInArena(1024, 1, ArenaInfo{Queue: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Arena().Close()
	var fc FakeClock
	for i := range 500 {
		k := arenaKey(i)
		tb.Insert(&k, uint16(i%5), Value{Backend: uint32(i % 7)}, Now(&fc), 100, false)
	}
	want := tb.Len()
	succ, err := AdoptTable(dupFD(t, tb.Arena().FD()))
	if err != nil {
		t.Fatal(err)
	}
	defer succ.Arena().Close()
	if succ.Resume() {
		t.Error("Resume without MarkStopped reports a clean stop")
	}
	if succ.Len() != want {
		t.Errorf("recounted %d, want %d", succ.Len(), want)
	}
	removed := succ.Scrub(func(rule uint16, backend uint32) bool { return rule != 4 && backend != 6 })
	if removed == 0 || succ.Len() != want-removed {
		t.Errorf("scrub removed %d, len %d of %d", removed, succ.Len(), want)
	}
	for i := range 500 {
		k := arenaKey(i)
		e := succ.Lookup(&k, uint16(i%5), Now(&fc), 100, false)
		if keep := i%5 != 4 && i%7 != 6; (e != nil) != keep {
			t.Fatalf("entry %d (rule %d backend %d) present %v after scrub", i, i%5, i%7, e != nil)
		}
	}
}

// TestArenaRejects: a header that is corrupt, of another kind or of
// another layout is refused with the reason.
func TestArenaRejects(t *testing.T) {
	tb, err := NewInArena(64, 1, ArenaInfo{})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Arena().Close()
	if _, err := AdoptShared(dupFD(t, tb.Arena().FD())); err == nil || !strings.Contains(err.Error(), "kind") {
		t.Errorf("a table adopted as shared: %v", err)
	}
	a := tb.Arena()
	// Another layout, with a valid checksum.
	le := binary.LittleEndian
	a.writeHeader(a.Info(), le.Uint32(a.mem[12:])^1, le.Uint32(a.mem[16:]))
	if _, err := AdoptTable(dupFD(t, a.FD())); !errors.Is(err, ErrArenaLayout) {
		t.Errorf("another layout: %v, want ErrArenaLayout", err)
	}
	a.writeHeader(a.Info(), arenaLayout[bucket](), bucketSize)
	a.mem[40] ^= 0xff // the seed, without fixing the checksum
	if _, err := AdoptTable(dupFD(t, a.FD())); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("corrupt header: %v", err)
	}
	copy(a.mem, "notarena")
	if _, err := AdoptTable(dupFD(t, a.FD())); err == nil || !strings.Contains(err.Error(), "magic") {
		t.Errorf("bad magic: %v", err)
	}
	type other struct {
		header
		slots [Ways]Entry
		extra uint64
	}
	if arenaLayout[other]() == arenaLayout[bucket]() {
		t.Error("a different bucket shape has the same layout checksum")
	}
}

// TestSharedArena: a Shared table in an arena is usable by a second
// mapping at once, and Repair unlocks a bucket a dead writer held.
func TestSharedArena(t *testing.T) {
	s, err := NewSharedInArena(1024, 5, ArenaInfo{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Arena().Close()
	var fc FakeClock
	now := Now(&fc)
	for i := range 300 {
		k := arenaKey(i)
		if !s.Set(&k, 1, Value{Backend: uint32(i)}, now, 100) {
			t.Fatal("set failed")
		}
	}
	s2, err := AdoptShared(dupFD(t, s.Arena().FD()))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Arena().Close()
	for i := range 300 {
		k := arenaKey(i)
		if v, ok := s2.Get(&k, 1, now, 0); !ok || v.Backend != uint32(i) {
			t.Fatalf("entry %d: %v %v", i, v, ok)
		}
	}
	// A writer died holding a bucket.
	k := arenaKey(rand.IntN(300))
	b1, b2, _ := s2.where(&k, 1)
	b1.seq.Add(1)
	if b2 != b1 {
		b2.seq.Add(1)
	}
	if s2.Set(&k, 1, Value{Backend: 1000}, now, 100) {
		t.Fatal("Set succeeded on a locked bucket")
	}
	removed := s2.Repair(func(rule uint16, backend uint32) bool { return backend%2 == 0 })
	if removed != 150 {
		t.Errorf("repair removed %d, want 150", removed)
	}
	if !s2.Set(&k, 1, Value{Backend: 1000}, now, 100) {
		t.Error("Set still fails after Repair")
	}
}
