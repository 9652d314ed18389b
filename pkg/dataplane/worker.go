package dataplane

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/capture"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/prefetch"
	"github.com/xlbnet/xlb/ring"
)

// Batch is the most packets a worker takes from RX at once (as many as a
// NIC driver's NAPI budget hands over in one poll).
const Batch = 64

// maxFragments bounds the frames one packet may become by outer
// fragmentation (a 9000-byte inner packet over a 1500-byte path needs 7).
const maxFragments = 8

// A worker sweeps sweepIdleBuckets conntrack buckets for idle entries per
// millisecond of a queue's idleness (idleSweep), and one bucket per
// packetsPerSweptBucket packets in a busy loop: one header line (8 slots)
// per 4 packets, in arena order. At 1 Mpps on one queue that is a full
// pass over a 1 Mi-slot table every half second. serveBudget is how many
// slots a pending CLI request walks per busy loop, idleServeBudget per
// loop that received nothing (an idle worker does not sleep while a
// request is pending, but at 256 slots a walk of a 512 Ki-slot table took
// two seconds when it slept 1 ms between loops; at 16 Ki it takes 32 idle
// loops, each scanning ~2 Ki header lines).
const (
	sweepIdleBuckets      = 32
	packetsPerSweptBucket = 4
	serveBudget           = 256
	idleServeBudget       = 16 << 10
)

// Counters are one worker's counters. The worker adds to them once per
// batch; any goroutine may read them.
type Counters struct {
	RXPackets  atomic.Uint64
	TXPackets  atomic.Uint64 // frames handed to the TX ring (fragments and replies included)
	Batches    atomic.Uint64
	Fragments  atomic.Uint64 // extra frames made by outer fragmentation
	Verdicts   [4]atomic.Uint64
	Reasons    [NumReasons]atomic.Uint64 // drops and passes by reason
	Encap      [encap.NumResults]atomic.Uint64
	TrackedHit atomic.Uint64 // packets placed by an existing entry
	PeerHit    atomic.Uint64 // packets placed by an entry a fleet peer sent (a subset of TrackedHit)
	KickErrors atomic.Uint64
}

// batchCounts accumulates one batch's counts without atomics.
type batchCounts struct {
	rx, tx, frags, tracked, peer uint64
	verdicts                     [4]uint64
	reasons                      [NumReasons]uint64
	encap                        [encap.NumResults]uint64
}

func (c *Counters) add(b *batchCounts) {
	c.Batches.Add(1)
	c.RXPackets.Add(b.rx)
	if b.tx != 0 {
		c.TXPackets.Add(b.tx)
	}
	if b.frags != 0 {
		c.Fragments.Add(b.frags)
	}
	if b.tracked != 0 {
		c.TrackedHit.Add(b.tracked)
	}
	if b.peer != 0 {
		c.PeerHit.Add(b.peer)
	}
	for i, v := range b.verdicts {
		if v != 0 {
			c.Verdicts[i].Add(v)
		}
	}
	for i, v := range b.reasons {
		if v != 0 {
			c.Reasons[i].Add(v)
		}
	}
	for i, v := range b.encap {
		if v != 0 {
			c.Encap[i].Add(v)
		}
	}
	*b = batchCounts{}
}

// Worker is the goroutine that owns one AF_XDP queue: RX batch → Parse →
// Decide → encapsulate in place → TX batch on the same socket. Everything
// it touches per packet is its own or immutable; it allocates nothing.
type Worker struct {
	rings    *ring.Rings
	snapshot *atomic.Pointer[Snapshot]
	tables   FlowTables
	clock    conntrack.Clock
	idle     func()

	Counters Counters
	// Backends counts the packets sent to each backend (rule and backend
	// slots), for packets per second per backend.
	Backends BackendStats

	tap atomic.Pointer[capture.Tap] // capture.go: nil unless a capture runs

	scan *exceptionScan // exceptions.go: nil unless the fleet shares flows

	loopAt int64 // the clock's nanoseconds at the last loop

	ipID   uint16
	counts batchCounts
	rx     [Batch]ring.Desc
	tx     [Batch * maxFragments]ring.Desc
	drops  [Batch * maxFragments]uint64
	spare  [maxFragments - 1]uint64
	extra  [maxFragments - 1][]byte
	extraN [maxFragments - 1]int

	// One batch's packets between the stages of Step: parsed headers,
	// parse results and half-made decisions, in RX order.
	metas  [Batch]packet.Meta
	parsed [Batch]packet.Result
	flows  [Batch]flow
}

