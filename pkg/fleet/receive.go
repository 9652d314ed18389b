package fleet

import (
	"errors"
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/dataplane"
)

// withdrawSlack is how much later than a withdrawal's deadline a copy
// may expire and still be removed by it (the two deadlines are converted
// from times to live on two machines).
const withdrawSlack = conntrack.TicksPerSecond

func reasonOf(err error) Reason {
	switch {
	case errors.Is(err, errTruncated):
		return ReasonTruncated
	case errors.Is(err, errVersion):
		return ReasonVersion
	}
	return ReasonMalformed
}

// drop counts a datagram dropped for r, against p when it came from a
// configured peer.
func (n *Node) drop(p *peer, r Reason) {
	if p != nil {
		p.c.drops[r]++
		return
	}
	n.drops[r]++
}

// claimed returns the configured peer a datagram says it comes from, if
// its sender field is there, to attribute a drop (not authenticated).
func (n *Node) claimed(d []byte) *peer {
	if len(d) < 40 || string(d[:4]) != magic {
		return nil
	}
	return n.byAddr[netip.AddrFrom16([16]byte(d[24:40])).Unmap()]
}

// handle authenticates and applies one datagram. Nothing of a datagram
// that fails a check is applied.
func (n *Node) handle(d []byte, now time.Time) {
	h, body, err := parseHeader(d)
	if err != nil {
		n.drop(n.claimed(d), reasonOf(err))
		return
	}
	p := n.byAddr[h.From] // not yet authenticated: only to attribute the drop
	if !n.recv.verify(d) {
		n.drop(p, ReasonAuth)
		return
	}
	if err := checkHeader(&h); err != nil {
		n.drop(p, ReasonMalformed)
		return
	}
	if p == nil {
		n.drop(nil, ReasonUnknownPeer)
		return
	}
	if h.To != n.o.Listen.Unmap() {
		n.drop(p, ReasonMisdirected)
		return
	}
	// The body's meaning, before anything is applied.
	var (
		hello   Hello
		sync    uint64
		count   uint32
		records []Record
	)
	switch h.Type {
	case TypeHello:
		hello, err = parseHello(body)
	case TypeRecords:
		sync, records, err = parseRecords(body, n.scratch)
		n.scratch = records[:0]
	case TypeSyncEnd:
		sync, count, err = parseSyncEnd(body)
	}
	if err != nil {
		n.drop(p, reasonOf(err))
		return
	}
	if !p.verified || h.Epoch != p.epoch {
		// A new epoch (the peer restarted) is believed once it echoes our
		// challenge: a datagram recorded from an older epoch never can.
		if h.Type != TypeHello || p.challenge == 0 || hello.Echo != p.challenge {
			if h.Type == TypeHello {
				n.answer(p, &hello) // its challenge only
			} else {
				n.drop(p, ReasonUnverified)
			}
			n.challenge(p, now)
			return
		}
		p.verified, p.epoch, p.win, p.challenge = true, h.Epoch, window{}, 0
		n.log.Info("fleet peer epoch verified", "peer", p.addr)
		// What it sent before we believed it was dropped: ask for all of it,
		// now (a HELLO without a challenge: the peer serves it).
		defer n.resync(p, now)
	}
	if !p.win.accept(h.Seq) {
		n.drop(p, ReasonReplay)
		return
	}
	p.lastHeard = now
	p.c.recvDatagrams++
	p.c.recvBytes += uint64(len(d))
	switch h.Type {
	case TypeHello:
		p.owned = hello.Owned
		if p.challenge != 0 && hello.Echo == p.challenge {
			// A datagram from another epoch made us ask again, and the peer
			// we believe answered: it did not restart (a replay, or an
			// impostor with the key).
			p.challenge = 0
		}
		n.answer(p, &hello)
		// A sync request is served once the peer trusts our epoch (its
		// HELLO challenges us no more), or the answer would be dropped.
		if hello.Sync != 0 && hello.Challenge == 0 {
			n.serve(p, hello.Sync)
		}
	case TypeRecords:
		n.res.update(n.o.Snapshot())
		tnow := conntrack.Now(n.o.Clock)
		for i := range records {
			n.apply(p, &records[i], tnow)
		}
		p.c.recvRecords += uint64(len(records))
		if sync != 0 && sync == p.syncReq {
			p.syncGot += uint32(len(records))
		}
	case TypeSyncEnd:
		n.onSyncEnd(p, sync, count, now)
	}
}

