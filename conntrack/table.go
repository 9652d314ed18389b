package conntrack

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/prefetch"
)

// Ways is the number of slots in one bucket of a per-queue Table.
const Ways = 8

// DefaultIdle is the idle timeout of GCP's passthrough load balancer and
// xlb's default (docs/design.md#entry-lifetime).
var DefaultIdle = TicksOf(60e9)

// Value is what a flow is mapped to: an appliance-local backend slot and
// the generations the dataplane compares with its snapshot to invalidate
// entries in O(1).
type Value struct {
	Backend    uint32
	RuleGen    uint32
	BackendGen uint32
}

// Entry is the part of a tracked flow that the dataplane reads: key, rule
// and Value. It lives inside the Table's arena; a *Entry returned by Lookup
// or Insert is valid until the next call that may modify the Table (Insert,
// Lookup, Sweep, Serve) and must be used only on the worker goroutine.
//
// An Entry is exactly one cache line: in a line-aligned bucket a lookup
// that matches a tag reads one more line, never two. Entry holds no
// pointers, so the arena is one pointer-free allocation the garbage
// collector never scans.
type Entry struct {
	key        hash.Key // 40 bytes
	rule       uint16
	_          uint16
	backend    uint32
	ruleGen    uint32
	backendGen uint32
	_          [8]byte // spare: keeps the entry one line; free for a later field
} // 64 bytes

// Key returns the entry's flow key.
func (e *Entry) Key() hash.Key { return e.key }

// Rule returns the forwarding-rule index the entry belongs to.
func (e *Entry) Rule() uint16 { return e.rule }

// Backend returns the backend slot the flow is mapped to.
func (e *Entry) Backend() uint32 { return e.backend }

// RuleGen returns the rule generation stored with the entry.
func (e *Entry) RuleGen() uint32 { return e.ruleGen }

// BackendGen returns the backend generation stored with the entry.
func (e *Entry) BackendGen() uint32 { return e.backendGen }

// Value returns backend and generations together.
func (e *Entry) Value() Value {
	return Value{Backend: e.backend, RuleGen: e.ruleGen, BackendGen: e.backendGen}
}

func (e *Entry) set(v Value) {
	e.backend, e.ruleGen, e.backendGen = v.Backend, v.RuleGen, v.BackendGen
}

// Slot flags.
const (
	flagUnconfirmed uint8 = 1 << 0 // new: no later packet of the flow (other than a SYN) seen yet
	flagClosed      uint8 = 1 << 1 // a FIN or RST was seen (CloseAt): the connection is inactive
	flagSYN         uint8 = 1 << 2 // unconfirmed, made by a SYN: a connection not yet established (inactive)
	flagException   uint8 = 1 << 3 // MarkException (scan.go)
	flagFromPeer    uint8 = 1 << 4 // MarkFromPeer (scan.go)
)

// header is the first cache line of a bucket: everything lookup filters on
// and everything eviction and sweeping read, so those touch one line per
// bucket and the slot body only on a tag match.
type header struct {
	tags    [Ways]uint16 // 0 = empty slot; else 16 bits of the key's hash, never 0
	expires [Ways]Time   // the slot is dead from this instant on
	flags   [Ways]uint8
	_       [8]byte
} // 64 bytes

type bucket struct {
	header
	slots [Ways]Entry
} // 64 + 8*64 = 576 bytes: 72 bytes per slot, every part on its own line

// bucketSize is the size of a bucket in bytes (checked by a test).
const bucketSize = 576

// pageBuckets is how many buckets start in a 4 KiB page (at least one
// start in every page, so touching each of them touches every page).
const pageBuckets = 4096 / bucketSize

