package conntrack

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"

	"github.com/xlbnet/xlb/hash"
)

// SharedWays is the number of slots in one bucket of a Shared table.
const SharedWays = 8

// sharedReadTries bounds how often Get retries a bucket that writers keep
// changing; after that it reports a miss, which costs the caller a
// re-hash, never a wrong answer.
const sharedReadTries = 4

// refreshStep rate-limits the expiry refresh of Shared.Get: an entry's
// deadline is moved only when that gains at least one second, so a
// session hit from several queues writes its bucket's first cache line
// about once a second, not once per packet.
const refreshStep = TicksPerSecond

// sharedBucket is one 512-byte bucket: a header line (sequence, tags,
// deadlines) and 8 slots of 7 words. Every field is accessed atomically,
// so the seqlock protocol is visible to the race detector.
type sharedBucket struct {
	seq     atomic.Uint64                // even: stable; odd: a writer holds the bucket
	tags    [2]atomic.Uint64             // 8 × 16-bit tags, slot i in word i/4 at bits 16*(i%4); 0 = empty
	expires [SharedWays]atomic.Uint32    // Time from which the slot is dead
	_       uint64                       // pad the header to 64 bytes
	slots   [SharedWays][7]atomic.Uint64 // packKey words 0-4, Backend|RuleGen<<32, BackendGen
}

// Shared is a fixed-size table that several workers read and write at
// once: PER_SESSION sessions (2/3-tuple keys whose connections arrive on
// different queues) and fragment tracking (see FragmentKey). It is
// bucketised (two-choice, 8-way) over one fixed arena; readers take no lock (seqlock:
// they read a bucket between two equal, even sequence numbers and retry
// otherwise); writers take a per-bucket try-lock (a compare-and-swap that
// makes the sequence odd) and never wait for it: a Set that finds its
// bucket held returns false and the caller forwards the packet on its
// hash. Get never returns another key's value: the whole key and value are
// read between the two sequence checks. A Set holds both candidate
// buckets, so a key is never stored twice.
//
// All methods are safe for concurrent use.
type Shared struct {
	buckets  []sharedBucket
	nBuckets uint64
	seed     uint64
	secrets  secrets // the bucket hash's words, derived from seed
	arena    *Arena  // the memfd behind buckets (arena.go); nil on the Go heap

	presence atomic.Pointer[presence] // EnablePresence; nil: none
}

// NewShared returns a Shared table with room for maxEntries entries
// (rounded up to a whole bucket). seed keys the bucket hash.
func NewShared(maxEntries int, seed uint64) (*Shared, error) {
	if maxEntries < 1 || maxEntries > maxTableEntries {
		return nil, fmt.Errorf("new shared conntrack table: %w: %d (want 1..%d)", ErrMaxEntries, maxEntries, maxTableEntries)
	}
	nb := (maxEntries + SharedWays - 1) / SharedWays
	return newShared(make([]sharedBucket, nb), seed), nil
}

// newShared returns a Shared table over buckets (from the heap or an Arena).
func newShared(buckets []sharedBucket, seed uint64) *Shared {
	return &Shared{buckets: buckets, nBuckets: uint64(len(buckets)), seed: seed, secrets: newSecrets(seed)}
}

// Cap returns the number of slots.
func (s *Shared) Cap() int { return len(s.buckets) * SharedWays }

// FragmentKey returns the key under which fragment tracking remembers the
// backend of one IP datagram: a 3-tuple key whose port fields carry the IP
// identification (high 16 bits in SrcPort, low 16 in DstPort). Such keys
// live only in a fragment table, so they never meet flow keys.
func FragmentKey(src, dst [16]byte, proto uint8, id uint32) hash.Key {
	return hash.Key{Src: src, Dst: dst, Proto: proto, Kind: hash.Tuple3, SrcPort: uint16(id >> 16), DstPort: uint16(id)}
}

