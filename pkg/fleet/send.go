package fleet

import (
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/dataplane"
)

// ownedKey names a tracked flow on this appliance: its rule slot and
// tracking key.
type ownedKey struct {
	rule uint16
	key  hash.Key
}

// ownedEntry is an exception this appliance owns: the workers' scans (or
// the session walk) found it, and the node sends it to every peer when it
// is new, when its backend changes, and when its deadline moved since it
// was last sent (the flow carried traffic); otherwise the peers' copies
// simply expire with it.
type ownedEntry struct {
	v        conntrack.Value
	deadline conntrack.Time
	source   int    // outbox index, or the session walk
	pass     uint32 // the last pass of source that saw it
	queued   bool

	sent         bool
	sentBackend  uint32
	sentDeadline conntrack.Time
}

// withdrawal is a record the peers must drop: the entry that was sent no
// longer names that backend (or is gone) as of the deadline sent.
type withdrawal struct {
	k        ownedKey
	backend  uint32
	deadline conntrack.Time
}

// owner is the send side's state (loop goroutine).
type owner struct {
	m        map[ownedKey]*ownedEntry
	queue    []ownedKey
	withdraw []withdrawal
	buf      []dataplane.Sighting
	sessions int // the source number of the session walk
}

// resendAfter is how far a deadline must move before a record is sent
// again: a scan's time to live is read at the scan and converted at the
// drain, so an idle flow's deadline jitters by a tick.
const resendAfter = conntrack.TicksPerSecond

func (o *owner) init(queues int) {
	o.m = map[ownedKey]*ownedEntry{}
	o.buf = make([]dataplane.Sighting, 256)
	o.sessions = queues
}

// sighted records an exception seen by source's pass.
func (o *owner) sighted(source int, s *dataplane.Sighting, now conntrack.Time) {
	k := ownedKey{s.Rule, s.Key}
	e := o.m[k]
	if e == nil {
		e = &ownedEntry{}
		o.m[k] = e
	}
	e.v, e.source, e.pass = s.Value, source, s.Pass
	e.deadline = now.Add(s.ExpiresIn)
	if !e.sent || e.v.Backend != e.sentBackend || e.deadline.Sub(e.sentDeadline) > int32(resendAfter) {
		o.enqueue(k, e)
	}
}

func (o *owner) enqueue(k ownedKey, e *ownedEntry) {
	if !e.queued {
		e.queued = true
		o.queue = append(o.queue, k)
	}
}

// endPass forgets the exceptions of source that its pass did not see
// again (the entry expired, was flushed, or is no exception any more),
// withdrawing those that were sent.
func (o *owner) endPass(source int, pass uint32) {
	for k, e := range o.m {
		if e.source != source || int32(e.pass-pass) >= 0 {
			continue
		}
		if e.sent {
			o.withdraw = append(o.withdraw, withdrawal{k, e.sentBackend, e.sentDeadline})
		}
		delete(o.m, k)
	}
}

// drain takes what the workers handed over.
func (n *Node) drain() {
	now := conntrack.Now(n.o.Clock)
	for i, ob := range n.o.Outboxes {
		for {
			k := ob.Pop(n.own.buf)
			for j := range k {
				s := &n.own.buf[j]
				if s.End {
					n.own.endPass(i, s.Pass)
				} else {
					n.own.sighted(i, s, now)
				}
			}
			if k < len(n.own.buf) {
				break
			}
		}
	}
}

// sessions walks the PER_SESSION session table every Refresh, and at
// once when the tables changed, for sessions whose backend is not their
// rule's pick.
func (n *Node) sessions(now time.Time) {
	s := n.res.snap
	if n.o.Sessions == nil || s == nil || (now.Before(n.sessNext) && s.Placement() == n.sessPlan) {
		return
	}
	n.sessNext, n.sessPlan = now.Add(n.o.Refresh), s.Placement()
	n.sessPass++
	tnow := conntrack.Now(n.o.Clock)
	n.o.Sessions.Walk(tnow, func(r conntrack.Record) bool {
		if !s.EntryValid(r.Rule, r.Value, r.Key.Proto, tnow) {
			return true
		}
		if pick, ok := s.Pick(r.Rule, &r.Key); ok && pick == r.Value.Backend {
			return true
		}
		n.own.sighted(n.own.sessions, &dataplane.Sighting{Key: r.Key, Rule: r.Rule, Value: r.Value, ExpiresIn: r.ExpiresIn, Pass: n.sessPass}, tnow)
		return true
	})
	n.own.endPass(n.own.sessions, n.sessPass)
}

