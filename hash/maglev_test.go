package hash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

const testM = 65537

// testBackends returns n backends named like addresses, IDs 100+i, all
// with the given weight.
func testBackends(n int, weight uint32) []Backend {
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Name: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff), ID: uint32(100 + i), Weight: weight}
	}
	return bs
}

func mustBuild(t testing.TB, bs []Backend, m uint32, seed uint64) *MaglevTable {
	t.Helper()
	tab, err := Build(bs, m, seed)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return tab
}

// slotCounts counts the slots per ID from the public slot array.
func slotCounts(tab *MaglevTable) map[uint32]int {
	c := map[uint32]int{}
	for _, id := range tab.SlotIDs() {
		c[id]++
	}
	return c
}

// plainMaglev is the classic Maglev population (Eisenbud et al., NSDI
// 2016, Pseudocode 1) over the same permutations: backends take turns in
// name order, one slot each, until the table is full. It is the reference
// the weighted fill must equal when weights are equal.
func plainMaglev(sorted []Backend, m uint32, seed uint64) []uint32 {
	turns := make([]uint32, m)
	for t := range turns {
		turns[t] = uint32(t % len(sorted))
	}
	return walkTurns(sorted, turns, m, seed)
}

// walkTurns runs the given turns as Maglev defines them: each walks its
// backend's list one place at a time to the first empty slot. It returns
// slot → ID.
func walkTurns(sorted []Backend, turns []uint32, m uint32, seed uint64) []uint32 {
	next := make([]uint32, len(sorted))
	skip := make([]uint32, len(sorted))
	for i, b := range sorted {
		next[i], skip[i] = permutation(b.Name, m, seed)
	}
	ids := make([]uint32, m)
	taken := make([]bool, m)
	for _, i := range turns {
		c := next[i]
		for taken[c] {
			c = (c + skip[i]) % m
		}
		taken[c] = true
		ids[c] = sorted[i].ID
		next[i] = (c + skip[i]) % m
	}
	return ids
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name    string
		bs      []Backend
		m       uint32
		wantErr string
	}{
		{"size not prime", testBackends(3, 1), 65536, "not prime"},
		{"size 1", testBackends(3, 1), 1, "out of range"},
		{"size 0", testBackends(3, 1), 0, "out of range"},
		{"size too large", testBackends(3, 1), MaxTableSize + 43, "out of range"},
		{"duplicate names", []Backend{{Name: "a", ID: 1, Weight: 1}, {Name: "b", ID: 2}, {Name: "a", ID: 3}}, 13, `duplicate backend name "a"`},
		{"empty name", []Backend{{Name: "a", ID: 1}, {Name: "", ID: 2}}, 13, "empty name"},
		{"duplicate IDs", []Backend{{Name: "a", ID: 1}, {Name: "b", ID: 2}, {Name: "c", ID: 1}}, 13, "duplicate backend ID 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, err := Build(tt.bs, tt.m, 1)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build = %v, %v; want error containing %q", tab, err, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "build maglev table: ") {
				t.Errorf("error %q lacks context", err)
			}
		})
	}
}

func TestBuildEmptySet(t *testing.T) {
	tab := mustBuild(t, nil, 13, 1)
	if id, ok := tab.Lookup(12345); ok {
		t.Errorf("Lookup on empty table = %d, true; want ok false", id)
	}
	if tab.Size() != 13 || tab.Len() != 0 || tab.SlotIDs() != nil {
		t.Errorf("empty table: size %d len %d slots %v", tab.Size(), tab.Len(), tab.SlotIDs())
	}
}

func TestBuildSingleBackendFillsTable(t *testing.T) {
	for _, w := range []uint32{0, 1, 1000} {
		tab := mustBuild(t, []Backend{{Name: "10.0.1.10", ID: 7, Weight: w}}, testM, 1)
		c := slotCounts(tab)
		if c[7] != testM || len(c) != 1 {
			t.Errorf("weight %d: slot counts %v, want all %d slots on ID 7", w, c, testM)
		}
		if id, ok := tab.Lookup(^uint64(0)); !ok || id != 7 {
			t.Errorf("weight %d: Lookup(max) = %d, %v", w, id, ok)
		}
	}
}

