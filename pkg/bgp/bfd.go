package bgp

import (
	"context"
	"log/slog"
	"maps"
	"net/netip"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"

	"github.com/xlbnet/xlb/pkg/bfd"
)

// BFD is a peer's BFD session (RFC 5880 asynchronous mode, RFC 5881
// single hop), run by pkg/bfd inside this process (doc.go "BFD"). The
// zero value runs none.
type BFD struct {
	MinTx      time.Duration // desired minimum transmit interval
	MinRx      time.Duration // required minimum receive interval
	Multiplier uint8         // detect multiplier; 0 = no BFD
}

// Enabled reports whether the peer runs a BFD session.
func (b BFD) Enabled() bool { return b.Multiplier > 0 }

func (b BFD) config() bfd.Config {
	return bfd.Config{MinTx: b.MinTx, MinRx: b.MinRx, Multiplier: b.Multiplier}
}

// startBFD starts p's BFD session (the server on first use, or the
// sessions StartBFD started, taken over); s.mu held.
func (s *Speaker) startBFD(p Peer) error {
	if !p.BFD.Enabled() {
		return nil
	}
	if s.bfd == nil {
		if early := s.opts.BFD; early != nil {
			srv, held := early.take(s.onBFD)
			s.bfdMu.Lock()
			maps.Copy(s.bfdHeld, held)
			s.bfdMu.Unlock()
			s.bfd = srv
		} else {
			s.bfd = bfd.NewServer(s.log.With("component", "bfd"), s.onBFD)
			s.bfd.Resume(s.opts.BFDCarried)
		}
	}
	if _, running := s.bfd.State(p.Address); running {
		return nil // started ahead (StartBFD)
	}
	return s.bfd.Add(p.Address, p.BFD.config())
}

// bfdHolds reports whether p's BFD session left Up, so its BGP session
// stays closed until BFD is Up again.
func (s *Speaker) bfdHolds(p netip.Addr) bool {
	s.bfdMu.Lock()
	defer s.bfdMu.Unlock()
	return s.bfdHeld[p]
}

// BFDSessions are BFD sessions started ahead of a speaker (StartBFD), so
// that the sessions a predecessor process carried (BFDExport) resume the
// moment a hand-over cuts over, before the predecessor goes silent: a
// speaker starts later (GoBGP's start takes a while on a busy machine),
// and a router whose sessions hear nothing for their detection time
// (0.3 s with 100 ms × 3) takes the BGP sessions down with them. A
// speaker takes them over through Options.BFD and follows them from then
// on; until then a session that leaves Up is remembered, and its peer is
// added disabled.
type BFDSessions struct {
	srv *bfd.Server

	mu   sync.Mutex
	held map[netip.Addr]bool // left Up before a speaker took the sessions
	to   func(bfd.Event)     // the speaker's, once it took them
}

// StartBFD starts the BFD session of every peer with BFD, each resuming
// its carried state when carried has one.
func StartBFD(log *slog.Logger, peers []Peer, carried []bfd.Carried) (*BFDSessions, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &BFDSessions{held: map[netip.Addr]bool{}}
	b.srv = bfd.NewServer(log.With("component", "bfd"), b.event)
	b.srv.Resume(carried)
	for _, p := range peers {
		if !p.BFD.Enabled() {
			continue
		}
		if err := b.srv.Add(p.Address, p.BFD.config()); err != nil {
			b.srv.Detach()
			return nil, err
		}
	}
	return b, nil
}

// Detach ends the sessions without a packet, for a process that stops
// before a speaker took them over.
func (b *BFDSessions) Detach() { b.srv.Detach() }

func (b *BFDSessions) event(ev bfd.Event) {
	b.mu.Lock()
	to := b.to
	if to == nil {
		switch ev.State {
		case bfd.Up:
			delete(b.held, ev.Peer)
		case bfd.Down:
			b.held[ev.Peer] = true
		}
	}
	b.mu.Unlock()
	if to != nil {
		to(ev)
	}
}

// take hands the sessions to a speaker: the peers whose session left Up
// so far, and to for every later change.
func (b *BFDSessions) take(to func(bfd.Event)) (*bfd.Server, map[netip.Addr]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.to = to
	return b.srv, maps.Clone(b.held)
}

// BFDExport returns the state of every BFD session for a successor
// process (Options.BFDCarried); the sessions run on untouched until
// Detach, which ends them without AdminDown.
func (s *Speaker) BFDExport() []bfd.Carried {
	s.mu.Lock()
	b := s.bfd
	s.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.Export()
}

// stopBFD ends p's BFD session, if it runs one; s.mu held.
func (s *Speaker) stopBFD(p Peer) {
	if p.BFD.Enabled() && s.bfd != nil {
		s.bfd.Remove(p.Address)
	}
	s.bfdMu.Lock()
	delete(s.bfdHeld, p.Address)
	s.bfdMu.Unlock()
}

// onBFD follows a BFD session (on its goroutine; it must not take s.mu,
// which SetPeers holds while it waits for a session to end). A session
// that leaves Up disables the BGP peer: GoBGP drops the session
// (NOTIFICATION Cease, administrative shutdown) and does not reconnect
// until the BFD session is Up again and enables it. This is RFC 5882
// §4.3's coupling, and it avoids GoBGP's ResetPeer, whose NOTIFICATION
// waits in a queue while the session is down and then ends the next
// session right after it is established.
func (s *Speaker) onBFD(ev bfd.Event) {
	s.bfdMu.Lock()
	if s.bfdFrozen != nil {
		s.bfdMu.Unlock()
		return
	}
	held := s.bfdHeld[ev.Peer]
	switch {
	case ev.State == bfd.Up && held:
		delete(s.bfdHeld, ev.Peer)
	case ev.State == bfd.Down && !held:
		s.bfdHeld[ev.Peer] = true
	default:
		s.bfdMu.Unlock()
		return
	}
	s.bfdMu.Unlock()
	if ev.State == bfd.Down {
		s.log.Warn("bfd session down: bgp session to the peer closed until bfd is up again", "peer", ev.Peer, "diag", ev.Diag)
	}
	s.setAdmin(ev.Peer, ev.State != bfd.Up)
	s.settleAdmin(ev.Peer)
}