// record makes the wire record of an owned exception, or false when its
// rule or backend is gone or the entry no longer decides (it is then
// forgotten, and withdrawn if it was sent).
func (n *Node) record(k ownedKey, e *ownedEntry, now conntrack.Time) (Record, bool) {
	_, b, ok := n.res.backend(k.rule, e.v.Backend)
	if !ok || e.deadline.Sub(now) <= 0 || !n.res.snap.EntryValid(k.rule, e.v, k.key.Proto, now) {
		return Record{}, false
	}
	r := Record{Rule: n.res.ids[k.rule], Key: k.key, Backend: netip.AddrFrom16(b.Addr).Unmap(), TTLms: ticksMs(conntrack.Ticks(e.deadline.Sub(now)))}
	if uint16(e.v.BackendGen) != b.DrainGen {
		r.Flags |= FlagDraining
	}
	return r, true
}

// ticksMs converts a time to live to the wire's milliseconds.
func ticksMs(t conntrack.Ticks) uint32 { return uint32(t.Duration() / time.Millisecond) }

// tokens is a token bucket in records.
type tokens struct {
	rate, burst, have float64
	last              time.Time
}

// take returns how many records may go now.
func (t *tokens) take(now time.Time) int {
	if !t.last.IsZero() {
		t.have = min(t.burst, t.have+now.Sub(t.last).Seconds()*t.rate)
	} else {
		t.have = t.burst
	}
	t.last = now
	return int(t.have)
}

// spend takes k records from the bucket.
func (t *tokens) spend(k int) { t.have -= float64(k) }

// sendUpdates sends the queued records and withdrawals to every peer, as
// far as the send rate allows; the rest waits for the next tick.
func (n *Node) sendUpdates(now time.Time) {
	if len(n.own.queue) == 0 && len(n.own.withdraw) == 0 {
		return
	}
	budget := n.rate.take(now)
	tnow := conntrack.Now(n.o.Clock)
	n.body.reset(0)
	sent := 0
	for sent < budget {
		var r Record
		switch {
		case len(n.own.withdraw) > 0:
			w := n.own.withdraw[0]
			n.own.withdraw = n.own.withdraw[1:]
			var ok bool
			if r, ok = n.withdrawal(&w, tnow); !ok {
				continue
			}
		case len(n.own.queue) > 0:
			k := n.own.queue[0]
			n.own.queue = n.own.queue[1:]
			e := n.own.m[k]
			if e == nil {
				continue
			}
			e.queued = false
			var ok bool
			if r, ok = n.record(k, e, tnow); !ok {
				if e.sent {
					n.own.withdraw = append(n.own.withdraw, withdrawal{k, e.sentBackend, e.sentDeadline})
				}
				delete(n.own.m, k)
				continue
			}
			e.sent, e.sentBackend, e.sentDeadline = true, e.v.Backend, e.deadline
		default:
			budget = sent // nothing left
			continue
		}
		if !n.body.add(&r) {
			n.broadcast(TypeRecords, n.body.b, n.body.n)
			n.body.reset(0)
			n.body.add(&r)
		}
		sent++
	}
	if n.body.n > 0 {
		n.broadcast(TypeRecords, n.body.b, n.body.n)
	}
	n.rate.spend(sent)
	if len(n.own.queue) == 0 {
		n.own.queue = n.own.queue[:0:0] // let a large backlog's array go
	}
}