// packKey packs (k, rule) into 5 words; the rule fills Key's 2 padding
// bytes.
func packKey(k *hash.Key, rule uint16) [5]uint64 {
	return [5]uint64{
		binary.LittleEndian.Uint64(k.Src[0:8]),
		binary.LittleEndian.Uint64(k.Src[8:16]),
		binary.LittleEndian.Uint64(k.Dst[0:8]),
		binary.LittleEndian.Uint64(k.Dst[8:16]),
		uint64(k.SrcPort) | uint64(k.DstPort)<<16 | uint64(k.Proto)<<32 | uint64(k.Kind)<<40 | uint64(rule)<<48,
	}
}

func unpackKey(w *[7]atomic.Uint64) (hash.Key, uint16) {
	var k hash.Key
	binary.LittleEndian.PutUint64(k.Src[0:8], w[0].Load())
	binary.LittleEndian.PutUint64(k.Src[8:16], w[1].Load())
	binary.LittleEndian.PutUint64(k.Dst[0:8], w[2].Load())
	binary.LittleEndian.PutUint64(k.Dst[8:16], w[3].Load())
	w4 := w[4].Load()
	k.SrcPort, k.DstPort = uint16(w4), uint16(w4>>16)
	k.Proto, k.Kind = uint8(w4>>32), hash.TupleKind(w4>>40)
	return k, uint16(w4 >> 48)
}

// where returns the two candidate buckets of (k, rule) (possibly the
// same) and its tag, as Table.where does.
func (s *Shared) where(k *hash.Key, rule uint16) (b1, b2 *sharedBucket, tag uint16) {
	return s.at(s.secrets.hash(k, rule))
}

// at is where for the bucket hash h.
func (s *Shared) at(h uint64) (b1, b2 *sharedBucket, tag uint16) {
	tag = uint16(h>>16) ^ uint16(h>>48)
	if tag == 0 {
		tag = 1
	}
	return &s.buckets[(h&math.MaxUint32)*s.nBuckets>>32], &s.buckets[(h>>32)*s.nBuckets>>32], tag
}

// find returns the slot of kw in b, or -1. The caller validates the
// result with the bucket's sequence.
func (b *sharedBucket) find(tag uint16, kw *[5]uint64) int {
	tags := [2]uint64{b.tags[0].Load(), b.tags[1].Load()}
	for i := range SharedWays {
		if uint16(tags[i/4]>>(16*(i%4))) != tag {
			continue
		}
		w := &b.slots[i]
		if w[0].Load() == kw[0] && w[1].Load() == kw[1] && w[2].Load() == kw[2] &&
			w[3].Load() == kw[3] && w[4].Load() == kw[4] {
			return i
		}
	}
	return -1
}

func (b *sharedBucket) tag(i int) uint16 { return uint16(b.tags[i/4].Load() >> (16 * (i % 4))) }

// setTag is called only by the bucket's writer.
func (b *sharedBucket) setTag(i int, tag uint16) {
	w := &b.tags[i/4]
	shift := 16 * (i % 4)
	w.Store(w.Load()&^(0xffff<<shift) | uint64(tag)<<shift)
}

func (b *sharedBucket) value(i int) Value {
	v0, v1 := b.slots[i][5].Load(), b.slots[i][6].Load()
	return Value{Backend: uint32(v0), RuleGen: uint32(v0 >> 32), BackendGen: uint32(v1)}
}

// Get returns the value of (k, rule) if a live entry exists at now. With
// refresh > 0 a hit extends the entry's life to now+refresh (at most once
// a second); fragment tracking passes 0 so an entry lives exactly its TTL
// from the first fragment. A Get that keeps meeting writers gives up after
// a few tries and reports a miss.
func (s *Shared) Get(k *hash.Key, rule uint16, now Time, refresh Ticks) (Value, bool) {
	h := s.secrets.hash(k, rule)
	if p := s.presence.Load(); p != nil && !p.has(h) {
		return Value{}, false
	}
	b1, b2, tag := s.at(h)
	kw := packKey(k, rule)
	v, found := b1.get(tag, &kw, now, refresh)
	if !found && b2 != b1 {
		v, found = b2.get(tag, &kw, now, refresh)
	}
	return v, found
}