// Stats are a Table's counters. They are plain fields owned by the worker;
// other goroutines read them through Control.Stats.
type Stats struct {
	Lookups uint64 // Lookup calls
	Hits    uint64 // Lookup found a live entry
	Misses  uint64 // Lookup found nothing or an expired entry
	Expired uint64 // entries removed because they were idle: by Lookup or Sweep

	// New flows by kind (Katran's split): a TCP SYN that found no entry,
	// a TCP segment without SYN that found none (after a restart that lost
	// state, or an eviction: a spike means flows are losing their
	// backend), and any other protocol's first packet.
	MissSYN, MissNonSYN, MissOther uint64
	// InsertSkipped counts new flows that got no entry because the new
	// entry rate was above the limit (limit.go); they are forwarded by
	// their hash.
	InsertSkipped uint64
	Confirmed     uint64 // new entries confirmed by their flow's next packet

	Inserts        uint64 // new entries created by Insert
	Updates        uint64 // existing entries overwritten by Insert or Reselect (re-selection)
	InsertFailures uint64 // Insert found no slot it was allowed to take

	EvictedExpired     uint64 // Insert took the slot of an expired entry in a full bucket
	EvictedUnconfirmed uint64 // Insert evicted the unconfirmed entry closest to expiry
	EvictedLRU         uint64 // never since every new entry starts unconfirmed; kept for the metrics' continuity

	Flushed uint64 // entries removed by a Control flush
}

// Table is one queue's flow table: a bucketised, two-choice, 8-way
// set-associative hash table over one fixed arena. Every method except
// Control and the methods of Control must be called only by the owning
// worker goroutine; see the package documentation.
type Table struct {
	buckets  []bucket
	nBuckets uint64
	seed     uint64
	secrets  secrets // bucketHash's words, derived from seed
	n        int     // live + not-yet-reclaimed entries (slots in use)
	cursor   int     // next bucket Sweep examines
	stats    Stats

	// Shared with other goroutines (see Control).
	published atomic.Int64            // n as of the last Serve or Sweep
	mail      atomic.Pointer[request] // pending Control request
	control   Control
	doorbell  atomic.Pointer[func()] // wakes the worker for a request posted (SetDoorbell)

	arena *Arena  // the memfd behind buckets (arena.go); nil on the Go heap
	lim   limiter // the new-entry rate and the unconfirmed idle timeout (limit.go)
}

// ErrMaxEntries says the requested table size is unusable.
var ErrMaxEntries = errors.New("max entries out of range")

// maxTableEntries bounds the arena (2^31 slots = 128 GiB) so slot
// indexes fit an int on every platform we build for.
const maxTableEntries = 1 << 31

// New returns a Table with room for maxEntries flows (rounded up to a
// whole bucket of 8). The arena is allocated once, here: 72 bytes per
// slot. seed keys the bucket hash and should be random per appliance, so
// an outsider cannot aim flows at one bucket.
func New(maxEntries int, seed uint64) (*Table, error) {
	if maxEntries < 1 || maxEntries > maxTableEntries {
		return nil, fmt.Errorf("new conntrack table: %w: %d (want 1..%d)", ErrMaxEntries, maxEntries, maxTableEntries)
	}
	nb := (maxEntries + Ways - 1) / Ways
	t := newTable(make([]bucket, nb), seed)
	// Touch every page of the arena now: a fresh allocation is mapped on
	// first access, and a page fault on the packet path (an insert, the
	// sweep reaching a new page) costs microseconds.
	for i := 0; i < nb; i += pageBuckets {
		t.buckets[i].flags[0] = 0
	}
	return t, nil
}

// newTable returns a Table over buckets (from the heap or an Arena).
func newTable(buckets []bucket, seed uint64) *Table {
	t := &Table{buckets: buckets, nBuckets: uint64(len(buckets)), seed: seed, secrets: newSecrets(seed)}
	t.control.t = t
	t.lim.unconfirmedIdle = DefaultUnconfirmedIdle
	return t
}

// Cap returns the number of slots.
func (t *Table) Cap() int { return len(t.buckets) * Ways }

// Len returns the number of slots in use (worker goroutine only; others
// use Control.Len).
func (t *Table) Len() int { return t.n }

// ArenaBytes returns the size of the arena, the table's only memory that
// grows with the number of flows.
func (t *Table) ArenaBytes() int { return len(t.buckets) * bucketSize }