// NewWorker returns the worker of one queue. idle is called when a loop
// found nothing to do (poll the socket, or yield for a Fake); nil yields.
func NewWorker(rings *ring.Rings, snapshot *atomic.Pointer[Snapshot], tables FlowTables, clock conntrack.Clock, idle func()) *Worker {
	if idle == nil {
		idle = runtime.Gosched
	}
	// Start each worker's outer IPv4 ID at its own point, so two queues
	// fragmenting towards one backend do not reuse IDs in step.
	return &Worker{rings: rings, snapshot: snapshot, tables: tables, clock: clock, idle: idle, ipID: uint16(rand.Uint32())}
}

// Run processes batches until ctx ends. The caller locks the goroutine to
// its OS thread (and the thread to a CPU) before calling.
func (w *Worker) Run(ctx context.Context) {
	done := ctx.Done()
	for {
		// A non-blocking receive on an open channel takes no lock
		// (ctx.Err would, once per loop).
		select {
		case <-done:
			return
		default:
		}
		if w.Step() == 0 {
			w.idle()
		}
	}
}

// Step runs one loop: recycle completed frames, refill the fill ring,
// process one RX batch, publish TX, and do a bounded share of table
// maintenance. It returns how many packets it received.
//
// The batch goes through stages, each over all its packets, so that the
// cache misses of one stage's loads overlap instead of being taken one
// packet after the other (see the package doc):
//
//	S1 prefetch each frame's first header line(s)
//	S2 parse every frame into the worker's own Meta
//	S3 match the rule, build the tracking key, hash it once (Probe) and
//	   prefetch both bucket headers; for a packet that Maglev will place
//	   whatever the tables hold (a SYN, an untracked flow), its selection
//	   hash, and prefetch its Maglev slot
//	S4 scan each packet's tags and prefetch the matching slot line
//	S5 decide in packet order (lookups and inserts with the S3 Probe, so
//	   two packets of one new flow in a batch behave as they would one at
//	   a time), and S6 encapsulate and write its TX descriptors
func (w *Worker) Step() int {
	r := w.rings
	r.Reclaim()
	if err := r.BusyPoll(); err != nil {
		w.Counters.KickErrors.Add(1)
	}
	if r.Refill() > 0 {
		if err := r.KickRX(); err != nil {
			w.Counters.KickErrors.Add(1)
		}
	}
	n := r.RX.Peek(w.rx[:])
	nanos := w.clock.Nanotime()
	now, since := conntrack.TimeOf(nanos), nanos-w.loopAt
	w.loopAt = nanos
	if n == 0 {
		if err := r.KickTX(); err != nil {
			w.Counters.KickErrors.Add(1)
		}
		w.tables.Conntrack.Serve(now, idleServeBudget)
		w.tables.Conntrack.Sweep(now, idleSweep(since))
		if w.scan != nil {
			if snap := w.snapshot.Load(); snap != nil {
				w.scan.step(w.tables.Conntrack, snap, now, idleScanBudget)
			}
		}
		return 0
	}
	r.RX.Release(n)
	ntx, ndrop := 0, 0
	snap := w.snapshot.Load()
	if snap != nil {
		ntx, ndrop = w.batch(snap, n, now)
	} else {
		for i := range n {
			w.drops[i] = w.rx[i].Addr
		}
		ndrop = n
		w.counts.reasons[ReasonNoRule] += uint64(n)
	}
	w.counts.rx += uint64(n)
	sent := r.TX.Submit(w.tx[:ntx])
	w.counts.tx += uint64(sent)
	for _, d := range w.tx[sent:ntx] {
		w.drops[ndrop] = d.Addr
		ndrop++
		w.counts.reasons[ReasonTxRingFull]++
	}
	r.Frames.Free(w.drops[:ndrop])
	if err := r.KickTX(); err != nil {
		w.Counters.KickErrors.Add(1)
	}
	w.Counters.add(&w.counts)
	w.Backends.Flush()
	w.tables.Conntrack.Serve(now, serveBudget)
	// Idle entries are reclaimed in proportion to the work done, so a busy
	// queue pays a few slot checks per packet and an idle one catches up.
	w.tables.Conntrack.Sweep(now, (n+packetsPerSweptBucket-1)/packetsPerSweptBucket)
	if w.scan != nil && snap != nil {
		w.scan.step(w.tables.Conntrack, snap, now, scanBudget)
	}
	return n
}

