package hash

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/xlbnet/xlb/pkg/prefetch"
)

// MaxTableSize bounds the Maglev table size M (up to 4 bytes per slot).
const MaxTableSize = 1 << 24

// Backend is one member of a Maglev table's backend set.
type Backend struct {
	// Name is the fleet-stable identity (e.g. the backend address
	// "10.0.1.10"): it orders the backends and seeds their permutation, so
	// every appliance given the same names builds the same table.
	Name string
	// ID is the caller's value, stored in the slots and returned by Lookup.
	// IDs must be unique within a table. The slots are as wide as the
	// largest ID needs (one, two or four bytes), so small IDs keep the
	// table small.
	ID uint32
	// Weight sets the backend's share of slots: weight / Σ weights.
	Weight uint32
}

// MaglevTable is a built Maglev lookup table. It is immutable and safe for
// concurrent use; Lookup is the packet-path call.
type MaglevTable struct {
	m uint32 // table size, prime; kept even when there are no backends
	// slots holds slot → Backend.ID, 1<<shift bytes per slot in the
	// machine's byte order, and 3 bytes of padding (after the slots on a
	// little-endian machine, before them on a big-endian one), so that a
	// native 4-byte load at byte s<<shift, masked, is slot s's ID
	// whatever the width (Lookup); nil when the table has no backends.
	slots    []byte
	shift    uint8
	mask     uint32
	seed     uint64
	backends []Backend // sorted by Name
	counts   []uint32  // slots held, per backend
	digest   uint64    // Placement
}

// Build returns the weighted Maglev table of size m for backends, with the
// permutations seeded by seed. m must be a prime in [2, MaxTableSize];
// names must be non-empty and unique, and so must IDs. The result depends
// only on the set of (Name, ID, Weight), never on the order of backends.
// See the package doc for the algorithm.
func Build(backends []Backend, m uint32, seed uint64) (*MaglevTable, error) {
	bs, err := sortedSet(backends, m)
	if err != nil {
		return nil, err
	}
	return build(bs, m, seed), nil
}

// sortedSet checks m and the backends and returns them sorted by Name (a
// copy: the caller's slice is not touched).
func sortedSet(backends []Backend, m uint32) ([]Backend, error) {
	if m < 2 || m > MaxTableSize {
		return nil, fmt.Errorf("build maglev table: size %d out of range [2, %d]", m, MaxTableSize)
	}
	if !isPrime(m) {
		return nil, fmt.Errorf("build maglev table: size %d is not prime", m)
	}
	bs := slices.Clone(backends)
	slices.SortFunc(bs, func(a, b Backend) int { return cmp.Compare(a.Name, b.Name) })
	for i := range bs {
		if bs[i].Name == "" {
			return nil, errors.New("build maglev table: backend with empty name")
		}
		if i > 0 && bs[i].Name == bs[i-1].Name {
			return nil, fmt.Errorf("build maglev table: duplicate backend name %q", bs[i].Name)
		}
	}
	if len(bs) > 1 {
		ids := make([]uint32, len(bs))
		for i, b := range bs {
			ids[i] = b.ID
		}
		slices.Sort(ids)
		for i := 1; i < len(ids); i++ {
			if ids[i] == ids[i-1] {
				return nil, fmt.Errorf("build maglev table: duplicate backend ID %d", ids[i])
			}
		}
	}
	return bs, nil
}

