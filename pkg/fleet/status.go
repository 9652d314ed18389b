package fleet

import (
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/conntrack"
)

// Status is a node's state for `xlb status` and the metrics.
type Status struct {
	Listen       netip.AddrPort
	Joined       bool      // the last join ended
	JoinStarted  time.Time // the last join's start
	JoinTook     time.Duration
	JoinTimedOut bool // the last join ended by its timeout
	JoinTimeouts uint64
	JoinPending  []netip.Addr // peers not synced yet (while joining) or when it timed out

	Owned    int // exceptions this appliance owns and sends
	Queued   int // records waiting for the send rate
	Held     int // exceptions held from peers (by the records received since the node started)
	Capacity int // the peer table's slots
	// Stored is the peer table's live entries at the last rebuild of its
	// presence filter (at start, then every 30 s): what a successor of xlb
	// restart took over shows here before any peer sent anything.
	Stored int
	// PresenceFill is the share of the peer table's presence filter that
	// is set (the chance that a worker's miss reads the table's buckets).
	PresenceFill float64
	// HandoffFull counts the times a worker's scan found its ring to the
	// node full (it resumes after the next batch; nothing is lost).
	HandoffFull uint64
	// Backlog counts datagrams the kernel dropped on the node's socket:
	// the loop was so far behind that its queue and the socket's buffer
	// were full.
	Backlog uint64
	// Drops counts datagrams from no configured peer (or not attributable
	// to one), by reason.
	Drops map[string]uint64
	Peers []PeerStatus
}

// PeerStatus is one peer as the node sees it.
type PeerStatus struct {
	Address netip.Addr
	// State: "silent" (nothing heard for three heartbeats, or never),
	// "unverified" (heard, its epoch not proven yet), "syncing" (a join
	// waits for its exceptions), "synced".
	State     string
	LastHeard time.Time
	Lag       time.Duration // since the last datagram from it
	Owned     uint32        // exceptions it says it owns
	Held      int           // live exceptions held from it (a flow that moved may be held from two)

	SentRecords, SentDatagrams, SentBytes, SendErrors uint64
	RecvRecords, RecvDatagrams, RecvBytes             uint64
	Drops                                             map[string]uint64 // by reason, nonzero only
}

func (n *Node) status(now time.Time) Status {
	st := Status{
		Listen: netip.AddrPortFrom(n.o.Listen, n.o.Port), Joined: n.joined.Load(), JoinStarted: n.join.started,
		JoinTook: n.join.last.Took, JoinTimedOut: n.join.last.TimedOut, JoinTimeouts: n.join.timeouts,
		Owned: len(n.own.m), Queued: len(n.own.queue) + len(n.own.withdraw),
		Capacity: n.table().Cap(), Stored: n.stored, PresenceFill: n.table().PresenceFill(),
		Backlog: n.recvOver.Load(), Drops: dropMap(&n.drops),
	}
	if n.join.active {
		st.JoinTook = now.Sub(n.join.started)
	}
	for _, ob := range n.o.Outboxes {
		st.HandoffFull += ob.Full()
	}
	tnow := conntrack.Now(n.o.Clock)
	for _, p := range n.peers {
		held := 0
		for _, d := range p.held {
			if tnow.Before(d) {
				held++
			}
		}
		ps := PeerStatus{Address: p.addr, LastHeard: p.lastHeard, Owned: p.owned, Held: held,
			SentRecords: p.c.sentRecords, SentDatagrams: p.c.sentDatagrams, SentBytes: p.c.sentBytes, SendErrors: p.c.sendErrors,
			RecvRecords: p.c.recvRecords, RecvDatagrams: p.c.recvDatagrams, RecvBytes: p.c.recvBytes, Drops: dropMap(&p.c.drops)}
		if !p.lastHeard.IsZero() {
			ps.Lag = now.Sub(p.lastHeard)
		}
		switch {
		case p.lastHeard.IsZero() || ps.Lag > silentAfter*n.o.Heartbeat:
			ps.State = "silent"
		case !p.verified:
			ps.State = "unverified"
		case n.join.active && !p.synced:
			ps.State = "syncing"
		default:
			ps.State = "synced"
		}
		if (n.join.active || n.join.last.TimedOut) && !p.synced {
			st.JoinPending = append(st.JoinPending, p.addr)
		}
		st.Held += ps.Held
		st.Peers = append(st.Peers, ps)
	}
	return st
}

func dropMap(c *[numReasons]uint64) map[string]uint64 {
	m := map[string]uint64{}
	for r, v := range c {
		if v != 0 {
			m[Reason(r).String()] = v
		}
	}
	return m
}