// Stats returns a copy of the counters (worker goroutine only).
func (t *Table) Stats() Stats { return t.stats }

// Probe is where a key lives in a Table: its two candidate buckets and its
// tag, computed once per packet by Locate (the only place the key is
// hashed) and then used to prefetch and to look up or insert. A Probe is
// valid for the Table that made it, for as long as the Table lives.
type Probe struct {
	b1, b2 uint32 // bucket indexes (possibly equal)
	tag    uint16
}

// Locate hashes (k, rule) and returns its Probe. The rule index is folded
// into the hash so that two rules' keys spread independently; equality
// still compares the rule.
func (t *Table) Locate(k *hash.Key, rule uint16) Probe {
	h := t.secrets.hash(k, rule)
	// Multiply-shift ("fastrange") maps 32 hash bits onto any bucket
	// count without a division or a power-of-two arena.
	p := Probe{b1: uint32((h & math.MaxUint32) * t.nBuckets >> 32), b2: uint32((h >> 32) * t.nBuckets >> 32)}
	p.tag = uint16(h>>16) ^ uint16(h>>48)
	if p.tag == 0 {
		p.tag = 1
	}
	return p
}

// find returns the slot of (k, rule) in b, or -1.
func (b *bucket) find(tag uint16, k *hash.Key, rule uint16) int {
	for i := range Ways {
		if b.tags[i] == tag && b.slots[i].rule == rule && keyEqual(&b.slots[i].key, k) {
			return i
		}
	}
	return -1
}

// keyEqual compares field by field, which the compiler turns into a few
// word compares; k1 == k2 on the whole struct calls runtime memequal.
func keyEqual(a, b *hash.Key) bool {
	return a.Src == b.Src && a.Dst == b.Dst && a.SrcPort == b.SrcPort &&
		a.DstPort == b.DstPort && a.Proto == b.Proto && a.Kind == b.Kind
}

func (b *bucket) clear(i int) {
	b.tags[i] = 0
	b.flags[i] = 0
}

// Lookup returns the live entry of (k, rule), or nil when there is none or
// it has been idle for idle ticks or more by now. idle is the rule's idle
// timeout (at least 1 tick; longer than 2^30 ticks counts as 2^30). When
// syn is false (the packet is not a SYN) a hit confirms a new entry and
// extends its life to now+idle; a SYN's hit (a retransmission, or an ICMP
// error the dataplane looks up) leaves a new entry unconfirmed, on the
// unconfirmed idle timeout. An expired entry is removed. A miss with syn
// false is counted by kind (MissNonSYN for TCP, else MissOther). The
// dataplane compares the entry's generations with its snapshot itself; a
// stale entry is re-selected with Reselect or Insert.
func (t *Table) Lookup(k *hash.Key, rule uint16, now Time, idle Ticks, syn bool) *Entry {
	return t.LookupAt(t.Locate(k, rule), k, rule, now, idle, syn)
}

// LookupAt is Lookup with the Probe Locate returned for (k, rule).
func (t *Table) LookupAt(p Probe, k *hash.Key, rule uint16, now Time, idle Ticks, syn bool) *Entry {
	t.stats.Lookups++
	// The key's first bucket, then its second (find is inlined in both:
	// a call here costs as much as the tag compare).
	b := &t.buckets[p.b1]
	i := b.find(p.tag, k, rule)
	if i < 0 && p.b2 != p.b1 {
		b = &t.buckets[p.b2]
		i = b.find(p.tag, k, rule)
	}
	if i >= 0 && !now.Before(b.expires[i]) {
		b.clear(i)
		t.n--
		t.stats.Expired++
		i = -1
	}
	if i < 0 {
		t.stats.Misses++
		if !syn {
			if k.Proto == tcpProto {
				t.stats.MissNonSYN++
			} else {
				t.stats.MissOther++
			}
		}
		return nil
	}
	if b.flags[i]&flagUnconfirmed != 0 {
		if syn {
			b.expires[i] = now.Add(min(idle, t.lim.unconfirmedIdle, maxTicks))
			t.stats.Hits++
			return &b.slots[i]
		}
		b.flags[i] &^= flagUnconfirmed | flagSYN
		t.stats.Confirmed++
	}
	b.expires[i] = now.Add(min(idle, maxTicks))
	t.stats.Hits++
	return &b.slots[i]
}