// idleSweep is the sweep budget of a loop that received nothing, since
// nanoseconds after the loop before: sweepIdleBuckets per millisecond (at
// least one loop's, at most 16 ms'), so an idle table is swept at one
// pace whether its worker sleeps 1 ms between loops or longer (Settled).
// Since the loop before, not the idle loop before: on a busy queue an
// idle loop between two bursts sweeps one loop's worth, not the burst's
// duration.
func idleSweep(since int64) int {
	ms := since / int64(time.Millisecond)
	return sweepIdleBuckets * int(min(max(ms, 1), 16))
}

// Settled reports whether the worker has nothing to finish between
// batches: its rings owe the kernel no TX kick and hold a batch of chunks
// to receive into (ring.Rings.Settled), and no exception scan is under
// way. Its idle wait may then sleep longer than between the loops of
// unfinished work: a packet or a request's doorbell wakes it. Worker only.
func (w *Worker) Settled() bool {
	if s := w.scan; s != nil && (s.running || s.endPending) {
		return false
	}
	return w.rings.Settled(Batch)
}

// batch runs stages S1-S6 over the n received descriptors in w.rx and
// returns how many TX descriptors it wrote to w.tx and how many frames it
// put in w.drops.
func (w *Worker) batch(snap *Snapshot, n int, now conntrack.Time) (ntx, ndrop int) {
	r := w.rings
	q := &w.tables
	ct := q.Conntrack
	for i := range n { // S1
		prefetchFrame(r.Frame(w.rx[i]))
	}
	for i := range n { // S2
		w.parsed[i] = packet.ParseInto(r.Frame(w.rx[i]), &w.metas[i])
	}
	for i := range n { // S3
		if w.parsed[i] != packet.OK {
			continue
		}
		m, f := &w.metas[i], &w.flows[i]
		snap.prepare(m, q, f)
		if f.path != pathFlow {
			continue
		}
		if f.local {
			ct.PrefetchBuckets(f.probe)
		}
		if f.hashed {
			snap.Rules[f.slot].zoneTable(&m.Src).Prefetch(f.hash)
		}
	}
	for i := range n { // S4
		if f := &w.flows[i]; w.parsed[i] == packet.OK && f.path == pathFlow && f.local && f.lookup {
			ct.PrefetchSlot(f.probe)
		}
	}
	tap := w.tapBatch() // capture.go: nil unless a capture runs

	for i := range n { // S5, S6
		d := w.rx[i]
		var dec Decision
		if res := w.parsed[i]; res != packet.OK {
			dec = parseFailure(res)
		} else if f := &w.flows[i]; f.path == pathFlow {
			dec = snap.decideFlow(snap.Rules[f.slot], &w.metas[i], q, now, f)
		} else {
			dec = snap.finish(&w.metas[i], q, now, f)
		}
		staged := tap != nil && w.tapRX(tap, snap, d, &w.metas[i], &dec)
		k := w.forward(snap, d, &w.metas[i], &dec, w.tx[ntx:])
		if tap != nil {
			w.tapOut(tap, snap, staged, &w.metas[i], &dec, w.tx[ntx:ntx+k])
		}
		w.counts.verdicts[dec.Verdict]++
		if dec.Verdict == Drop || dec.Verdict == Pass {
			w.counts.reasons[dec.Reason]++
		}
		if k == 0 {
			w.drops[ndrop] = d.Addr
			ndrop++
		}
		ntx += k
	}
	return ntx, ndrop
}

