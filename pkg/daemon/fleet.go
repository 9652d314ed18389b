package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/fleet"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// [fleet]: flow-state sharing with the other appliances (pkg/fleet). The
// engine keeps the peer table and each worker's hand-off ring
// (pkg/engine fleet.go); the daemon runs the node over them, holds its
// VIPs back until the node joined (announce), asks for a new join on
// undrain, and shows the node in status, metrics and lookup.

// fleetRuntime is the daemon's [fleet] side.
type fleetRuntime struct {
	node *fleet.Node
	addr netip.Addr
}

// startFleet starts the node once the data plane serves (before the BGP
// speaker, whose announcements wait for the node's join). A successor of
// xlb restart holds its predecessor's peer table and starts joined. The
// returned stop closes the node. Without [fleet] both do nothing.
func (d *daemon) startFleet(ctx context.Context) (stop func(), err error) {
	c := d.cfg.Fleet
	if c == nil {
		return func() {}, nil
	}
	keys, err := fleet.NewKeyring(c.Keys...)
	if err != nil {
		return nil, fmt.Errorf("fleet keys (%s): %w", c.KeyFile, err)
	}
	sessions, _ := d.engine.Shared()
	n, err := fleet.New(fleet.Options{
		Listen: c.Address, Port: c.Port, Peers: c.Others(), Keys: keys,
		Table: d.engine.Peers(), Outboxes: d.engine.Outboxes(), Sessions: sessions,
		Snapshot: d.engine.Snapshot, Clock: d.clock,
		Refresh: c.Refresh, SendRate: c.SendRate, JoinTimeout: c.JoinTimeout,
		Joined: d.engine.PeersAdopted(),
		Log:    d.log.With("component", "fleet"),
		OnJoin: d.onFleetJoin,
	})
	if err != nil {
		return nil, err
	}
	n.Start(ctx)
	d.fleet.Store(&fleetRuntime{node: n, addr: c.Address})
	d.log.Info("fleet node started", "address", c.Address, "port", c.Port, "peers", c.Others(), "joined", n.Joined())
	return func() {
		d.fleet.Store(nil)
		n.Close()
	}, nil
}

// onFleetJoin runs on the node's goroutine when a join ends: the VIPs it
// held back may be announced now (on the control goroutine, which may be
// asking the node for its status: not waited for here).
func (d *daemon) onFleetJoin(r fleet.JoinResult) {
	e := control.RuleEvent{Kind: eventFleet, To: "joined", Reason: fmt.Sprintf("every peer's exceptions received in %v", r.Took.Round(time.Millisecond))}
	if r.TimedOut {
		e.To, e.Reason = "join timed out", fmt.Sprintf("no complete answer from %v within join_timeout", r.Pending)
	}
	d.events.add(e)
	go d.do(context.Background(), d.announce)
}

// fleetHold says why the VIPs must wait for the fleet ("" when they need
// not): a node that has not joined yet holds them.
func (d *daemon) fleetHold() string {
	f := d.fleet.Load()
	if f == nil || f.node.Joined() {
		return ""
	}
	return "fleet join under way: waiting for the peers' exceptions (at most join_timeout)"
}

// fleetRejoin asks the peers for their exceptions again before the VIPs
// are announced (undrain).
func (d *daemon) fleetRejoin() {
	if f := d.fleet.Load(); f != nil {
		f.node.Join()
	}
}

// fleetStatus is the node's state for status (any goroutine; nil without
// [fleet]).
func (d *daemon) fleetStatus(ctx context.Context) *control.Fleet {
	f := d.fleet.Load()
	if f == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := f.node.Status(ctx)
	if err != nil {
		return &control.Fleet{Address: f.addr.String(), Error: err.Error()}
	}
	out := &control.Fleet{Address: st.Listen.String(), Joined: st.Joined, JoinSeconds: st.JoinTook.Seconds(), JoinTimedOut: st.JoinTimedOut,
		JoinTimeouts: st.JoinTimeouts, Owned: st.Owned, Queued: st.Queued, Held: st.Held, Capacity: st.Capacity, Stored: st.Stored, PresenceFill: st.PresenceFill,
		HandoffFull: st.HandoffFull, Backlog: st.Backlog, Drops: st.Drops, Peers: []control.FleetPeer{}}
	for _, a := range st.JoinPending {
		out.JoinPending = append(out.JoinPending, a.String())
	}
	for _, q := range d.engine.Stats() {
		out.PeerHits += q.Counters.PeerHit.Load()
	}
	for _, p := range st.Peers {
		row := control.FleetPeer{Address: p.Address.String(), State: p.State, LagSeconds: -1, Owned: p.Owned, Held: p.Held,
			RecordsSent: p.SentRecords, RecordsReceived: p.RecvRecords, DatagramsSent: p.SentDatagrams, DatagramsReceived: p.RecvDatagrams,
			BytesSent: p.SentBytes, BytesReceived: p.RecvBytes, SendErrors: p.SendErrors, Drops: p.Drops}
		if !p.LastHeard.IsZero() {
			row.LagSeconds = p.Lag.Seconds()
			row.LastHeard = timeOrNil(p.LastHeard)
		}
		out.Peers = append(out.Peers, row)
	}
	return out
}