// build fills the table of bs, sorted and checked by sortedSet.
func build(bs []Backend, m uint32, seed uint64) *MaglevTable {
	t := &MaglevTable{m: m, seed: seed, backends: bs, counts: []uint32{}}
	if len(bs) == 0 {
		return t
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	w, total := effectiveWeights(bs)
	quota := quotas(w, total, m)
	turns := turnOrder(sc, w, total, quota, m)
	t.counts = quota // every turn takes one slot: a backend holds its quota
	var maxID uint32
	for _, b := range bs {
		maxID = max(maxID, b.ID)
	}
	switch {
	case maxID <= math.MaxUint8:
		t.shift, t.mask = 0, math.MaxUint8
	case maxID <= math.MaxUint16:
		t.shift, t.mask = 1, math.MaxUint16
	default:
		t.shift, t.mask = 2, math.MaxUint32
	}
	t.slots = make([]byte, int(m)<<t.shift+3)
	pad := 0
	if bigEndian {
		pad = 3 - (1<<t.shift - 1) // the ID's bytes end where a 4-byte load at s<<shift ends
	}
	// The fill writes the IDs in place, one typed slot array per width
	// (native byte order, as Lookup's load reads them).
	at := unsafe.Pointer(&t.slots[pad])
	switch t.shift {
	case 0:
		t.digest = fill(sc, unsafe.Slice((*uint8)(at), m), bs, turns, m, seed)
	case 1:
		t.digest = fill(sc, unsafe.Slice((*uint16)(at), m), bs, turns, m, seed)
	default:
		t.digest = fill(sc, unsafe.Slice((*uint32)(at), m), bs, turns, m, seed)
	}
	return t
}

// placement folds a slot array into 64 bits, two slots per xxHash round
// (about 25 µs for M = 65537, a small part of a Build). The slots' width
// does not change the result: it folds the IDs' values.
func placement[T slotID](ids []T) uint64 {
	h := uint64(len(ids)) * prime64x5
	for i := 0; i+1 < len(ids); i += 2 {
		h = xxhRound(h, uint64(ids[i])|uint64(ids[i+1])<<32)
	}
	if len(ids)%2 == 1 {
		h = xxhRound(h, uint64(ids[len(ids)-1]))
	}
	h ^= h >> 33
	h *= prime64x2
	h ^= h >> 29
	return h
}

// bigEndian is the machine's byte order (the slots' layout depends on it).
var bigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// scratch is the working memory of one build (4 bytes per slot with
// equal weights, 20 with others),
// reused across builds so that rebuilding many tables does not make the
// garbage collector's heap target grow with it.
type scratch struct {
	start, pos, order, free []uint32
	turns, taken            []uint64
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// grow returns s resized to n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// effectiveWeights returns the weights the fill uses: the backends' own,
// or all 1 when every weight is 0 (docs/design.md#weights: equal shares then).
func effectiveWeights(bs []Backend) (w []uint64, total uint64) {
	w = make([]uint64, len(bs))
	for i, b := range bs {
		w[i] = uint64(b.Weight)
		total += w[i]
	}
	if total == 0 {
		for i := range w {
			w[i] = 1
		}
		total = uint64(len(w))
	}
	return w, total
}

// quotas returns each backend's exact slot count: M·wᵢ/W rounded by the
// largest-remainder method, ties to the earlier name. Weight 0 gets none.
func quotas(w []uint64, total uint64, m uint32) []uint32 {
	q := make([]uint32, len(w))
	rem := make([]uint64, len(w))
	var given uint64
	for i := range w {
		// M·wᵢ < 2³²·2³² fits in 64 bits, and so does W (at most N·2³²).
		num := uint64(m) * w[i]
		q[i] = uint32(num / total)
		rem[i] = num % total
		given += uint64(q[i])
	}
	if extra := uint64(m) - given; extra > 0 {
		order := make([]int, len(w))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rem[b], rem[a]) })
		for _, i := range order[:extra] {
			q[i]++
		}
	}
	return q
}

// turnOrder returns all M turns of the fill, as backend indices in the
// order they are taken: backend i's k-th turn (k = 0 … qᵢ−1) happens at
// virtual time k/wᵢ, and turns at the same time go in name order.
//
// It buckets the turns by ⌊k·W/wᵢ⌋ (W = Σ w ≥ every wᵢ, so a backend has
// at most one turn per bucket; k ≤ M·wᵢ/W, so there are at most M+1
// buckets, about one turn each) with a counting sort over backends in name
// order, then insertion-sorts each bucket by exact time, which is stable
// and so keeps name order among equal times. With equal weights each
// non-empty bucket is one round of equal times, already in order.
func turnOrder(sc *scratch, w []uint64, total uint64, quota []uint32, m uint32) []uint32 {
	if equal(w) {
		return roundRobin(sc, len(w), m)
	}
	return timedTurns(sc, w, total, quota, m)
}

// roundRobin is the turn order of equal weights: every turn time k/w is
// shared by a whole round, in name order, and the quotas differ by at
// most one, the extra slots to the earliest names; so the turns are
// rounds of 0 … n−1, the last one cut short: turn t is backend t mod n
// (TestEqualWeightTurns compares it with timedTurns). A third of a
// build's time, saved for the common case.
func roundRobin(sc *scratch, n int, m uint32) []uint32 {
	sc.order = grow(sc.order, int(m))
	order := sc.order
	var i uint32
	for t := range order {
		order[t] = i
		if i++; i == uint32(n) {
			i = 0
		}
	}
	return order
}