// withdrawal makes the wire record of w, or false when its rule or
// backend is gone here.
func (n *Node) withdrawal(w *withdrawal, now conntrack.Time) (Record, bool) {
	_, b, ok := n.res.backend(w.k.rule, w.backend)
	if !ok {
		return Record{}, false
	}
	left := conntrack.Ticks(max(w.deadline.Sub(now), 0))
	return Record{Rule: n.res.ids[w.k.rule], Key: w.k.key, Backend: netip.AddrFrom16(b.Addr).Unmap(), TTLms: ticksMs(left), Flags: FlagWithdraw}, true
}

// syncJob is the node's answer to a peer's sync request: every owned
// exception as of the request, then SYNC_END with the count.
type syncJob struct {
	id   uint64
	keys []ownedKey
	sent uint32
	rate tokens
}

// serve starts the answer to p's sync request id.
func (n *Node) serve(p *peer, id uint64) {
	if id == p.lastServe || (p.serving != nil && p.serving.id == id) {
		return
	}
	p.lastServe = id
	j := &syncJob{id: id, keys: make([]ownedKey, 0, len(n.own.m)), rate: tokens{rate: float64(n.o.SendRate), burst: float64(n.o.SendRate) / 4}}
	for k := range n.own.m {
		j.keys = append(j.keys, k)
	}
	p.serving = j
}

// sendSyncs advances every sync answer under way.
func (n *Node) sendSyncs(now time.Time) {
	tnow := conntrack.Now(n.o.Clock)
	for _, p := range n.peers {
		j := p.serving
		if j == nil {
			continue
		}
		budget := j.rate.take(now)
		n.body.reset(j.id)
		sent := 0
		for sent < budget && len(j.keys) > 0 {
			k := j.keys[0]
			j.keys = j.keys[1:]
			e := n.own.m[k]
			if e == nil {
				continue
			}
			r, ok := n.record(k, e, tnow)
			if !ok {
				continue
			}
			if !n.body.add(&r) {
				n.sendTo(p, TypeRecords, n.body.b, n.body.n)
				n.body.reset(j.id)
				n.body.add(&r)
			}
			sent++
		}
		if n.body.n > 0 {
			n.sendTo(p, TypeRecords, n.body.b, n.body.n)
		}
		j.rate.spend(sent)
		j.sent += uint32(sent)
		if len(j.keys) == 0 {
			n.sendTo(p, TypeSyncEnd, appendSyncEnd(n.scratchBody[:0], j.id, j.sent), 0)
			p.serving = nil
		}
	}
}

// heartbeat sends a HELLO to every peer.
func (n *Node) heartbeat(now time.Time) {
	n.lastHB = now
	for _, p := range n.peers {
		n.hello(p)
	}
}

// hello sends p a HELLO: our challenge while its epoch is not verified,
// the echo of its last challenge, our sync request until it is answered.
func (n *Node) hello(p *peer) {
	m := Hello{Challenge: p.challenge, Echo: p.owe, Owned: uint32(len(n.own.m))}
	if !p.synced {
		m.Sync = p.syncReq
	}
	n.sendTo(p, TypeHello, appendHello(n.scratchBody[:0], &m), 0)
}

// broadcast sends one body to every peer.
func (n *Node) broadcast(t Type, body []byte, records int) {
	for _, p := range n.peers {
		n.sendTo(p, t, body, records)
	}
}

// sendTo seals body into a datagram to p and sends it.
func (n *Node) sendTo(p *peer, t Type, body []byte, records int) {
	p.seq++
	h := Header{Type: t, Epoch: n.epoch, Seq: p.seq, From: n.o.Listen.Unmap(), To: p.addr}
	d := appendHeader(n.out[:0], &h, len(body))
	d = append(d, body...)
	d = n.send.seal(d)
	n.out = d
	if _, err := n.conn.WriteToUDPAddrPort(d, p.udp); err != nil {
		p.c.sendErrors++
		return
	}
	p.c.sentDatagrams++
	p.c.sentBytes += uint64(len(d))
	p.c.sentRecords += uint64(records)
}