// fleetHolder names the peer whose exception for (rule, key) this
// appliance holds, "" when none (lookup).
func (d *daemon) fleetHolder(ctx context.Context, rule uint16, key hash.Key) string {
	f := d.fleet.Load()
	if f == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	a, ok, err := f.node.Holder(ctx, rule, key)
	if err != nil || !ok {
		return ""
	}
	return a.String()
}

// fleetRestartOnly names the [fleet] keys that differ between o and n: a
// node is configured once, so a reload refuses them (reloadkeys.go) and
// xlb restart applies them.
func fleetRestartOnly(o, n *config.Fleet) []string {
	switch {
	case o == nil && n == nil:
		return nil
	case o == nil || n == nil:
		return []string{"fleet"} // added or removed
	}
	var keys []string
	add := func(changed bool, key string) {
		if changed {
			keys = append(keys, key)
		}
	}
	add(o.Address != n.Address, "fleet.address")
	add(!slices.Equal(o.Peers, n.Peers), "fleet.peers")
	add(o.Port != n.Port, "fleet.port")
	add(o.KeyFile != n.KeyFile || !slices.EqualFunc(o.Keys, n.Keys, func(a, b []byte) bool { return string(a) == string(b) }), "fleet.key_file")
	add(o.JoinTimeout != n.JoinTimeout, "fleet.join_timeout")
	add(o.MaxExceptions != n.MaxExceptions, "fleet.max_exceptions")
	add(o.SendRate != n.SendRate, "fleet.send_rate")
	add(o.Refresh != n.Refresh, "fleet.refresh")
	return keys
}

// The fleet's families (metrics.go declares the others).
var (
	mFleetJoined      = family("xlb_fleet_joined", "1 once the appliance has its fleet peers' exceptions (or the join timed out); its VIPs wait for it.", metrics.Gauge)
	mFleetJoinTimeout = family("xlb_fleet_join_timeouts_total", "Joins that ended by join_timeout without every peer's exceptions.", metrics.Counter)
	mFleetOwned       = family("xlb_fleet_exceptions_owned", "Exceptions this appliance owns and sends to its peers.", metrics.Gauge)
	mFleetHeld        = family("xlb_fleet_exceptions_held", "Exceptions held from each peer.", metrics.Gauge, "peer")
	mFleetPeerHits    = family("xlb_fleet_peer_hits_total", "Packets placed by an entry a fleet peer sent (flows that moved here).", metrics.Counter)
	mFleetPeerUp      = family("xlb_fleet_peer_synced", "1 while the peer is heard and its epoch proven (0: silent or unverified).", metrics.Gauge, "peer")
	mFleetLag         = family("xlb_fleet_peer_lag_seconds", "Seconds since the last datagram from the peer (-1: never).", metrics.Gauge, "peer")
	mFleetRecords     = family("xlb_fleet_records_total", "Exception records sent to and received from each peer.", metrics.Counter, "peer", "direction")
	mFleetBytes       = family("xlb_fleet_bytes_total", "Datagram bytes sent to and received from each peer.", metrics.Counter, "peer", "direction")
	mFleetDrops       = family("xlb_fleet_drops_total", "Datagrams (and records) from each peer dropped, by reason (peer \"\": from no configured peer).", metrics.Counter, "peer", "reason")
	mFleetHandoffFull = family("xlb_fleet_handoff_full_total", "Times a worker's scan found its ring to the fleet node full (it resumes later; nothing is lost).", metrics.Counter)
)

// collectFleet writes the node's metrics (on the scraping goroutine).
func (d *daemon) collectFleet(s metrics.Sink) {
	st := d.fleetStatus(context.Background())
	if st == nil || st.Error != "" {
		return
	}
	s.Add(mFleetJoined, boolValue(st.Joined))
	s.Add(mFleetJoinTimeout, float64(st.JoinTimeouts))
	s.Add(mFleetOwned, float64(st.Owned))
	s.Add(mFleetPeerHits, float64(st.PeerHits))
	s.Add(mFleetHandoffFull, float64(st.HandoffFull))
	for r, n := range st.Drops {
		s.Add(mFleetDrops, float64(n), "", r)
	}
	for _, p := range st.Peers {
		s.Add(mFleetHeld, float64(p.Held), p.Address)
		s.Add(mFleetPeerUp, boolValue(p.State == "synced" || p.State == "syncing"), p.Address)
		s.Add(mFleetLag, p.LagSeconds, p.Address)
		s.Add(mFleetRecords, float64(p.RecordsSent), p.Address, "sent")
		s.Add(mFleetRecords, float64(p.RecordsReceived), p.Address, "received")
		s.Add(mFleetBytes, float64(p.BytesSent), p.Address, "sent")
		s.Add(mFleetBytes, float64(p.BytesReceived), p.Address, "received")
		for r, n := range p.Drops {
			s.Add(mFleetDrops, float64(n), p.Address, r)
		}
	}
}
