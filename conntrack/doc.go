// Package conntrack holds xlb's connection-tracking state: one flow Table
// per RX queue, Shared tables for the state that must cross queues
// (PER_SESSION sessions, fragment tracking), and the injected Clock.
//
// It gives the dataplane fast, exact tables; the decisions (what is new,
// which backend, whether an entry is still valid) belong to pkg/dataplane.
//
// # Ownership
//
// A Table belongs to exactly one goroutine, its queue's worker: Lookup,
// Insert, Reselect, Sweep, Serve, Len and Stats run only there, with no
// lock; the only atomic operations are the entry-count store in Serve and
// Sweep and the mailbox load in Serve, once per batch each. Other goroutines
// (the CLI's control server, metrics) use only the table's Control handle,
// which talks to the worker through a mailbox (below). A Shared table is
// safe for concurrent use by all workers and by control code. Clocks are
// safe for concurrent use.
//
// # Time
//
// Time is a 32-bit count of 1/16 s ticks (Ticks for durations). The worker
// reads its Clock once per batch (Now) and passes the result to every call;
// tests use FakeClock. Comparisons are wrap-safe up to 2^31 ticks (about
// 4.2 years); durations are rounded up to whole ticks and capped at 2^30.
//
// # Table memory layout
//
// The arena is one slice of 576-byte buckets, allocated once by New and
// sized ceil(maxEntries/8) buckets: 72 bytes per tracked flow at full
// capacity, nothing allocated afterwards, no pointers (the collector never
// scans it). Go places an allocation of this size on a 64-byte boundary
// (TestArenaLineAligned), so every part below is whole cache lines:
//
//	line 0, header (64 B)   tags [8]uint16  (16 bits of hash, 0 = empty)
//	                        expires [8]Time (deadline of each slot)
//	                        flags [8]uint8  (unconfirmed, closed, syn)
//	                        8 bytes spare
//	lines 1-8, one per slot (Entry, 64 B)
//	                        key hash.Key (40) | rule uint16 | 2 pad |
//	                        backend | ruleGen | backendGen (uint32 each) |
//	                        8 bytes spare
//
// Why 72 bytes a flow and not 64: with 56-byte slots after a 64-byte header
// (the layout before the worker was staged), six of the eight slots straddled
// two lines, so a lookup that matched a tag could miss twice, and a prefetch
// of the slot had to cover two lines. A 64-byte slot is one line and one
// prefetch; the 8 spare bytes per slot (and 8 per header) are free for later
// fields. Packing the slot to 48 bytes (a 32-bit rule-and-kind word, the
// key's two pad bytes reused) would not fit 8 slots in 6 lines without
// splitting keys from values, which is a second line per hit.
//
// Huge pages: once the worker prefetches a batch's buckets (pkg/dataplane
// "The batch"), most of what a lookup still waits for is the page walk of a
// random page of a large arena (4 KiB pages: one TLB entry per 4 KiB of a 72
// MiB table), and 2 MiB pages shorten it (bench/README.md has the in-vivo
// profiles). A memfd arena (NewInArena) is shmem, which gets huge pages only
// where /sys/kernel/mm/transparent_hugepage/shmem_enabled is advise (or
// always, within_size, force) and only for pages allocated after the mapping
// is advised. So an arena is mapped without MAP_POPULATE, advised
// MADV_HUGEPAGE, then populated with MADV_POPULATE_WRITE (Linux 5.14; before,
// a read of every page), so no page fault lands on the packet path either way
// (arena_huge.go). A successor (AdoptTable, AdoptShared) maps the same way:
// pages already in the memfd keep the size they were allocated with, and a 2
// MiB page is mapped by one PMD whatever the successor's setting. Under never
// or deny the advice is ignored and the arena has 4 KiB pages: no error. The
// kernel places a mapping of a shmem file whose setting allows huge pages on
// a 2 MiB boundary, so the header page costs no alignment: every whole 2 MiB
// of the file is one PMD and only the last, partial one is 4 KiB pages
// (TestArenaHugePages asserts it from /proc/self/smaps; Arena.HugeBytes). The
// daemon does not change the kernel setting: it logs at start, at info, the
// arenas' bytes and how many of them huge pages map, and how to enable them
// when the setting gives none (status and the metrics show it per table:
// HugeBytesOf reads smaps once for every arena); deploy/systemd/xlb.service
// sets advise (only from never) before xlb starts. advise changes nothing for
// a program that does not ask, unlike always.
//
// A key (with its rule index: two rules on one VIP never share an entry) has
// two candidate buckets chosen by bucketHash (a seeded wyhash-style fold of
// the key's five words, cheaper than XXH64) with the table's own seed
// (two-choice hashing, multiply-shift onto any bucket count). Locate computes
// them and the key's tag once: a Probe (two bucket indexes and the tag, 12
// bytes), which the worker keeps for the packet and passes to PrefetchBuckets
// (both header lines), PrefetchSlot (the slot line of the first matching tag)
// and LookupAt / InsertAt; Lookup and Insert are Locate followed by those. A
// lookup compares the header's tags (a two-word zero-lane test of all 8 at
// once measured slower than the plain loop, which usually stops at the first
// slots), reads the slot line only on a tag match, and the second bucket only
// on a miss in the first. Eviction and sweeping read only header lines. How
// full a table gets before its first eviction is measured in bench/README.md.
//
// # Entries, SYNs and generations
//
// Insert(k, rule, value, now, idle, syn) is an upsert: an existing entry of
// (k, rule) is overwritten in place (how a SYN re-selects,
// docs/design.md#new-or-existing); Reselect overwrites the value of an entry
// Lookup just returned, without a second search. Every entry Insert creates —
// for a SYN, a TCP segment that found none, a UDP datagram — is unconfirmed
// until a Lookup with syn = false (the flow's next packet that is not a SYN,
// FIN and RST included) confirms it; until then it lives the unconfirmed idle
// timeout (SetUnconfirmedIdle, 5 s by default, at most the rule's idle), and
// a SYN's re-selection makes it unconfirmed again. A single-packet flow (a
// flood's, a DNS query's) so leaves within seconds. Nothing removes an entry
// because of TCP flags; the dataplane marks an entry whose flow sent a FIN or
// RST closed (CloseAt: a bit of the header's flags, found again through the
// lines the packet's lookup just read), so the connection counts as inactive
// until it idles out (IPVS's ActiveConn/InActConn split,
// docs/design.md#observability); an Insert over it clears the mark. An
// unconfirmed entry a SYN made carries a third bit, so a connection not yet
// established counts as inactive too, while the first datagram of a UDP flow
// counts as active (Tally). The bits are new in flags, not a new field: the
// arena's layout (conntrack.arenaLayout) is unchanged, so a restart hands the
// tables over across this change. Entries store the rule and backend
// generations they were selected under; the dataplane compares them with its
// snapshot, which invalidates all entries of a flushed rule or backend in
// O(1).
//
// # Expiry
//
// The idle timeout is passed on every Lookup and Insert (so it is per rule
// and a configuration change applies at once; DefaultIdle is 60 s) and is
// stored as a deadline: a hit moves it to now+idle. An entry whose deadline
// is ≤ now is dead: Lookup removes it and misses (the boundary is exact:
// idle ticks after the last packet the entry is gone), Sweep(now, budget)
// removes dead entries from the next budget buckets in arena order (one
// header line each: the whole bucket's tags and deadlines) and resumes
// there next time, so its cost per batch is bounded. Len counts dead entries until they are
// reclaimed.
//
// # Eviction
//
// An Insert of a new key takes an empty slot of the emptier candidate
// bucket. When both are full it takes a dead slot, else the unconfirmed
// entry closest to its deadline; it never evicts a confirmed entry: with
// none of those it fails, is counted (InsertFailures), and the caller
// forwards the packet statelessly. A flood of any protocol from random
// tuples therefore only displaces other unconfirmed entries (TestFlood: a
// full table, ten times its capacity in SYNs, ACKs and UDP, no
// established flow lost, no allocation). EvictedLRU stays 0; it is kept
// for the metrics' continuity.
//
// # Flood defences (limit.go)
//
// New entries are admitted at a bounded rate per table (SetNewEntryLimit;
// the daemon's [conntrack] new_entries_per_second, default 125 000 per
// queue as Katran's per core, bursts of a quarter second): a token bucket
// the worker owns, refilled at most once per tick, one comparison per new
// flow. Above the rate Insert makes no entry and counts InsertSkipped;
// the flow is forwarded by its hash. AllowNew lets the dataplane charge
// the shared session table's new sessions to the same bucket (the shared
// tables have no confirmation: their entries are few per client, and the
// rate bounds what a flood can make of them). Misses are counted by kind
// (Katran's split): MissSYN (a SYN made a new entry), MissNonSYN (a TCP
// segment without SYN found none: after a lost state or an eviction; a
// spike says flows are losing their backend), MissOther; Confirmed counts
// confirmations. BenchmarkFlood measures a random-tuple flood against a
// full table of established flows, with and without the limit (0
// allocations; the figures are in bench/README.md).
//
// # Control mailbox
//
// Control.Count, List, Flush, Tally and Stats (filter by rule and/or
// backend; Tally counts active and inactive entries per rule and backend
// into the caller's arrays, so counting a large table allocates nothing)
// are requests to the worker. A caller takes Control's mutex, stores its
// request into the table's mailbox (atomic.Pointer) and waits on the
// request's done channel. The worker calls Serve once between batches:
// it publishes Len (atomic store, read by Control.Len) and makes one
// atomic load of the mailbox; a pending request is walked for at most
// budget slots per call, so a walk over a large table spreads over many
// batches and never stalls one. When the walk ends the worker clears the
// mailbox (compare-and-swap) and closes done, which orders its writes
// before the caller's reads. A caller whose context ends withdraws the
// request with a compare-and-swap; a withdrawn flush may be partly done.
// A walk is not a snapshot. Flush removes entries physically (the CLI's
// `xlb conntrack flush`); failover flushes use generations instead.
//
// # Shared tables
//
// Shared is a fixed arena of 512-byte buckets (two-choice, 8-way), all
// fields accessed atomically. Readers take no lock: a seqlock, reading the
// key and value between two equal even sequence numbers, at most 4 tries,
// after which a Get reports a miss. Writers take a per-bucket try-lock
// (compare-and-swap of the sequence to odd) on both candidate buckets and
// never wait: a contended Set returns false and the caller carries on with
// its hash. So a dropped Set costs a re-hash, and a Get never returns
// another key's value. Get refreshes a deadline at most once a second per
// entry, so a session hit from several queues does not bounce its cache
// line on every packet. FragmentKey builds the key of one datagram (src,
// dst, proto, IP ID) for a fragment table; fragment entries are not
// refreshed (TTL from the first fragment; callers use e.g. 5 s).
//
// Shared was chosen over github.com/dgraph-io/ristretto/v2 on measurement
// (BenchmarkShared: faster on every operation, no allocation); ristretto
// also identifies entries by a 64-bit hash only, applies Sets
// asynchronously and keeps its own wall clock, so a fake clock cannot
// drive it. The numbers, and BenchmarkConntrack's, are in bench/README.md
// ("Component benchmarks"), where they are refreshed.
//
// # Fleet marks and scans (scan.go)
//
// For fleet flow-state sharing (pkg/fleet, pkg/dataplane's exceptions.go)
// two more bits of the slot flags mark an entry whose backend is not its
// rule's pick any more (MarkException) and one copied from a peer's
// (MarkFromPeer); listings report both. Scan is the worker's bounded pass
// over the live entries (or over the marked ones only, reading header
// lines and the slot line of a marked entry), which sets or clears the
// exception mark as its visitor judges; the visitor may stop the call at
// an entry, which the next call starts from (a full hand-off ring loses
// nothing). The marks are new bits, not a new field: the arena layout is
// unchanged, and a SYN's Insert over an entry clears them, as it clears
// the closed mark.
//
// The fleet's peer table is a Shared table with a presence filter
// (EnablePresence): one bit per value of a hash of the key, set by Set
// and rebuilt from the live entries by the table's single writer, so a
// worker's Get of a flow no peer sent (almost every local miss) costs a
// hash and one load of a 256 KiB array instead of two bucket lines.
// Peek and Walk read without refreshing or locking, for that writer.
//
// # Arenas that outlive the process
//
// NewInArena and NewSharedInArena put a table's buckets in a sealed memfd
// mapped shared (arena.go), behind a one-page header: magic, kind, a
// CRC-32 of the bucket type's shape (every field's name, offset, size and
// kind, so a build with another layout is recognised, not misread),
// bucket size and count, max entries, seed, the clock base (the
// CLOCK_MONOTONIC value of conntrack time 0, see MonotonicClock: stored
// deadlines only mean something on the clock that wrote them), interface
// and queue, a clean flag with the count of slots in use, and a CRC-32C
// of all that. A successor process maps the same memfd (AdoptTable,
// AdoptShared): its entries, deadlines and seed are the predecessor's.
// The owner calls MarkStopped once its worker has stopped between two
// batches; the next owner's Resume takes the count from a clean header,
// or recounts after a crash, and Scrub/Repair drop entries the carried
// registry does not know (and unlock Shared buckets a dead writer held).
// An arena of another layout is refused with ErrArenaLayout: the caller
// starts that table cold and says why. A heap table (New, NewShared) has
// no header and cannot be handed over.
//
// # Decisions where the design is silent
//
//   - The bucket hash uses the table's own seed, not the fleet-wide
//     hash_seed: conntrack placement need not agree across appliances,
//     and a per-appliance random seed keeps outsiders from aiming flows
//     at one bucket.
//   - Idle timeout per call, stored as a deadline; eviction by "closest
//     to deadline".
//   - Count and List skip dead entries; Flush removes them too.
//   - Counters are worker-owned plain fields; other goroutines get them
//     through the mailbox (Control.Stats), one batch old at most.
//   - MonotonicClock ties CLOCK_MONOTONIC to Go's clock (at start and in
//     Base) with the syscall between two Go readings, retried until they
//     are at most 20 µs apart (10 tries, the closest pair kept): a single
//     pair of readings was off by the preemption between them, up to
//     milliseconds on a busy machine, and a successor's clock with it.
package conntrack
