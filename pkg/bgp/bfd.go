package bgp

import (
	"context"
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

// startBFD starts p's BFD session (the server on first use); s.mu held.
func (s *Speaker) startBFD(p Peer) error {
	if !p.BFD.Enabled() {
		return nil
	}
	if s.bfd == nil {
		s.bfd = bfd.NewServer(s.log.With("component", "bfd"), s.onBFD)
		s.bfd.Resume(s.opts.BFDCarried)
	}
	return s.bfd.Add(p.Address, p.BFD.config())
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
	ctx := context.Background()
	if ev.State == bfd.Up {
		if err := s.srv.EnablePeer(ctx, &api.EnablePeerRequest{Address: ev.Peer.String()}); err != nil {
			s.log.Warn("bfd up: enable bgp peer", "peer", ev.Peer, "err", err)
		}
		return
	}
	s.log.Warn("bfd session down: bgp session to the peer closed until bfd is up again", "peer", ev.Peer, "diag", ev.Diag)
	if err := s.srv.DisablePeer(ctx, &api.DisablePeerRequest{Address: ev.Peer.String(), Communication: "BFD down"}); err != nil {
		s.log.Warn("bfd down: disable bgp peer", "peer", ev.Peer, "err", err)
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