func TestEqualWeightsShares(t *testing.T) {
	for _, n := range []int{2, 3, 7, 10, 100, 1000, 5000} {
		for _, w := range []uint32{1, 0, 1000} { // 0: all-zero means equal shares
			tab := mustBuild(t, testBackends(n, w), testM, 0x5eed)
			c := slotCounts(tab)
			lo, hi := testM/n, (testM+n-1)/n
			total := 0
			for i := range n {
				got := c[uint32(100+i)]
				total += got
				if got < lo || got > hi {
					t.Fatalf("N=%d w=%d: backend %d has %d slots, want %d or %d", n, w, i, got, lo, hi)
				}
			}
			if total != testM {
				t.Fatalf("N=%d: %d slots filled, want %d (no empty slot)", n, total, testM)
			}
		}
	}
}

func TestEqualWeightsArePlainMaglev(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 100, 1000} {
		for _, m := range []uint32{13, 251, testM} {
			if uint32(n) > m {
				continue
			}
			bs := testBackends(n, 3)
			tab := mustBuild(t, bs, m, 42)
			slices.SortFunc(bs, func(a, b Backend) int { return strings.Compare(a.Name, b.Name) })
			want := plainMaglev(bs, m, 42)
			if got := tab.SlotIDs(); !slicesEqual(got, want) {
				t.Errorf("N=%d M=%d: weighted fill with equal weights differs from plain Maglev", n, m)
			}
		}
	}
}

func slicesEqual(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWeightedShares(t *testing.T) {
	tests := []struct {
		name    string
		weights []uint32
		want    []float64 // percent of slots
	}{
		{"1:4", []uint32{1, 4}, []float64{20, 80}},
		{"0:2:6", []uint32{0, 2, 6}, []float64{0, 25, 75}},
		{"1:2:3:4", []uint32{1, 2, 3, 4}, []float64{10, 20, 30, 40}},
		{"1000:1", []uint32{1000, 1}, []float64{100000.0 / 1001, 100.0 / 1001}},
		{"0:0:0 equal", []uint32{0, 0, 0}, []float64{100.0 / 3, 100.0 / 3, 100.0 / 3}},
		{"0:5", []uint32{0, 5}, []float64{0, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := testBackends(len(tt.weights), 0)
			for i, w := range tt.weights {
				bs[i].Weight = w
			}
			tab := mustBuild(t, bs, testM, 7)
			c := slotCounts(tab)
			for i, want := range tt.want {
				got := 100 * float64(c[bs[i].ID]) / testM
				if d := got - want; d > 0.2 || d < -0.2 {
					t.Errorf("backend %d (weight %d): %.4f %% of slots, want %.4f %% ± 0.2", i, tt.weights[i], got, want)
				}
				if n, _ := tab.Slots(bs[i].Name); int(n) != c[bs[i].ID] {
					t.Errorf("Slots(%q) = %d, slot array says %d", bs[i].Name, n, c[bs[i].ID])
				}
			}
		})
	}
}

// TestWeightedRandomSets checks shares and fullness for random weight sets,
// including large ones where the weighted turn order matters.
func TestWeightedRandomSets(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		n := 1 + r.IntN(300)
		bs := testBackends(n, 0)
		var total uint64
		for i := range bs {
			bs[i].Weight = uint32(r.IntN(1001))
			total += uint64(bs[i].Weight)
		}
		if total == 0 {
			continue
		}
		tab := mustBuild(t, bs, testM, uint64(trial))
		c := slotCounts(tab)
		sum := 0
		for _, b := range bs {
			exact := float64(testM) * float64(b.Weight) / float64(total)
			got := float64(c[b.ID])
			if got < exact-1 || got > exact+1 {
				t.Fatalf("trial %d: %s weight %d has %v slots, exact share %.2f", trial, b.Name, b.Weight, got, exact)
			}
			sum += c[b.ID]
		}
		if sum != testM {
			t.Fatalf("trial %d: %d slots filled, want %d", trial, sum, testM)
		}
	}
}

