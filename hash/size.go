package hash

import "fmt"

// SlotsPerBackend is the fewest slots per backend a table should have:
// with M ≥ 100·N every backend's share is within about 1 % of its weight's
// and a change of one backend moves little more than its own slots.
const SlotsPerBackend = 100

// sizeLadder are the sizes TableSizeFor chooses from: the smallest prime
// at or above each power of two from 2¹⁶ to 2²³, then the largest prime
// below MaxTableSize. It starts at 65537, the size every rule had before
// sizes followed the backends: smaller tables disturb more flows between
// the backends that stay when one is added (measured with 10 backends:
// 7 % of the hash space at M = 1031, 1.6 % at 4099, 0.6 % at 16411,
// 0.3 % at 65537; bench/README.md), and a table of one-byte slots costs
// 64 KiB at 65537.
var sizeLadder = []uint32{
	65537, 131101, 262147, 524309, 1048583, 2097169, 4194319, 8388617, 16777213,
}

// MaxAutoBackends is the most backends TableSizeFor has a size for.
const MaxAutoBackends = 16777213 / SlotsPerBackend

// TableSizeFor returns the table size for a set of n backends whose size
// the operator did not fix: the first size of the ladder (primes just
// above 2¹⁶, 2¹⁷, … 2²³, then 16777213) with at least SlotsPerBackend
// slots per backend: 65537 up to 655 backends, then growing with them. It depends on n alone, so every appliance given the
// same configuration computes the same size; and it changes only when n
// crosses a power of two (× 100), not with every backend added or
// removed, since a new size places every flow anew.
func TableSizeFor(n int) (uint32, error) {
	need := uint64(max(n, 1)) * SlotsPerBackend
	for _, m := range sizeLadder {
		if uint64(m) >= need {
			return m, nil
		}
	}
	return 0, fmt.Errorf("maglev table size for %d backends: more than %d, the most a table of at most %d slots serves", n, MaxAutoBackends, MaxTableSize)
}