// forward carries out dec for the frame d (parsed into m) and returns how
// many TX descriptors it wrote to tx (0: the frame is dropped and goes
// back to the allocator). When it cannot send a Tx decision on, it makes
// dec the drop it became (no next hop, too big, encapsulation failure),
// so dec is the packet's final outcome, counted once by the caller.
func (w *Worker) forward(snap *Snapshot, d ring.Desc, m *packet.Meta, dec *Decision, tx []ring.Desc) int {
	r := w.rings
	switch dec.Verdict {
	case Reply:
		n := EchoReply(r.Frame(d), m)
		tx[0] = ring.Desc{Addr: d.Addr, Len: uint32(n)}
		return 1
	case Tx:
	default:
		return 0
	}
	if dec.Tracked {
		w.counts.tracked++
		if dec.Peer {
			w.counts.peer++
		}
	}
	b := &snap.Rules[dec.Rule].Backends[dec.Backend]
	t := b.Template
	if t == nil {
		dec.Verdict, dec.Reason = Drop, ReasonNoNextHop
		return 0
	}
	h := dec.Hash
	if dec.Tracked && t.UsesFlowHash() {
		// A tracked flow skipped the selection hash; GUE's source port
		// and the IPv6 flow label still need a per-flow value.
		h = hash.SelectionHash(m, hash.AffinityNone, snap.Seed)
	}
	chunkStart := r.UMEM.ChunkStart(d.Addr)
	chunk := r.UMEM.Chunk(d.Addr)
	off := int(d.Addr - chunkStart)
	w.ipID++
	newOff, newLen, er := t.Encap(chunk, off, int(d.Len), m, h, w.ipID)
	w.counts.encap[er]++
	switch er {
	case encap.OK:
		w.Backends.Count(dec.Rule, dec.Backend, uint32(m.L3End-m.L3Off), dec.New)
		tx[0] = ring.Desc{Addr: chunkStart + uint64(newOff), Len: uint32(newLen)}
		return 1
	case encap.TooBig:
		// Not forwarded: the frame became the ICMP error sent back.
		dec.Verdict, dec.Reason = Drop, ReasonPacketTooBig
		tx[0] = ring.Desc{Addr: chunkStart + uint64(newOff), Len: uint32(newLen)}
		return 1
	case encap.NeedFragments:
		k, why := w.fragment(t, chunk, chunkStart, off, d, m, h, tx)
		if k == 0 {
			dec.Verdict, dec.Reason = Drop, why
			return 0
		}
		w.Backends.Count(dec.Rule, dec.Backend, uint32(m.L3End-m.L3Off), dec.New)
		return k
	case encap.DropTooBig:
		dec.Verdict, dec.Reason = Drop, ReasonPacketTooBig // and no ICMP error may be sent about it
		return 0
	default:
		dec.Verdict, dec.Reason = Drop, ReasonEncapFailed
		return 0
	}
}

// prefetchFrame starts loading the line(s) holding a frame's headers:
// Ethernet, IPv4 and TCP fit the first 64 bytes; VLAN or IPv6 reach into
// the second.
func prefetchFrame(f []byte) {
	if len(f) > 0 {
		prefetch.Of(&f[0])
		if len(f) > 64 {
			prefetch.Of(&f[64])
		}
	}
}

// fragment splits an oversize inner IPv4 packet without DF over the outer
// header (RFC 2003), using spare frames from the allocator. It returns the
// frames written to tx, or 0 and why it could not.
func (w *Worker) fragment(t *encap.Template, chunk []byte, chunkStart uint64, off int, d ring.Desc, m *packet.Meta, h uint64, tx []ring.Desc) (int, Reason) {
	r := w.rings
	need := t.FragmentCount(m) - 1
	if need > len(w.spare) || need > len(tx)-1 {
		return 0, ReasonEncapFailed
	}
	got := r.Frames.Alloc(w.spare[:need])
	if got < need {
		r.Frames.Free(w.spare[:got])
		return 0, ReasonNoFrames
	}
	for i := range need {
		w.extra[i] = r.UMEM.Chunk(w.spare[i])
	}
	newOff, newLen, nExtra, res := t.Fragment(chunk, off, int(d.Len), m, h, w.ipID, w.extra[:need], w.extraN[:need])
	if res != encap.OK {
		r.Frames.Free(w.spare[:need])
		return 0, ReasonEncapFailed
	}
	tx[0] = ring.Desc{Addr: chunkStart + uint64(newOff), Len: uint32(newLen)}
	for i := range nExtra {
		tx[1+i] = ring.Desc{Addr: w.spare[i], Len: uint32(w.extraN[i])}
	}
	if nExtra < need {
		r.Frames.Free(w.spare[nExtra:need])
	}
	w.counts.frags += uint64(nExtra)
	return 1 + nExtra, ReasonNone
}