func TestRemovalDisruption(t *testing.T) {
	for _, n := range []int{3, 10, 100, 1000} {
		for _, weighted := range []bool{false, true} {
			name := fmt.Sprintf("N=%d", n)
			if weighted {
				name += "/weighted"
			}
			t.Run(name, func(t *testing.T) {
				bs := testBackends(n, 100)
				if weighted {
					r := rand.New(rand.NewPCG(uint64(n), 9))
					for i := range bs {
						bs[i].Weight = uint32(50 + r.IntN(951))
					}
				}
				before := mustBuild(t, bs, testM, 0x5eed)
				worst := 0.0
				// Remove a few different backends: first, middle, last, and
				// the heaviest (whose weight sets the bucket scale).
				heaviest := 0
				for i := range bs {
					if bs[i].Weight > bs[heaviest].Weight {
						heaviest = i
					}
				}
				for _, victim := range []int{0, n / 2, n - 1, heaviest} {
					rest := append(append([]Backend(nil), bs[:victim]...), bs[victim+1:]...)
					after := mustBuild(t, rest, testM, 0x5eed)
					d, err := Delta(before, after)
					if err != nil {
						t.Fatal(err)
					}
					frac := 100 * float64(d.SurvivorMoved) / testM
					worst = max(worst, frac)
					if frac >= 1 {
						t.Errorf("removing %s moved %.3f %% of slots among survivors, want < 1 %%", bs[victim].Name, frac)
					}
					if got, _ := before.Slots(bs[victim].Name); d.Changed < got {
						t.Errorf("Changed %d < slots of the removed backend %d", d.Changed, got)
					}
				}
				t.Logf("worst survivor disruption %.3f %% of M", worst)
			})
		}
	}
}

func TestOrderIndependence(t *testing.T) {
	bs := testBackends(257, 0)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range bs {
		bs[i].Weight = uint32(r.IntN(10))
	}
	want := mustBuild(t, bs, 4099, 99).SlotIDs()
	for range 5 {
		r.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
		if got := mustBuild(t, bs, 4099, 99).SlotIDs(); !slicesEqual(got, want) {
			t.Fatal("shuffled input built a different table")
		}
	}
}

func TestSeedChangesTable(t *testing.T) {
	bs := testBackends(10, 1)
	a := mustBuild(t, bs, 4099, 1).SlotIDs()
	b := mustBuild(t, bs, 4099, 2).SlotIDs()
	if slicesEqual(a, b) {
		t.Error("seeds 1 and 2 built identical tables")
	}
}

// goldenDigest is the SHA-256 of the slot array (little-endian uint32 IDs)
// of goldenInput. A change here means every fleet member must be upgraded
// together: update it only for a deliberate change of the algorithm.
const goldenDigest = "6f7b5596c599dc013422074acad188f3cdb89a41229ae4eae1233d03c3b36388"

func goldenInput() ([]Backend, uint32, uint64) {
	bs := []Backend{
		{Name: "10.0.1.10", ID: 1, Weight: 100},
		{Name: "10.0.1.11", ID: 2, Weight: 100},
		{Name: "10.0.1.12", ID: 3, Weight: 250},
		{Name: "10.0.2.10", ID: 4, Weight: 0},
		{Name: "2001:db8::10", ID: 5, Weight: 1000},
		{Name: "10.0.1.13", ID: 6, Weight: 7},
	}
	// Enough backends that the turn order, not only the quotas and the
	// permutations, shows in the table.
	for i := range 194 {
		bs = append(bs, Backend{Name: fmt.Sprintf("192.0.2.%d", i), ID: uint32(1000 + i), Weight: uint32(i*37%11) * 10})
	}
	return bs, 65537, 0x5eed
}

