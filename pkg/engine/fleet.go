package engine

import (
	"errors"
	"fmt"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/spsc"
)

// Fleet flow-state sharing (pkg/fleet): with Config.PeerEntries the
// engine keeps the table of the exceptions peers send (a shared table in
// a memfd arena, handed to a successor and kept after a crash like the
// session table), gives it to every worker, and gives each worker a
// hand-off ring for the exceptions its scan finds. The daemon's fleet node
// drains the rings (Outboxes) and writes the table (Peers).

// peersFile names the peer table's arena among the files handed over.
const peersFile = "ct-peers"

// outboxSize is each worker's hand-off ring: 64 bytes an item, 256 KiB a
// queue. The node drains it every 20 ms, so it absorbs 400 000 exceptions
// a second a queue before the scan waits (it loses nothing when it does).
const outboxSize = 4096

// shareExceptions makes q's worker consult the peer table and scan for
// exceptions (newWorker; a rebuilt worker keeps q's ring).
func (e *Engine) shareExceptions(q *queue) {
	if e.peers == nil {
		return
	}
	if q.outbox == nil {
		q.outbox, _ = spsc.New[dataplane.Sighting](outboxSize)
	}
	q.worker.ShareExceptions(q.outbox, conntrack.TicksOf(e.cfg.ExceptionRefresh))
}

// Peers returns the table of the exceptions fleet peers sent (nil without
// Config.PeerEntries). Any goroutine; its one writer is the fleet node.
func (e *Engine) Peers() *conntrack.Shared {
	if e == nil {
		return nil
	}
	return e.peers
}

// PeersAdopted reports whether the peer table is the one a predecessor
// handed over (xlb restart, upgrade): the appliance then holds its peers'
// exceptions already.
func (e *Engine) PeersAdopted() bool { return e != nil && e.peersAdopted }

// Outboxes returns each worker's hand-off ring, in the order of Queues
// (nil without Config.PeerEntries). The fleet node is their one consumer.
func (e *Engine) Outboxes() []*spsc.Ring[dataplane.Sighting] {
	if e == nil || e.peers == nil {
		return nil
	}
	out := make([]*spsc.Ring[dataplane.Sighting], 0, len(e.queues))
	for _, q := range e.queues {
		out = append(out, q.outbox)
	}
	return out
}

// adoptPeers takes a predecessor's peer table when it handed one over and
// this configuration wants one; a predecessor without [fleet] hands none
// over (a new, empty table then), and a successor without [fleet] leaves
// it (its file is closed with the rest).
func (e *Engine) adoptPeers(take func(string) (int, bool), notes []string) (*conntrack.Shared, []string, error) {
	if e.cfg.PeerEntries <= 0 {
		return nil, notes, nil
	}
	info := conntrack.ArenaInfo{ClockBase: e.cfg.ClockBase, Ifindex: e.ifindex}
	fd, ok := take(peersFile)
	if !ok {
		s, err := conntrack.NewSharedInArena(e.cfg.PeerEntries, e.cfg.Seed^0xf1ee, info)
		return s, notes, err
	}
	s, err := conntrack.AdoptShared(fd)
	switch {
	case errors.Is(err, conntrack.ErrArenaLayout):
		notes = append(notes, fmt.Sprintf("%s starts empty: %v", peersFile, err))
		s, err = conntrack.NewSharedInArena(e.cfg.PeerEntries, e.cfg.Seed^0xf1ee, info)
		return s, notes, err
	case err != nil:
		return nil, notes, err
	}
	e.peersAdopted = true
	return s, notes, nil
}