// get looks for kw in b alone; see Shared.Get.
func (b *sharedBucket) get(tag uint16, kw *[5]uint64, now Time, refresh Ticks) (Value, bool) {
	for range sharedReadTries {
		seq := b.seq.Load()
		if seq&1 != 0 {
			runtime.Gosched()
			continue
		}
		i := b.find(tag, kw)
		var (
			v   Value
			exp Time
		)
		if i >= 0 {
			v = b.value(i)
			exp = Time(b.expires[i].Load())
		}
		if b.seq.Load() != seq {
			continue
		}
		if i < 0 || !now.Before(exp) {
			return Value{}, false
		}
		if refresh > 0 {
			// A writer may have replaced the slot since the check; the
			// store then only moves the new entry's deadline, which
			// costs at most one idle period of life, never a wrong value.
			if next := now.Add(min(refresh, maxTicks)); next.Sub(exp) >= refreshStep {
				b.expires[i].Store(uint32(next))
			}
		}
		return v, true
	}
	return Value{}, false
}

// Set maps (k, rule) to v until now+idle, overwriting the key's entry if
// it has one, else taking an empty slot of the emptier candidate bucket,
// else an expired one, else the one closest to expiry. It returns false,
// without waiting, when another writer holds either bucket; the caller
// counts that and carries on with its hash.
func (s *Shared) Set(k *hash.Key, rule uint16, v Value, now Time, idle Ticks) bool {
	h := s.secrets.hash(k, rule)
	b1, b2, tag := s.at(h)
	seq1, ok := b1.tryLock()
	if !ok {
		return false
	}
	seq2 := uint64(0)
	if b2 != b1 {
		// Both try-locks never wait, so taking two in any order cannot
		// deadlock; an entry lives in one of the two, and holding both
		// keeps a key from being stored twice.
		if seq2, ok = b2.tryLock(); !ok {
			b1.seq.Store(seq1)
			return false
		}
	}
	kw := packKey(k, rule)
	b, i := b1, b1.find(tag, &kw)
	if i < 0 && b2 != b1 {
		b, i = b2, b2.find(tag, &kw)
	}
	if i < 0 {
		b, i = victim2(b1, b2, now)
		for j, w := range kw {
			b.slots[i][j].Store(w)
		}
		b.setTag(i, tag)
	}
	b.slots[i][5].Store(uint64(v.Backend) | uint64(v.RuleGen)<<32)
	b.slots[i][6].Store(uint64(v.BackendGen))
	b.expires[i].Store(uint32(now.Add(min(idle, maxTicks))))
	if p := s.presence.Load(); p != nil {
		p.add(h) // before the release below: a reader that sees the entry sees its bit
	}
	// Release: the bucket written gets a new even sequence; the other is
	// handed back unchanged, so its readers need not retry.
	if b == b1 {
		b1.seq.Store(seq1 + 2)
		if b2 != b1 {
			b2.seq.Store(seq2)
		}
	} else {
		b2.seq.Store(seq2 + 2)
		b1.seq.Store(seq1)
	}
	return true
}

// tryLock takes b's writer lock if it is free and returns the even
// sequence to release with.
func (b *sharedBucket) tryLock() (uint64, bool) {
	seq := b.seq.Load()
	if seq&1 != 0 || !b.seq.CompareAndSwap(seq, seq+1) {
		return 0, false
	}
	return seq, true
}

// victim2 picks a slot for a new key: an empty one in the emptier bucket,
// else an expired one, else the one closest to expiry. The caller holds
// both buckets.
func victim2(b1, b2 *sharedBucket, now Time) (*sharedBucket, int) {
	e1, n1 := b1.empties()
	e2, n2 := b2.empties()
	if n1 > 0 || n2 > 0 {
		if n1 >= n2 {
			return b1, e1
		}
		return b2, e2
	}
	best, bi := b1, 0
	for _, b := range [2]*sharedBucket{b1, b2} {
		for i := range SharedWays {
			exp := Time(b.expires[i].Load())
			if !now.Before(exp) {
				return b, i
			}
			if exp.Before(Time(best.expires[bi].Load())) {
				best, bi = b, i
			}
		}
	}
	return best, bi
}