// timedTurns is turnOrder for any weights.
func timedTurns(sc *scratch, w []uint64, total uint64, quota []uint32, m uint32) []uint32 {
	// forEachTurn calls f(i, k, bucket) for every turn, backends in name
	// order; the bucket ⌊k·W/wᵢ⌋ is stepped without a division per turn.
	forEachTurn := func(f func(i int, k, b uint64)) {
		for i, q := range quota {
			if q == 0 {
				continue
			}
			step, stepRem := total/w[i], total%w[i]
			var b, r uint64
			for k := range uint64(q) {
				f(i, k, b)
				b += step
				r += stepRem
				if r >= w[i] {
					r -= w[i]
					b++
				}
			}
		}
	}

	sc.start = grow(sc.start, int(m)+2)
	start := sc.start
	clear(start)
	forEachTurn(func(_ int, _, b uint64) { start[b+1]++ })
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	sc.turns = grow(sc.turns, int(m))
	turns := sc.turns // k<<32 | i
	sc.pos = grow(sc.pos, len(start))
	pos := sc.pos
	copy(pos, start)
	forEachTurn(func(i int, k, b uint64) {
		turns[pos[b]] = k<<32 | uint64(i)
		pos[b]++
	})

	// Turn a is before turn b when kₐ/wₐ < k_b/w_b, i.e. kₐ·w_b < k_b·wₐ
	// (k < 2³², w < 2³², so the products fit).
	before := func(a, b uint64) bool {
		return (a>>32)*w[b&0xffffffff] < (b>>32)*w[a&0xffffffff]
	}
	for b := 0; b+1 < len(start); b++ {
		run := turns[start[b]:start[b+1]]
		for x := 1; x < len(run); x++ {
			for y := x; y > 0 && before(run[y], run[y-1]); y-- {
				run[y], run[y-1] = run[y-1], run[y]
			}
		}
	}

	sc.order = grow(sc.order, int(m))
	order := sc.order
	for t, v := range turns {
		order[t] = uint32(v)
	}
	return order
}

// equal reports whether every weight is the same.
func equal(w []uint64) bool {
	for _, x := range w {
		if x != w[0] {
			return false
		}
	}
	return true
}

// slotID is the type of a slot: the narrowest that holds the set's IDs.
type slotID interface{ uint8 | uint16 | uint32 }

// tailSlots is where the fill changes method: while more slots than
// this are empty, a turn walks its backend's preference list; for the
// last ones it computes where each empty slot is in that list and takes
// the nearest (see fill). A walk with F empty slots costs about M/F
// probes, a computed turn F reductions: they cost the same near
// F = √M, 256 for M = 65537.
const tailSlots = 256

// fill runs the Maglev population in the given turn order (on its turn a
// backend takes the next slot of its permutation that is still empty),
// writes each backend's ID into the slots it takes and returns the
// table's Placement.
//
// The walk tests a bitset of the taken slots (M/8 bytes, in the
// first-level cache for M = 65537) and writes each slot once. Walking
// costs about M/F probes when F slots are empty, so the last few hundred
// turns would be half of all the probes (M·H(M) in all); instead, once
// tailSlots are empty, a turn computes for each empty slot s its place
// in the backend's list from the backend's next slot c, the j with
// c + j·skip ≡ s (mod M), i.e. j = (s − c)·skip⁻¹ mod M, and takes the
// smallest: the slot the walk would reach first, as every empty slot is
// still ahead of the backend in its list (it passed only taken ones).
// The result is the walk's exactly (TestFillGolden, and plain Maglev in
// TestEqualWeightsArePlainMaglev).
func fill[T slotID](sc *scratch, slots []T, bs []Backend, turns []uint32, m uint32, seed uint64) uint64 {
	n := len(bs)
	next := make([]uint32, n) // next permutation position, as a slot
	skip := make([]uint32, n)
	ids := make([]T, n)
	for i, b := range bs {
		next[i], skip[i] = permutation(b.Name, m, seed)
		ids[i] = T(b.ID)
	}
	sc.taken = grow(sc.taken, int(m+63)/64)
	taken := sc.taken
	clear(taken)
	walked := m - min(m, tailSlots)
	steps := make([]probeSteps, n)
	for i, sk := range skip {
		for k := range steps[i] {
			steps[i][k] = uint32(uint64(k) * uint64(sk) % uint64(m))
		}
	}
	walk(slots, ids, taken, next, steps, turns[:walked], m)

	sc.free = grow(sc.free, int(m-walked))[:0]
	free := sc.free
	for x, word := range taken {
		for empty := ^word; empty != 0; empty &= empty - 1 {
			if s := uint32(x*64 + bits.TrailingZeros64(empty)); s < m {
				free = append(free, s)
			}
		}
	}
	inverse := make([]uint32, n) // skip⁻¹ mod M, for the backends that have a tail turn
	// x mod M without a division: Barrett reduction with ⌊2⁶⁴/M⌋, for
	// x < 2⁴⁹ (two factors below 2²⁵), one correction at most.
	r := ^uint64(0) / uint64(m)
	mod := func(x uint64) uint64 {
		q, _ := bits.Mul64(x, r)
		x -= q * uint64(m)
		if x >= uint64(m) {
			x -= uint64(m)
		}
		return x
	}
	for _, i := range turns[walked:] {
		if inverse[i] == 0 {
			inverse[i] = modInverse(skip[i], m)
		}
		c, inv := uint64(next[i]), uint64(inverse[i])
		best, bestJ := 0, uint64(m)
		for k, s := range free {
			if j := mod((uint64(s) + uint64(m) - c) * inv); j < bestJ {
				best, bestJ = k, j
			}
		}
		s := free[best]
		free[best] = free[len(free)-1]
		free = free[:len(free)-1]
		slots[s] = ids[i]
		next[i] = uint32((uint64(s) + uint64(skip[i])) % uint64(m))
	}
	return placement(slots)
}