// setAdmin disables (down) or enables the BGP peer.
func (s *Speaker) setAdmin(peer netip.Addr, down bool) {
	ctx := context.Background()
	if !down {
		if err := s.srv.EnablePeer(ctx, &api.EnablePeerRequest{Address: peer.String()}); err != nil {
			s.log.Warn("bfd up: enable bgp peer", "peer", peer, "err", err)
		}
		return
	}
	if err := s.srv.DisablePeer(ctx, &api.DisablePeerRequest{Address: peer.String(), Communication: "BFD down"}); err != nil {
		s.log.Warn("bfd down: disable bgp peer", "peer", peer, "err", err)
	}
}

// Admin-state settling: GoBGP holds one admin-state request per peer
// until the peer's state machine takes it, and drops a second one that
// comes meanwhile (it logs "previous setting admin state request is
// still remaining"). A BFD session that goes Down and Up again within a
// few milliseconds then left its BGP peer disabled for good: the enable
// was dropped, the disable taken after it. So after each change
// settleAdmin reads the peer's admin state until it has agreed with the
// BFD session for settleChecks checks in a row, settleEvery apart,
// requesting the wanted state again whenever it does not.
const (
	settleChecks = 3
	settleEvery  = 100 * time.Millisecond
	settleFor    = 30 * time.Second // then it gives up, with a warning
)

// settleAdmin starts peer's settling unless it runs already (it reads
// the wanted state at every check, so one settling follows every
// change).
func (s *Speaker) settleAdmin(peer netip.Addr) {
	s.bfdMu.Lock()
	if s.bfdSettling[peer] {
		s.bfdMu.Unlock()
		return
	}
	s.bfdSettling[peer] = true
	s.bfdMu.Unlock()
	go func() {
		defer func() {
			s.bfdMu.Lock()
			delete(s.bfdSettling, peer)
			s.bfdMu.Unlock()
		}()
		agreed := 0
		for deadline := time.Now().Add(settleFor); time.Now().Before(deadline); {
			time.Sleep(settleEvery)
			s.mu.Lock()
			stopped := s.stopped
			s.mu.Unlock()
			s.bfdMu.Lock()
			frozen, want := s.bfdFrozen != nil, s.bfdHeld[peer]
			s.bfdMu.Unlock()
			if stopped || frozen {
				return // HoldBFD(false) applies what changed meanwhile
			}
			down, ok := s.adminDown(peer)
			switch {
			case !ok:
				return // the peer is gone
			case down == want:
				if agreed++; agreed == settleChecks {
					return
				}
			default:
				agreed = 0
				s.setAdmin(peer, want)
			}
		}
		s.log.Warn("bgp peer's admin state does not follow its bfd session", "peer", peer, "after", settleFor)
	}()
}

// adminDown reports whether GoBGP holds peer administratively down, and
// whether it has the peer.
func (s *Speaker) adminDown(peer netip.Addr) (down, ok bool) {
	err := s.srv.ListPeer(context.Background(), &api.ListPeerRequest{Address: peer.String()}, func(p *api.Peer) {
		if p.State != nil {
			ok = true
			down = p.State.AdminState == api.PeerState_ADMIN_STATE_DOWN
		}
	})
	return down, ok && err == nil
}

// HoldBFD(true) keeps the BFD sessions from timing out (bfd.Server.Hold)
// and their changes from closing or opening BGP sessions, for a
// hand-over's cut-over: the successor resumes the sessions before this
// speaker Detaches (StartBFD), and while both processes hold port 3784
// the kernel may hand the router's packets to the successor's socket, so
// this speaker's sessions would time out, and tell the router Down,
// without anything being wrong. HoldBFD(false), after a hand-over that
// did not happen, lets them time out again and applies what changed
// meanwhile: a session that left Up closes its BGP session, one that came
// back opens it.
func (s *Speaker) HoldBFD(hold bool) {
	s.mu.Lock()
	srv := s.bfd
	var addrs []netip.Addr
	for a, ps := range s.peers {
		if ps.conf.BFD.Enabled() {
			addrs = append(addrs, a)
		}
	}
	s.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Hold(hold)
	states := map[netip.Addr]bfd.State{}
	for _, a := range addrs {
		states[a], _ = srv.State(a)
	}
	s.bfdMu.Lock()
	was := s.bfdFrozen
	if hold {
		if was == nil {
			s.bfdFrozen = states
		}
		s.bfdMu.Unlock()
		return
	}
	s.bfdFrozen = nil
	s.bfdMu.Unlock()
	for a, st := range states {
		switch old, ok := was[a]; {
		case ok && old == bfd.Up && st != bfd.Up:
			s.onBFD(bfd.Event{Peer: a, State: bfd.Down})
		case ok && old != bfd.Up && st == bfd.Up:
			s.onBFD(bfd.Event{Peer: a, State: bfd.Up})
		}
	}
}

// bfdState is the state of p's BFD session, "" without one.
func (s *Speaker) bfdState(p Peer) string {
	if !p.BFD.Enabled() || s.bfd == nil {
		return ""
	}
	if st, ok := s.bfd.State(p.Address); ok {
		return st.String()
	}
	return bfd.Down.String()
}