func (b *sharedBucket) empties() (first, n int) {
	first = -1
	for i := range SharedWays {
		if b.tag(i) == 0 {
			if n == 0 {
				first = i
			}
			n++
		}
	}
	return first, n
}

// lock takes b's writer lock, waiting for it (off the packet path only).
func (b *sharedBucket) lock() uint64 {
	for {
		seq := b.seq.Load()
		if seq&1 == 0 && b.seq.CompareAndSwap(seq, seq+1) {
			return seq
		}
		runtime.Gosched()
	}
}

// Count returns how many live entries f selects. It walks the whole table
// without locking (off the packet path); it is not a snapshot.
func (s *Shared) Count(f Filter, now Time) int {
	n := 0
	for bi := range s.buckets {
		b := &s.buckets[bi]
		seq := b.lock()
		for i := range SharedWays {
			if b.tag(i) == 0 || !now.Before(Time(b.expires[i].Load())) {
				continue
			}
			_, rule := unpackKey(&b.slots[i])
			if f.match(rule, b.value(i).Backend) {
				n++
			}
		}
		b.seq.Store(seq)
	}
	return n
}

// List returns up to limit live entries that f selects. Off the packet
// path; it is not a snapshot.
func (s *Shared) List(f Filter, now Time, limit int) []Record {
	var out []Record
	for bi := range s.buckets {
		b := &s.buckets[bi]
		seq := b.lock()
		for i := range SharedWays {
			exp := Time(b.expires[i].Load())
			if len(out) == limit || b.tag(i) == 0 || !now.Before(exp) {
				continue
			}
			k, rule := unpackKey(&b.slots[i])
			v := b.value(i)
			if f.match(rule, v.Backend) {
				out = append(out, Record{Key: k, Rule: rule, Value: v, ExpiresIn: Ticks(exp.Sub(now))})
			}
		}
		b.seq.Store(seq)
	}
	return out
}

// Flush removes the entries f selects and returns how many it removed.
// It takes each bucket's writer lock in turn, waiting for it (off the
// packet path only).
func (s *Shared) Flush(f Filter) int {
	n := 0
	for bi := range s.buckets {
		b := &s.buckets[bi]
		seq := b.lock()
		for i := range SharedWays {
			if b.tag(i) == 0 {
				continue
			}
			_, rule := unpackKey(&b.slots[i])
			if f.match(rule, b.value(i).Backend) {
				b.setTag(i, 0)
				n++
			}
		}
		b.seq.Store(seq + 2)
	}
	return n
}

// Peek returns the value of (k, rule) and its time to live if a live
// entry exists at now, and changes nothing (the fleet receiver compares a
// peer's refresh with what it holds).
func (s *Shared) Peek(k *hash.Key, rule uint16, now Time) (Value, Ticks, bool) {
	b1, b2, tag := s.where(k, rule)
	kw := packKey(k, rule)
	for _, b := range [2]*sharedBucket{b1, b2} {
		for range sharedReadTries {
			seq := b.seq.Load()
			if seq&1 != 0 {
				runtime.Gosched()
				continue
			}
			i := b.find(tag, &kw)
			var (
				v   Value
				exp Time
			)
			if i >= 0 {
				v, exp = b.value(i), Time(b.expires[i].Load())
			}
			if b.seq.Load() != seq {
				continue
			}
			if i >= 0 && now.Before(exp) {
				return v, Ticks(exp.Sub(now)), true
			}
			break
		}
		if b2 == b1 {
			break
		}
	}
	return Value{}, 0, false
}