// walk runs turns by walking the preference lists. Its loads and
// stores skip Go's bounds checks: every slot it touches is below m
// (next and the steps are reduced mod m, and wrap keeps sums below m),
// taken holds ⌈m/64⌉ words and slots m slots (fill's callers).
func walk[T slotID](slots, ids []T, taken []uint64, next []uint32, steps []probeSteps, turns []uint32, m uint32) {
	bitset := unsafe.Pointer(unsafe.SliceData(taken))
	table := unsafe.Pointer(unsafe.SliceData(slots))
	var width T
	for _, i := range turns {
		st := &steps[i]
		c := probe(bitset, next[i], st, m)
		word := (*uint64)(unsafe.Add(bitset, uintptr(c>>6)*8))
		*word |= 1 << (c & 63)
		*(*T)(unsafe.Add(table, uintptr(c)*unsafe.Sizeof(width))) = ids[i]
		next[i] = wrap(c+st[1], m)
	}
}

// wrap returns x mod m for x < 2m ≤ 2²⁵ without a branch (a branch
// here goes either way at random).
func wrap(x, m uint32) uint32 {
	d := x - m
	return d + m&uint32(int32(d)>>31)
}

// probeWidth is how many places of a list probe tests at a time: one
// at a time, the walk's exit is a mispredicted branch at most turns. 2,
// 4 and 8 measured (bench/README.md, section 5): 4 is as good as 2 and
// better than 8. probe is written out for 4.
const probeWidth = 4

// probe is written out for exactly four places (a compile error here
// says probeWidth changed without it).
const _ = uint(probeWidth-4) + uint(4-probeWidth)

// probeSteps are a backend's skip times 0 to probeWidth, mod M.
type probeSteps [probeWidth + 1]uint32

// vacant reports 1 when slot x is not taken in the bitset of taken slots
// at bitset, 0 when it is (x below the table size: no bounds check).
func vacant(bitset unsafe.Pointer, x uint32) uint32 {
	return uint32(^*(*uint64)(unsafe.Add(bitset, uintptr(x>>6)*8))>>(x&63)) & 1
}

// probe returns the first slot not taken of the list c, c+skip, … (mod
// m) in the bitset at bitset. It tests four places at a time,
// independent of each other (c plus a precomputed multiple of skip),
// and branches once for all of them. It is written out and its loads
// are unchecked (walk says why they are in range): Go does not unroll
// the loop over the steps, and that loop and the checks were a sixth of
// a build (bench/README.md, section 5). It is a function of its own, not
// inlined, so that its values stay in registers.
//
//go:noinline
func probe(bitset unsafe.Pointer, c uint32, st *probeSteps, m uint32) uint32 {
	s1, s2, s3, s4 := st[1], st[2], st[3], st[4]
	for {
		c1, c2, c3 := wrap(c+s1, m), wrap(c+s2, m), wrap(c+s3, m)
		free := vacant(bitset, c) | vacant(bitset, c1)<<1 | vacant(bitset, c2)<<2 | vacant(bitset, c3)<<3
		if free != 0 {
			// The first free place, without a branch on which it is.
			return wrap(c+st[bits.TrailingZeros32(free)&(probeWidth-1)], m)
		}
		c = wrap(c+s4, m)
	}
}

// modInverse returns x⁻¹ mod m, for m prime and 0 < x < m (extended
// Euclid).
func modInverse(x, m uint32) uint32 {
	a, b := int64(x), int64(m)
	u, v := int64(1), int64(0)
	for b != 0 {
		q := a / b
		a, b = b, a-q*b
		u, v = v, u-q*v
	}
	if u < 0 {
		u += int64(m)
	}
	return uint32(u)
}

