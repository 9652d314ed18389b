package hash

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestTablesShareByContent: the same set, size and seed gives the same
// table, whatever the order it is given in; any difference (a weight, an
// ID, a name, the size, the seed) gives another, equal to a plain Build.
func TestTablesShareByContent(t *testing.T) {
	var ts Tables
	bs := testBackends(20, 10)
	a, err := ts.Build(bs, 4099, 1)
	if err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(bs)
	slices.Reverse(rev)
	if b, _ := ts.Build(rev, 4099, 1); b != a {
		t.Error("the same set in another order built a second table")
	}
	weight := slices.Clone(bs)
	weight[3].Weight++
	id := slices.Clone(bs)
	id[3].ID = 9999
	name := slices.Clone(bs)
	name[3].Name = "10.9.9.9"
	for _, tc := range []struct {
		what string
		bs   []Backend
		m    uint32
		seed uint64
	}{
		{"weight", weight, 4099, 1}, {"id", id, 4099, 1}, {"name", name, 4099, 1},
		{"one fewer", bs[1:], 4099, 1}, {"size", bs, 4111, 1}, {"seed", bs, 4099, 2},
	} {
		got, err := ts.Build(tc.bs, tc.m, tc.seed)
		if err != nil {
			t.Fatal(err)
		}
		if got == a {
			t.Errorf("%s differs: got the shared table", tc.what)
		}
		want := mustBuild(t, tc.bs, tc.m, tc.seed)
		if !slices.Equal(got.SlotIDs(), want.SlotIDs()) || !slices.Equal(got.Backends(), want.Backends()) {
			t.Errorf("%s: the interned table differs from Build's", tc.what)
		}
	}
	if st := ts.Stats(); st.Built != 7 || st.Shared != 1 {
		t.Errorf("stats %+v, want 7 built and 1 shared", st)
	}
	if _, err := ts.Build([]Backend{{Name: "a", ID: 1}, {Name: "b", ID: 1}}, 13, 1); err == nil {
		t.Error("duplicate IDs accepted")
	}
	runtime.KeepAlive(a)
}

// TestTablesForgetCollected: a table nobody holds is collected and its
// entry goes; the next Build of that content builds again.
func TestTablesForgetCollected(t *testing.T) {
	var ts Tables
	bs := testBackends(5, 1)
	a, _ := ts.Build(bs, 1031, 1)
	sum := a.SlotIDs()
	a = nil
	deadline := time.Now().Add(10 * time.Second)
	for ts.Stats().Live != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the unreferenced table is still held: %+v", ts.Stats())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	b, _ := ts.Build(bs, 1031, 1)
	if st := ts.Stats(); st.Built != 2 || st.Live != 1 {
		t.Errorf("stats %+v, want 2 built, 1 live", st)
	}
	if !slices.Equal(b.SlotIDs(), sum) {
		t.Error("rebuilt table differs")
	}
}

// TestTablesConcurrent: concurrent builds of a few sets end with one table
// per set (run with -race).
func TestTablesConcurrent(t *testing.T) {
	var ts Tables
	sets := [][]Backend{testBackends(3, 1), testBackends(4, 1), testBackends(5, 2)}
	got := make([][]*MaglevTable, 8)
	var wg sync.WaitGroup
	for g := range got {
		wg.Go(func() {
			for i := range 30 {
				tab, err := ts.Build(sets[i%len(sets)], 1031, 1)
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], tab)
			}
		})
	}
	wg.Wait()
	for g := range got {
		for i, tab := range got[g] {
			if tab != got[0][i%len(sets)] {
				t.Fatalf("goroutine %d build %d: another table than goroutine 0's for the same set", g, i)
			}
		}
	}
}

// TestTableSizeFor: the ladder is the smallest prime at or above each
// power of two from 2^16, the size grows only when the backend count
// crosses one (× SlotsPerBackend), and there are always SlotsPerBackend
// slots per backend.
func TestTableSizeFor(t *testing.T) {
	for i, m := range sizeLadder[:len(sizeLadder)-1] {
		p := uint32(1) << (16 + i)
		if !isPrime(m) || m < p {
			t.Fatalf("ladder[%d] = %d: not a prime ≥ 2^%d", i, m, 16+i)
		}
		for q := p; q < m; q++ {
			if isPrime(q) {
				t.Fatalf("ladder[%d] = %d, but %d is a smaller prime ≥ 2^%d", i, m, q, 16+i)
			}
		}
	}
	if top := sizeLadder[len(sizeLadder)-1]; !isPrime(top) || top > MaxTableSize || isPrime(top+2) && top+2 <= MaxTableSize {
		t.Fatalf("top of the ladder %d", top)
	}
	for _, tc := range []struct {
		n    int
		want uint32
	}{{0, 65537}, {1, 65537}, {100, 65537}, {655, 65537}, {656, 131101}, {1311, 131101}, {1312, 262147}, {83886, 8388617}, {83887, 16777213}, {167772, 16777213}} {
		got, err := TableSizeFor(tc.n)
		if err != nil || got != tc.want {
			t.Errorf("TableSizeFor(%d) = %d, %v; want %d", tc.n, got, err, tc.want)
		}
	}
	prev := uint32(0)
	for n := 1; n <= MaxAutoBackends; n += 1 + n/7 {
		m, err := TableSizeFor(n)
		if err != nil || uint64(m) < uint64(n)*SlotsPerBackend || m < prev {
			t.Fatalf("TableSizeFor(%d) = %d, %v (previous %d)", n, m, err, prev)
		}
		prev = m
	}
	if _, err := TableSizeFor(MaxAutoBackends + 1); err == nil {
		t.Errorf("TableSizeFor(%d): no error", MaxAutoBackends+1)
	}
}