// challenge asks p to prove its epoch (at most once a second).
func (n *Node) challenge(p *peer, now time.Time) {
	if p.challenge != 0 && now.Sub(p.challAt) < time.Second {
		return
	}
	p.challenge, p.challAt = nonce(), now
	n.hello(p)
}

// answer takes p's challenge, answered at once when it is new.
func (n *Node) answer(p *peer, m *Hello) {
	if m.Challenge != 0 && m.Challenge != p.owe {
		p.owe = m.Challenge
		n.hello(p)
	}
}

// onSyncEnd completes p's answer to our sync request, or asks again when
// records of it were lost.
func (n *Node) onSyncEnd(p *peer, sync uint64, count uint32, now time.Time) {
	if sync == 0 || sync != p.syncReq {
		return
	}
	if p.syncGot >= count {
		p.synced, p.syncedAt = true, now
		n.log.Info("fleet peer synced", "peer", p.addr, "exceptions", count)
		return
	}
	n.log.Warn("fleet sync incomplete: asking again", "peer", p.addr, "got", p.syncGot, "sent", count)
	n.resync(p, now)
}

// apply stores one record from p in the peer table: an exception as a
// tracked entry stamped with this appliance's generations for its
// backend, living the time the sender's entry has left (at most the
// rule's idle timeout); a withdrawal removes a copy that names its
// backend and expires no later than it.
func (n *Node) apply(p *peer, r *Record, now conntrack.Time) {
	slot, ok := n.res.rules[r.Rule]
	if !ok {
		n.drop(p, ReasonUnknownRule)
		return
	}
	b, ok := n.res.backs[slot][r.Backend]
	if !ok {
		n.drop(p, ReasonUnknownBackend)
		return
	}
	rule, be, _ := n.res.backend(slot, b)
	ttl := min(conntrack.TicksOf(time.Duration(r.TTLms)*time.Millisecond), rule.Idle)
	k := ownedKey{slot, r.Key}
	t := n.table()
	cur, left, have := t.Peek(&r.Key, slot, now)
	if r.Flags&FlagWithdraw != 0 {
		if have && cur.Backend == b && left <= ttl+withdrawSlack {
			t.Set(&r.Key, slot, cur, now, 0)
		}
		delete(p.held, k)
		return
	}
	v := conntrack.Value{Backend: b, RuleGen: rule.FlushGen, BackendGen: stamp(be, r.Flags&FlagDraining != 0, now)}
	if !have || cur != v || left < ttl {
		t.Set(&r.Key, slot, v, now, ttl)
	}
	p.held[k] = now.Add(ttl)
}

// stamp is the backend generation a copy records here: the backend's
// current one, so the copy is valid under this appliance's view, except
// that a flow the sender drains off a backend this appliance drains too
// ends at this appliance's drain deadline (an older drain generation, as
// the sender's own entry has).
func stamp(b *dataplane.Backend, draining bool, now conntrack.Time) uint32 {
	s := b.Stamp()
	if draining && b.DrainGen != b.DrainFloor && now.Before(b.DrainUntil) {
		s = s&^0xffff | uint32(b.DrainGen-1)
	}
	return s
}

// expireHeld forgets held records whose deadline passed.
func (n *Node) expireHeld() {
	now := conntrack.Now(n.o.Clock)
	for _, p := range n.peers {
		for k, d := range p.held {
			if !now.Before(d) {
				delete(p.held, k)
			}
		}
	}
}

// resync asks p for all its exceptions again, with a new request id.
func (n *Node) resync(p *peer, now time.Time) {
	p.synced, p.syncReq, p.syncGot, p.syncAt = false, nonce(), 0, now
	n.hello(p)
}

// syncStalled asks again the peers whose answer did not end within three
// heartbeats (a lost SYNC_END, or records dropped before the peer trusted
// our epoch).
func (n *Node) syncStalled(now time.Time) {
	for _, p := range n.peers {
		if p.syncReq != 0 && !p.synced && p.verified && now.Sub(p.syncAt) > silentAfter*n.o.Heartbeat {
			n.resync(p, now)
		}
	}
}
