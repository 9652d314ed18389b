// Package hash builds flow keys from parsed packets, hashes them with a
// seeded fleet-wide hash, and maps hashes to backends with a weighted
// Maglev table.
//
// # Ownership and threading
//
// Nothing here holds mutable state. The key functions, Sum64, SumTuple,
// SelectionHash and MaglevTable.Lookup are the packet-path calls: they allocate
// nothing, lock nothing and make no syscall, so every worker goroutine calls
// them freely. Build and Delta run in the control plane (they allocate); a
// built MaglevTable is immutable, so a worker may read it while the control plane
// builds the next one and publishes it in a new snapshot. format.go prints
// keys and enum names for people (Key.String: xlb conntrack, xlb lookup);
// it allocates and is never called on the packet path.
//
// # Key layout
//
// A Key (key.go) is 40 bytes: Src (16) | Dst (16) | SrcPort (2) |
// DstPort (2) | Proto (1) | Kind (1) | 2 zero bytes, IPv4 mapped into IPv6
// (::ffff:a.b.c.d). Kind says which fields count; the others are zero, so
// two packets of one flow give equal keys. Key.Encode gives the canonical
// bytes, ports little-endian; on little-endian machines that is the
// in-memory layout.
//
// Which fields count (SelectionKind, TrackingKind) follows
// docs/design.md#session-affinity, docs/design.md#trackability and
// docs/design.md#tracking-key:
//
//	selection   NONE, CLIENT_IP_PORT_PROTO: TCP and unfragmented UDP 5-tuple,
//	            everything else 3-tuple; CLIENT_IP_PROTO 3-tuple; CLIENT_IP 2-tuple
//	trackable   TCP always; UDP, ESP, GRE unless NONE; nothing else ever
//	tracking    PER_CONNECTION: TCP and unfragmented UDP 5-tuple, others 3-tuple
//	            PER_SESSION: NONE TCP 5-tuple; CLIENT_IP_PORT_PROTO as
//	            PER_CONNECTION; CLIENT_IP_PROTO 3-tuple; CLIENT_IP 2-tuple
//
// # Hash
//
// Sum64(k, seed) is XXH64, the 64-bit xxHash of the xxHash specification
// (doc/xxhash_spec.md in the reference repository), seeded with seed, over
// the 40 canonical bytes: Sum64(k, seed) == Bytes(k.Encode(), seed), the
// same value on every architecture. With the spec's primes P1…P5, lanes
// read as little-endian 64-bit words w0…w4 and rotl a left rotation:
//
//	round(acc, w) = rotl(acc + w·P2, 31)·P1
//	v1..v4 = round(seed+P1+P2, w0), round(seed+P2, w1), round(seed, w2), round(seed−P1, w3)
//	h = rotl(v1,1) + rotl(v2,7) + rotl(v3,12) + rotl(v4,18)
//	for v in v1..v4: h = (h ^ round(0, v))·P1 + P4
//	h += 40
//	h = rotl(h ^ round(0, w4), 27)·P1 + P4
//	h ^= h>>33; h ·= P2; h ^= h>>29; h ·= P3; h ^= h>>32
//
// Bytes is the same algorithm for any length (backend names use it).
// Tests check Bytes against the reference sanity vectors (XSUM_XXH64_testdata,
// lengths 0 to 2367, seeds 0 and 2654435761) and Sum64 against an
// independent implementation.
//
// # Weighted Maglev
//
// Build(backends, M, seed) sorts the backends by Name (byte order) and
// gives each one the classic Maglev permutation (Eisenbud et al., NSDI
// 2016):
//
//	offset = XXH64(name, seed)  mod M
//	skip   = XXH64(name, ^seed) mod (M−1) + 1
//	preference j = (offset + j·skip) mod M       (M prime: visits every slot)
//
// Shares are exact. Backend i gets qᵢ slots: M·wᵢ/W rounded by the largest
// remainder (the floors, then one more slot to each of the largest remainders
// M·wᵢ mod W, ties to the earlier name). Weight 0 gets no slots; if every
// weight is 0, all count as 1 (docs/design.md#weights: equal shares). An
// empty set builds a table of size M whose Lookup returns ok == false.
//
// Turns are ordered by weight: backend i's k-th turn (k = 0 … qᵢ−1) happens
// at virtual time k/wᵢ, and turns at the same time go in name order. On
// its turn a backend takes the next slot of its preference list that is
// still empty. With equal weights this is plain Maglev exactly (one turn
// each per round, in name order, until the table is full; tested against a
// reference). Because the turn time of a surviving backend does not depend
// on the other backends, removing one backend leaves the survivors' turn
// order intact; only the quotas move by rounding: TestRemovalDisruption
// holds the slots moved among survivors under 1 % of M for N = 3 to 1000,
// equal or random weights (bench/README.md has the measured figures).
//
// The fill writes each slot once, straight into the table, and tests
// occupancy in a bitset (8 KiB for M = 65537, in the first-level cache),
// four places of a preference list at a time (offset + k·skip for
// precomputed multiples, without a branch between them), so that a turn
// takes one hard-to-predict branch per four places instead of one per
// place. Walking a preference list costs about M/F probes when F slots are
// empty, so the last few hundred turns would be half of the M·H(M)
// probes; for the last ones (tailSlots, about √M) the fill instead
// computes each empty slot's place in the backend's list, (s − c)·skip⁻¹
// mod M, and takes the nearest: the slot the walk would reach first, as
// a backend only ever passes taken slots. The tables are the walk's,
// byte for byte (TestFillGolden pins every width and weighting to the
// digests of the walk-only fill: a fleet of mixed versions agrees). A
// backend's slot count is its quota: every turn takes exactly one slot.
//
// Lookup(h) reads slot ⌊h·M / 2⁶⁴⌋, the high word of the 128-bit product:
// one multiply instead of a division, using every bit of h. (Conntrack
// tables usually index with the low bits of the same hash, so the two stay
// uncorrelated.)
//
// # Memory: slot width, size, sharing
//
// A slot holds the backend's ID in the fewest bytes that hold the largest
// ID of the set: one byte up to ID 255, two up to 65535, else four. The
// caller's IDs are small (rule-scoped backend slots), so a table costs
// about one byte per slot; Lookup reads every width with one unaligned
// 4-byte load and a mask (the slot array has 3 bytes of padding), so the
// width costs the packet path nothing. Only the slots are kept: the
// owner of a slot, for Delta and the counts, is found from its ID.
//
// TableSizeFor(n) is the size for a set of n backends when the operator
// did not fix one: the first of 65537, 131101, 262147, … 8388617 (the
// smallest prime at or above each power of two from 2¹⁶ to 2²³), then
// 16777213 (the largest prime below 2²⁴), that gives at least
// SlotsPerBackend = 100 slots per backend: 65537 up to 655 backends, as
// every rule had before, then growing with the rule. The caller counts
// the backends its configuration lists, not the healthy ones, so every
// appliance with the same configuration computes the same size. A size
// change places every new flow anew, so the ladder changes the size only
// when the count crosses a power of two (× 100). It does not go below
// 65537 because a smaller table moves more flows between the backends
// that stay when one joins (bench/README.md: 7 % at 1031 slots for 10
// backends, 0.3 % at 65537); with one-byte slots 65537 costs 64 KiB.
//
// Tables interns tables by content: Tables.Build returns a live table
// built from the same (Name, ID, Weight) set, size and seed, instead of
// building another. Rules with identical backend sets and weights share a
// table, and a rule recomputed without a change gets its table back
// without the build's cost. Tables holds them weakly, so memory follows
// what the published snapshots reference. A build's working memory
// (4 bytes per slot with equal weights, 20 with others) comes from a
// pool, so many builds in a row do not raise the garbage collector's heap target.
//
// Delta(old, new) compares two tables of one size slot by slot, by Name:
// slots changed, slots moved away from backends still present
// (SurvivorMoved), and per backend the slots before and after, lost and
// gained.
//
// # Decisions where the design is silent
//
//   - Any IP fragment, first or not, is port-less: a fragmented TCP packet
//     selects by 3-tuple like a UDP fragment, and under NONE it is not
//     tracked (NONE tracks TCP by 5-tuple only).
//   - Affinity or tracking-mode values outside the enums act as the
//     defaults, NONE and PER_CONNECTION; the config rejects them earlier.
//   - An ICMP error is keyed by the flow it quotes: the caller reverses
//     Meta.Inner and calls MakeKey(&t, SelectionKind(t.Proto, FragNone, a)).
//   - The packet path should build keys with (*Key).SetSelection and
//     SetTracking, which write the caller's Key in place, or hash without a
//     key with SelectionHash. SelectionKey and TrackingKey return the Key by
//     value; they give the same result but copy 40 bytes with overlapping
//     moves that stall store-to-load forwarding (measured slower).
//   - Owners in Delta are compared by Name, never by ID, so renumbering IDs
//     moves nothing.
//   - M must be a prime in [2, MaxTableSize = 2²⁴]; Build does not enforce
//     "M ≥ 100 × backends" (the config does, or TableSizeFor). Backends
//     beyond M, or with tiny weights, may get no slot.
//   - Names must be non-empty and unique, and so must IDs (a slot names
//     its owner by ID); Build says which one is wrong.
package hash