// tcpProto is IPPROTO_TCP, for the miss counters.
const tcpProto = 6

// Insert maps (k, rule) to v. Every entry Insert creates — for a SYN, a
// TCP segment that found no entry, a UDP datagram — starts unconfirmed:
// it lives the unconfirmed idle timeout (min with idle; SetUnconfirmedIdle,
// default 5 s) until the flow's next packet other than a SYN confirms it
// (Lookup), may be evicted before any confirmed entry, and may itself
// never evict a confirmed one. So a flood of any protocol from random
// tuples can only displace other unconfirmed entries.
//
// When (k, rule) already has an entry (live or not), Insert overwrites it
// in place (how a SYN re-selects); a SYN's entry becomes unconfirmed
// again, another packet's keeps its state. Otherwise, if the new-entry
// rate allows (SetNewEntryLimit; InsertSkipped counts the refusals), it
// takes an empty slot of the emptier candidate bucket; when both are full
// it evicts an expired entry, else the unconfirmed entry closest to
// expiry. It returns false when it made no entry; that is counted
// (InsertSkipped, InsertFailures), and the caller forwards the packet
// statelessly. syn also counts the new flow as MissSYN.
func (t *Table) Insert(k *hash.Key, rule uint16, v Value, now Time, idle Ticks, syn bool) (*Entry, bool) {
	return t.InsertAt(t.Locate(k, rule), k, rule, v, now, idle, syn)
}

// InsertAt is Insert with the Probe Locate returned for (k, rule).
func (t *Table) InsertAt(p Probe, k *hash.Key, rule uint16, v Value, now Time, idle Ticks, syn bool) (*Entry, bool) {
	b := &t.buckets[p.b1]
	i := b.find(p.tag, k, rule)
	if i < 0 && p.b2 != p.b1 {
		b = &t.buckets[p.b2]
		i = b.find(p.tag, k, rule)
	}
	if i >= 0 {
		t.stats.Updates++
		if syn || b.flags[i]&flagUnconfirmed != 0 {
			b.flags[i] = flagUnconfirmed | b.flags[i]&flagSYN
			if syn {
				b.flags[i] |= flagSYN
			}
			b.expires[i] = now.Add(min(idle, t.lim.unconfirmedIdle, maxTicks))
		} else {
			b.flags[i] &^= flagClosed // the connection is active again
			b.expires[i] = now.Add(min(idle, maxTicks))
		}
		e := &b.slots[i]
		e.set(v)
		return e, true
	}
	if syn {
		t.stats.MissSYN++
	}
	if !t.lim.allow(now) {
		t.stats.InsertSkipped++
		return nil, false
	}
	b, i = t.victim(&t.buckets[p.b1], &t.buckets[p.b2], now)
	if b == nil {
		t.stats.InsertFailures++
		return nil, false
	}
	t.stats.Inserts++
	b.tags[i] = p.tag
	b.slots[i].key = *k
	b.slots[i].rule = rule
	b.expires[i] = now.Add(min(idle, t.lim.unconfirmedIdle, maxTicks))
	b.flags[i] = flagUnconfirmed
	if syn {
		b.flags[i] |= flagSYN
	}
	e := &b.slots[i]
	e.set(v)
	return e, true
}

// search finds (k, rule) in its first bucket, then in its second (the
// off-path callers'; LookupAt and InsertAt spell it out).
func (t *Table) search(p Probe, k *hash.Key, rule uint16) (*bucket, int) {
	b := &t.buckets[p.b1]
	i := b.find(p.tag, k, rule)
	if i < 0 && p.b2 != p.b1 {
		b = &t.buckets[p.b2]
		i = b.find(p.tag, k, rule)
	}
	return b, i
}

