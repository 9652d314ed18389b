package fleet

import (
	"net/netip"
	"time"
)

// JoinResult is how a join ended.
type JoinResult struct {
	TimedOut bool
	Took     time.Duration
	Pending  []netip.Addr // peers that had not answered when it timed out
}

// joinState is the node's current join (loop goroutine).
type joinState struct {
	active   bool
	started  time.Time
	timeouts uint64
	last     JoinResult
}

// start asks every peer for its exceptions (a new sync request each); the
// node is not joined until they answered or the timeout passed.
func (j *joinState) start(n *Node, now time.Time) {
	j.active, j.started = true, now
	n.joined.Store(false)
	for _, p := range n.peers {
		p.synced, p.syncReq, p.syncGot, p.syncAt = false, nonce(), 0, now
	}
	n.log.Info("fleet join: asking every peer for its exceptions", "peers", len(n.peers), "timeout", n.o.JoinTimeout)
	j.check(n, now)
}

// check ends the join when every peer synced or the timeout passed.
func (j *joinState) check(n *Node, now time.Time) {
	if !j.active {
		return
	}
	var pending []netip.Addr
	for _, p := range n.peers {
		if !p.synced {
			pending = append(pending, p.addr)
		}
	}
	took := now.Sub(j.started)
	switch {
	case len(pending) == 0:
		j.last = JoinResult{Took: took}
		n.log.Info("fleet joined: every peer's exceptions are here", "took", took.Round(time.Millisecond))
	case took >= n.o.JoinTimeout:
		j.timeouts++
		j.last = JoinResult{TimedOut: true, Took: took, Pending: pending}
		n.log.Warn("fleet join timed out: going on without these peers' exceptions", "pending", pending, "timeout", n.o.JoinTimeout)
	default:
		return
	}
	j.active = false
	n.joined.Store(true)
	if n.o.OnJoin != nil {
		n.o.OnJoin(j.last)
	}
}

// Joined reports whether the node's last join ended (every peer synced,
// or the timeout passed). Any goroutine.
func (n *Node) Joined() bool { return n.joined.Load() }
