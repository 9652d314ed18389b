package hash

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/xlbnet/xlb/pkg/prefetch"
)

// MaxTableSize bounds the Maglev table size M (4 bytes per slot twice).
const MaxTableSize = 1 << 24

// Backend is one member of a Maglev table's backend set.
type Backend struct {
	// Name is the fleet-stable identity (e.g. the backend address
	// "10.0.1.10"): it orders the backends and seeds their permutation, so
	// every appliance given the same names builds the same table.
	Name string
	// ID is the caller's value, stored in the slots and returned by Lookup.
	ID uint32
	// Weight sets the backend's share of slots: weight / Σ weights.
	Weight uint32
}

// MaglevTable is a built Maglev lookup table. It is immutable and safe for
// concurrent use; Lookup is the packet-path call.
type MaglevTable struct {
	m        uint32    // table size, prime; kept even when there are no backends
	ids      []uint32  // slot → Backend.ID; nil when the table has no backends
	owner    []uint32  // slot → index into backends (for Delta and counts)
	backends []Backend // sorted by Name
	counts   []uint32  // slots held, per backend
	digest   uint64    // Placement
}

// Build returns the weighted Maglev table of size m for backends, with the
// permutations seeded by seed. m must be a prime in [2, MaxTableSize];
// names must be non-empty and unique. The result depends only on the set
// of (Name, ID, Weight), never on the order of backends. See the package
// doc for the algorithm.
func Build(backends []Backend, m uint32, seed uint64) (*MaglevTable, error) {
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
	t := &MaglevTable{m: m, backends: bs, counts: make([]uint32, len(bs))}
	if len(bs) == 0 {
		return t, nil
	}

	w, total := effectiveWeights(bs)
	t.owner = fill(bs, turnOrder(w, total, quotas(w, total, m), m), m, seed)
	t.ids = make([]uint32, m)
	for s, o := range t.owner {
		t.ids[s] = bs[o].ID
		t.counts[o]++
	}
	t.digest = placement(t.ids)
	return t, nil
}

// placement folds a slot array into 64 bits, two slots per xxHash round
// (about 25 µs for M = 65537, a small part of a Build).
func placement(ids []uint32) uint64 {
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
func turnOrder(w []uint64, total uint64, quota []uint32, m uint32) []uint32 {
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

	start := make([]uint32, uint64(m)+2)
	forEachTurn(func(_ int, _, b uint64) { start[b+1]++ })
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	turns := make([]uint64, m) // k<<32 | i
	pos := slices.Clone(start)
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

	order := make([]uint32, m)
	for t, v := range turns {
		order[t] = uint32(v)
	}
	return order
}

// fill runs the Maglev population in the given turn order: on its turn a
// backend takes the next slot of its permutation that is still empty.
func fill(bs []Backend, turns []uint32, m uint32, seed uint64) []uint32 {
	n := len(bs)
	next := make([]uint32, n) // next permutation position, as a slot
	skip := make([]uint32, n)
	for i, b := range bs {
		next[i], skip[i] = permutation(b.Name, m, seed)
	}

	const empty = ^uint32(0)
	owner := make([]uint32, m)
	for s := range owner {
		owner[s] = empty
	}
	for _, i := range turns {
		c, sk := next[i], skip[i]
		for owner[c] != empty {
			c += sk
			if c >= m {
				c -= m
			}
		}
		owner[c] = i
		c += sk
		if c >= m {
			c -= m
		}
		next[i] = c
	}
	return owner
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
// the 128-bit product), which uses every bit of h and costs one multiply.
func (t *MaglevTable) Lookup(h uint64) (id uint32, ok bool) {
	if len(t.ids) == 0 {
		return 0, false
	}
	s, _ := bits.Mul64(h, uint64(len(t.ids)))
	return t.ids[s], true
}

// Prefetch starts loading the slot Lookup(h) will read, for a worker that
// hashes a batch before it looks any of it up.
func (t *MaglevTable) Prefetch(h uint64) {
	if len(t.ids) == 0 {
		return
	}
	s, _ := bits.Mul64(h, uint64(len(t.ids)))
	prefetch.Of(&t.ids[s])
}

// Slot returns the slot index Lookup uses for h (for tools that explain a
// decision); it is valid for any table of the same size.
func (t *MaglevTable) Slot(h uint64) uint32 {
	s, _ := bits.Mul64(h, uint64(t.m))
	return uint32(s)
}

// Placement returns a digest of the slot array (slot → ID): two tables
// with equal Placement send every hash to the same ID (up to a 2⁻⁶⁴
// collision). The fleet's exception scan compares it across snapshots to
// tell whether any flow's pick may have changed. An empty table's is 0.
func (t *MaglevTable) Placement() uint64 { return t.digest }

// Size returns the table size M.
func (t *MaglevTable) Size() uint32 { return t.m }

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

// SlotIDs returns a copy of the slot array (slot → ID); nil when the table
// has no backends. For digests, dumps and tests.
func (t *MaglevTable) SlotIDs() []uint32 { return slices.Clone(t.ids) }