// CloseAt marks the live entry of (k, rule), at the Probe Locate returned,
// as closing: its flow sent a FIN or RST. It stays tracked until it idles
// out but counts as inactive (Record.Closed); an Insert over it (a SYN
// re-selecting) makes it active again. The search reads the lines the
// packet's lookup or insert has just read; it is made for FIN and RST
// segments only, a few per connection. It reports whether it found the
// entry.
func (t *Table) CloseAt(p Probe, k *hash.Key, rule uint16) bool {
	b, i := t.search(p, k, rule)
	if i < 0 {
		return false
	}
	b.flags[i] |= flagClosed
	return true
}

// Closed reports whether the live entry of (k, rule) was closed by CloseAt
// (worker only; for tests and tools).
func (t *Table) Closed(k *hash.Key, rule uint16) (closed, found bool) {
	b, i := t.search(t.Locate(k, rule), k, rule)
	if i < 0 {
		return false, false
	}
	return b.flags[i]&flagClosed != 0, true
}

// Peek returns the live entry of (k, rule) as a Record and changes
// nothing (worker only; for tests and tools).
func (t *Table) Peek(k *hash.Key, rule uint16, now Time) (Record, bool) {
	return t.peek(k, rule, now)
}

// Reselect overwrites the Value of e, an entry just returned by Lookup
// whose generations the dataplane found stale, without a second search.
// Life and confirmation are left as Lookup set them.
func (t *Table) Reselect(e *Entry, v Value) {
	t.stats.Updates++
	e.set(v)
}

// victim picks the slot a new entry goes to, or nil when only live
// confirmed entries are left, which a new entry never evicts. An empty
// slot it picks is counted as used.
func (t *Table) victim(b1, b2 *bucket, now Time) (*bucket, int) {
	e1, n1 := b1.empties()
	e2, n2 := b2.empties()
	if n1 > 0 || n2 > 0 {
		t.n++
		if n1 >= n2 {
			return b1, e1
		}
		return b2, e2
	}
	var (
		unconfB *bucket
		unconfI int
	)
	for _, b := range [2]*bucket{b1, b2} {
		for i := range Ways {
			exp := b.expires[i]
			if !now.Before(exp) {
				t.stats.EvictedExpired++
				return b, i
			}
			if b.flags[i]&flagUnconfirmed != 0 && (unconfB == nil || exp.Before(unconfB.expires[unconfI])) {
				unconfB, unconfI = b, i
			}
		}
	}
	if unconfB != nil {
		t.stats.EvictedUnconfirmed++
	}
	return unconfB, unconfI
}

// empties returns the first empty slot of b and how many there are.
func (b *bucket) empties() (first, n int) {
	first = -1
	for i := range Ways {
		if b.tags[i] == 0 {
			if n == 0 {
				first = i
			}
			n++
		}
	}
	return first, n
}

// Sweep examines the next budget buckets in arena order (wrapping around),
// each one header line, and removes the entries in them that are expired
// by now. It returns how many it removed. The worker calls it between
// batches; its cost is bounded by budget, so a sweep never stalls a batch:
// with 1 Mi slots (131072 buckets) and 16 buckets per batch, a full pass
// takes 8192 batches.
func (t *Table) Sweep(now Time, budget int) int {
	nb := len(t.buckets)
	budget = min(budget, nb)
	removed := 0
	// The headers are in arena order but cold (a pass over a large table
	// takes seconds): ask for all of them before reading the first, so
	// their misses overlap.
	c := t.cursor
	for range budget {
		prefetch.Of(&t.buckets[c].header)
		if c++; c == nb {
			c = 0
		}
	}
	c = t.cursor
	for range budget {
		b := &t.buckets[c]
		for i := range Ways {
			if b.tags[i] != 0 && !now.Before(b.expires[i]) {
				b.clear(i)
				removed++
			}
		}
		c++
		if c == nb {
			c = 0
		}
	}
	t.cursor = c
	t.n -= removed
	t.stats.Expired += uint64(removed)
	t.published.Store(int64(t.n))
	return removed
}
