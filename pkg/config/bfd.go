package config

import "time"

// BFDTimers is the optional [bgp.bfd] table: the timers of the BFD
// session (RFC 5880/5881, single hop) of every [[bgp.peer]] with
// bfd = true. A silent appliance leaves the routers' ECMP after
// Multiplier × the negotiated interval (300 ms with the defaults) instead
// of the BGP hold time.
type BFDTimers struct {
	MinTx      time.Duration // desired minimum transmit interval
	MinRx      time.Duration // required minimum receive interval
	Multiplier int           // detect multiplier
}

// BFD limits and defaults: the fleet prototype's 100 ms × 3
// (measured against BIRD), which BIRD detected a dead link with in
// 0.27-0.32 s. Below 10 ms a Go timer on a loaded appliance would make
// the session flap.
const (
	DefaultBFDInterval   = 100 * time.Millisecond
	MinBFDInterval       = 10 * time.Millisecond
	MaxBFDInterval       = 60 * time.Second
	DefaultBFDMultiplier = 3
)

// DefaultBFDTimers returns the values of the optional [bgp.bfd] keys.
func DefaultBFDTimers() BFDTimers {
	return BFDTimers{MinTx: DefaultBFDInterval, MinRx: DefaultBFDInterval, Multiplier: DefaultBFDMultiplier}
}

// readBFD reads [bgp.bfd] (absent: the defaults).
func readBFD(bt *table, b *BGP) {
	t := bt.sub("bfd")
	b.BFD = DefaultBFDTimers()
	t.duration("min_tx", MinBFDInterval, MaxBFDInterval, &b.BFD.MinTx)
	t.duration("min_rx", MinBFDInterval, MaxBFDInterval, &b.BFD.MinRx)
	t.intField("multiplier", 2, 255, &b.BFD.Multiplier)
	t.done()
}

// readPeerBFD reads [[bgp.peer]] bfd: BFD is single hop here (RFC 5881:
// TTL 255), so not with ebgp_multihop.
func readPeerBFD(pt *table, p *BGPPeer) bool {
	if !pt.boolean("bfd", &p.BFD) || !p.BFD || p.EBGPMultihop == 0 {
		return true
	}
	pt.errorf("bfd", "BFD runs single hop (RFC 5881) to a directly connected router: not with ebgp_multihop = %d", p.EBGPMultihop)
	return false
}