// Walk calls fn with each live entry at now, bucket by bucket, until fn
// returns false. It reads each bucket as Get does (between two equal even
// sequence numbers; a bucket that writers keep changing is skipped after
// a few tries) and takes no writer lock, so workers' Sets never fail
// because of it. Off the packet path; it is not a snapshot.
func (s *Shared) Walk(now Time, fn func(Record) bool) {
	var recs [SharedWays]Record
	for bi := range s.buckets {
		b := &s.buckets[bi]
		n := 0
		for range sharedReadTries {
			seq := b.seq.Load()
			if seq&1 != 0 {
				runtime.Gosched()
				continue
			}
			n = 0
			for i := range SharedWays {
				exp := Time(b.expires[i].Load())
				if b.tag(i) == 0 || !now.Before(exp) {
					continue
				}
				k, rule := unpackKey(&b.slots[i])
				recs[n] = Record{Key: k, Rule: rule, Value: b.value(i), ExpiresIn: Ticks(exp.Sub(now))}
				n++
			}
			if b.seq.Load() == seq {
				break
			}
			n = 0
		}
		for _, r := range recs[:n] {
			if !fn(r) {
				return
			}
		}
	}
}

// A presence filter lets a Get of a key the table does not hold return
// without reading any bucket: one bit per value of a hash of the key (the
// bucket hash, multiplied into other bits), set by every Set and never
// cleared, so a clear bit proves the key absent and a set one sends the
// Get to the buckets as before. The fleet's peer table has one: it is
// consulted on every local miss of a worker and holds few of the flows
// asked about, so most Gets end at a bit in a 256 KiB array (likely in
// the core's cache) instead of two bucket lines in memory. Bits of
// entries that expired or were removed stay set until RebuildPresence.
type presence struct {
	words []atomic.Uint64
	shift uint // 64 - log2(bits)
}

func (p *presence) index(h uint64) (int, uint64) {
	i := (h * 0x9e3779b97f4a7c15) >> p.shift
	return int(i >> 6), 1 << (i & 63)
}

func (p *presence) has(h uint64) bool {
	w, m := p.index(h)
	return p.words[w].Load()&m != 0
}

func (p *presence) add(h uint64) {
	w, m := p.index(h)
	if p.words[w].Load()&m == 0 {
		p.words[w].Or(m)
	}
}

// newPresence returns a filter of bitsPerSlot bits per slot of s (rounded
// up to a power of two, at least 64), with the bits of s's live entries
// at now set.
func (s *Shared) newPresence(bitsPerSlot int, now Time) (*presence, int) {
	n := uint(6)
	for 1<<n < s.Cap()*max(bitsPerSlot, 1) {
		n++
	}
	p := &presence{words: make([]atomic.Uint64, 1<<(n-6)), shift: 64 - n}
	live := 0
	s.Walk(now, func(r Record) bool {
		p.add(s.secrets.hash(&r.Key, r.Rule))
		live++
		return true
	})
	return p, live
}

// EnablePresence gives s a presence filter of bitsPerSlot bits per slot
// (8 gives about 1 in 16 false positives with half the slots live) and
// returns how many live entries it holds. Only for a table with a single
// writer, which must call it before other goroutines use the table or
// from the writing goroutine.
func (s *Shared) EnablePresence(bitsPerSlot int, now Time) int {
	p, live := s.newPresence(bitsPerSlot, now)
	s.presence.Store(p)
	return live
}

// RebuildPresence replaces the filter by one holding only the live
// entries at now, so the bits of expired and removed ones stop sending
// Gets to the buckets, and returns how many live entries there are. The
// table's single writer calls it, between its Sets (a Set during the
// rebuild could miss the new filter). Without a filter it does nothing
// and returns -1.
func (s *Shared) RebuildPresence(now Time) int {
	p := s.presence.Load()
	if p == nil {
		return -1
	}
	np, live := s.newPresence(max(len(p.words)*64/s.Cap(), 1), now)
	s.presence.Store(np)
	return live
}

// PresenceFill returns the share of the filter's bits that are set (the
// chance that a Get of an absent key reads the buckets), 0 without one.
func (s *Shared) PresenceFill() float64 {
	p := s.presence.Load()
	if p == nil {
		return 0
	}
	set := 0
	for i := range p.words {
		set += bits.OnesCount64(p.words[i].Load())
	}
	return float64(set) / float64(len(p.words)*64)
}