func TestGoldenTable(t *testing.T) {
	bs, m, seed := goldenInput()
	tab := mustBuild(t, bs, m, seed)
	h := sha256.New()
	var b [4]byte
	for _, id := range tab.SlotIDs() {
		binary.LittleEndian.PutUint32(b[:], id)
		h.Write(b[:])
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != goldenDigest {
		t.Errorf("golden table digest = %s, want %s", got, goldenDigest)
	}
}

func TestLookupSlot(t *testing.T) {
	bs := testBackends(5, 1)
	tab := mustBuild(t, bs, 13, 1)
	ids := tab.SlotIDs()
	for _, h := range []uint64{0, 1, 1 << 63, ^uint64(0), 0x123456789abcdef} {
		s := tab.Slot(h)
		if s >= 13 {
			t.Fatalf("Slot(%#x) = %d out of range", h, s)
		}
		if id, ok := tab.Lookup(h); !ok || id != ids[s] {
			t.Errorf("Lookup(%#x) = %d, %v; slot %d holds %d", h, id, ok, s, ids[s])
		}
	}
	if tab.Slot(0) != 0 || tab.Slot(^uint64(0)) != 12 {
		t.Errorf("Slot range ends: %d, %d; want 0, 12", tab.Slot(0), tab.Slot(^uint64(0)))
	}
}

func TestLookupZeroAllocs(t *testing.T) {
	tab := mustBuild(t, testBackends(10, 1), testM, 1)
	var sink uint32
	n := testing.AllocsPerRun(100, func() {
		id, _ := tab.Lookup(0xdeadbeefcafe)
		sink += id
	})
	if n != 0 {
		t.Errorf("Lookup: %v allocs per run, want 0", n)
	}
	_ = sink
}

// TestPlacement: equal slot arrays give equal digests (whatever the build
// order or weights that led there), and a table that sends any slot
// elsewhere gives another one.
func TestPlacement(t *testing.T) {
	mk := func(bs ...Backend) *MaglevTable {
		t.Helper()
		tb, err := Build(bs, 65537, 7)
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	a, b, c := Backend{Name: "10.0.0.1", ID: 1, Weight: 1}, Backend{Name: "10.0.0.2", ID: 2, Weight: 1}, Backend{Name: "10.0.0.3", ID: 3, Weight: 1}
	base := mk(a, b, c)
	if base.Placement() == 0 || base.Placement() != mk(c, a, b).Placement() {
		t.Errorf("equal tables: %x and %x", base.Placement(), mk(c, a, b).Placement())
	}
	double := a
	double.Weight = 2
	renumbered := c
	renumbered.ID = 9
	for name, other := range map[string]*MaglevTable{"one removed": mk(a, b), "weight changed": mk(double, b, c), "an ID changed": mk(a, b, renumbered)} {
		if other.Placement() == base.Placement() {
			t.Errorf("%s: same digest %x", name, base.Placement())
		}
	}
	if mk().Placement() != 0 {
		t.Errorf("empty table digest %x", mk().Placement())
	}
	// One slot moved is enough.
	ids := base.SlotIDs()
	ids[100] ^= 1
	if placement(ids) == base.Placement() {
		t.Error("a one-slot change kept the digest")
	}
}

// TestEqualWeightTurns: with equal weights the round-robin shortcut gives
// the turn order of the general ordering by time, for sets smaller than,
// dividing and not dividing M, and any common weight.
func TestEqualWeightTurns(t *testing.T) {
	for _, tc := range []struct {
		n      int
		m      uint32
		weight uint64
	}{{1, 7, 1}, {3, 7, 1}, {7, 7, 5}, {10, 65537, 1}, {100, 65537, 100}, {1000, 65537, 3}, {13, 1031, 1 << 31}} {
		w := make([]uint64, tc.n)
		for i := range w {
			w[i] = tc.weight
		}
		total := tc.weight * uint64(tc.n)
		want := slices.Clone(timedTurns(new(scratch), w, total, quotas(w, total, tc.m), tc.m))
		got := roundRobin(new(scratch), tc.n, tc.m)
		if !slices.Equal(got, want) {
			t.Errorf("n=%d m=%d weight=%d: round robin differs from the turns by time", tc.n, tc.m, tc.weight)
		}
	}
	// Unequal weights take the general path.
	if equal([]uint64{2, 2, 3}) || !equal([]uint64{4, 4}) {
		t.Error("equal: wrong answer")
	}
}