// permutation returns a backend's Maglev offset and skip: its preference
// list is offset, offset+skip, offset+2·skip, … (mod m). m is prime and
// 1 ≤ skip < m, so the list visits every slot.
func permutation(name string, m uint32, seed uint64) (offset, skip uint32) {
	offset = uint32(String(name, seed) % uint64(m))
	skip = uint32(String(name, ^seed)%uint64(m-1)) + 1
	return offset, skip
}

// isPrime reports whether n is prime, by trial division (n ≤ MaxTableSize,
// so at most ~2¹¹ divisions).
func isPrime(n uint32) bool {
	if n < 2 {
		return false
	}
	if n%2 == 0 {
		return n == 2
	}
	for d := uint32(3); d*d <= n; d += 2 {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// Lookup returns the ID of the backend that owns hash h, or ok == false
// when the table has no backends. The slot is ⌊h·M / 2⁶⁴⌋ (the high word of
// the 128-bit product), which uses every bit of h and costs one multiply;
// its ID is one 4-byte load and a mask, whatever the slots' width. The
// load needs no bounds check: the slot is below M (h < 2⁶⁴), and the
// array holds M slots and 3 bytes more (measured: the checks were 40 % of
// a lookup's cost).
func (t *MaglevTable) Lookup(h uint64) (id uint32, ok bool) {
	if t.slots == nil {
		return 0, false
	}
	s, _ := bits.Mul64(h, uint64(t.m))
	return t.load(uintptr(s)), true
}

// load reads slot s < M of a table with backends.
func (t *MaglevTable) load(s uintptr) uint32 {
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.slots)), s<<t.shift)
	return *(*uint32)(p) & t.mask
}

// Prefetch starts loading the slot Lookup(h) will read, for a worker that
// hashes a batch before it looks any of it up.
func (t *MaglevTable) Prefetch(h uint64) {
	if t.slots == nil {
		return
	}
	s, _ := bits.Mul64(h, uint64(t.m))
	prefetch.Of(&t.slots[s<<t.shift])
}

// Slot returns the slot index Lookup uses for h (for tools that explain a
// decision); it is valid for any table of the same size.
func (t *MaglevTable) Slot(h uint64) uint32 {
	s, _ := bits.Mul64(h, uint64(t.m))
	return uint32(s)
}

// SlotID returns the ID slot s holds, and false when the table has no
// backends or s is not below Size.
func (t *MaglevTable) SlotID(s uint32) (uint32, bool) {
	if t.slots == nil || s >= t.m {
		return 0, false
	}
	return t.load(uintptr(s)), true
}

// Placement returns a digest of the slot array (slot → ID): two tables
// with equal Placement send every hash to the same ID (up to a 2⁻⁶⁴
// collision). The fleet's exception scan compares it across snapshots to
// tell whether any flow's pick may have changed. An empty table's is 0.
func (t *MaglevTable) Placement() uint64 { return t.digest }

// Size returns the table size M.
func (t *MaglevTable) Size() uint32 { return t.m }

// SlotBytes returns the bytes per slot (1, 2 or 4; 0 for a table without
// backends): the narrowest that holds the largest ID.
func (t *MaglevTable) SlotBytes() int {
	if t.slots == nil {
		return 0
	}
	return 1 << t.shift
}

// Seed returns the seed the table was built with.
func (t *MaglevTable) Seed() uint64 { return t.seed }

// Len returns the number of backends in the table's set (including those
// with weight 0 and no slots).
func (t *MaglevTable) Len() int { return len(t.backends) }

// Backends returns a copy of the table's backends, sorted by Name.
func (t *MaglevTable) Backends() []Backend { return slices.Clone(t.backends) }

// Slots returns how many slots the backend with the given name holds, and
// whether it is in the table's set.
func (t *MaglevTable) Slots(name string) (uint32, bool) {
	i, found := slices.BinarySearchFunc(t.backends, name, func(b Backend, n string) int { return cmp.Compare(b.Name, n) })
	if !found {
		return 0, false
	}
	return t.counts[i], true
}

// SlotIDs returns the slot array (slot → ID) as a new slice; nil when the
// table has no backends. For digests, dumps and tests.
func (t *MaglevTable) SlotIDs() []uint32 {
	if t.slots == nil {
		return nil
	}
	ids := make([]uint32, t.m)
	for s := range ids {
		ids[s], _ = t.SlotID(uint32(s))
	}
	return ids
}
