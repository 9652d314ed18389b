package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// ChangeAppliance implements control.API: `xlb appliance drain|undrain`.
// The drain is saved in the state overlay first (it survives a restart: a
// drained appliance that restarts stays withdrawn), then every VIP's
// announcement follows it. The data plane keeps forwarding whatever still
// reaches it, so the routers move flows away without breaking them. An
// appliance without [bgp] announces nothing: the change is refused.
func (o *ops) ChangeAppliance(ctx context.Context, a control.ApplianceAction) (*control.ApplianceChangeResult, error) {
	var res control.ApplianceChangeResult
	var cerr error
	err := o.d.do(ctx, func() {
		d := o.d
		if cerr = d.restartGuard(fmt.Sprintf("appliance %s", a)); cerr != nil {
			return
		}
		if d.cfg.BGP == nil && a == control.ApplianceDrain {
			cerr = control.Errorf(http.StatusConflict, "appliance drain: no [bgp] in %s: this appliance announces nothing to withdraw (take it out of the routers' static routes instead)", d.cfg.Path)
			return
		}
		prev := d.state.Appliance
		switch a {
		case control.ApplianceDrain:
			res.Changed = d.state.DrainAppliance(time.Now())
			res.Message = "appliance drained: every VIP withdrawn from the routers; connections that still arrive are forwarded"
			if !res.Changed {
				res.Message = "appliance was already drained"
			}
		case control.ApplianceUndrain:
			res.Changed = d.state.UndrainAppliance()
			if res.Changed {
				d.fleetRejoin() // the peers' exceptions first, then the VIPs
			}
			res.Message = "appliance undrained: VIPs are announced again where their rules can place new flows"
			if !res.Changed {
				res.Message = "appliance was not drained"
			}
		}
		if res.Changed {
			if err := d.state.Save(d.cfg.StateFile); err != nil {
				d.state.Appliance = prev
				cerr = fmt.Errorf("appliance %s not applied: %w", a, err)
				return
			}
			d.log.Info("appliance changed by the CLI", "action", string(a), "by", control.PeerFrom(ctx).String())
			d.events.add(control.RuleEvent{Kind: eventCLI, Reason: res.Message, By: control.PeerFrom(ctx).String()})
			d.announce()
		}
		res.Appliance = d.applianceStatus()
	})
	if err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	return &res, nil
}

// applianceStatus runs on the control goroutine.
func (d *daemon) applianceStatus() control.Appliance {
	out := control.Appliance{Drained: d.state.Appliance.Drained}
	if out.Drained && !d.state.Appliance.DrainedAt.IsZero() {
		t := d.state.Appliance.DrainedAt
		out.DrainedAt = &t
	}
	out.Fleet = d.fleetStatus(context.Background())
	b := d.bgp.Load()
	if b == nil {
		return out
	}
	c := b.config()
	bs := &control.BGP{LocalAS: c.LocalAS, RouterID: b.routerID.String(), HoldTimeSeconds: int(c.HoldTime / time.Second),
		WithdrawDelaySec: c.WithdrawDelay.Seconds(), Peers: []control.BGPPeer{}, VIPs: []control.VIPAnnouncement{}}
	for _, p := range b.speaker.Peers() {
		row := control.BGPPeer{Address: p.Address.String(), PeerAS: p.AS, State: p.State, Announced: []string{}, LastError: p.LastError, BFD: p.BFD}
		row.Since, row.LastErrorAt = timeOrNil(p.Since), timeOrNil(p.LastErrorAt)
		for _, pfx := range p.Announced {
			row.Announced = append(row.Announced, pfx.String())
		}
		bs.Peers = append(bs.Peers, row)
	}
	for _, v := range b.vipRows() {
		bs.VIPs = append(bs.VIPs, control.VIPAnnouncement{VIP: v.vip.String(), Announced: v.announced, Reason: v.reason, Since: v.since})
	}
	out.BGP = bs
	return out
}

// appliance copies the appliance's status off the control goroutine.
func (o *ops) appliance(ctx context.Context) (control.Appliance, error) {
	var out control.Appliance
	err := o.d.do(ctx, func() { out = o.d.applianceStatus() })
	return out, err
}

// The BGP families (metrics.go declares the others).
var (
	mPeerUp    = family("xlb_bgp_peer_up", "1 while the BGP session to the peer is established.", metrics.Gauge, "peer", "peer_as")
	mDrained   = family("xlb_appliance_drained", "1 while the appliance is drained (xlb appliance drain): every VIP withdrawn.", metrics.Gauge)
	mAnnounced = family("xlb_bgp_announced", "1 while the VIP is announced to the routers (0: withdrawn; status says why).", metrics.Gauge, "vip")
	mBFDUp     = family("xlb_bfd_session_up", "1 while the BFD session to the BGP peer is Up (peers with bfd = true only).", metrics.Gauge, "peer")
)

// collectBGP writes the speaker's metrics (on the scraping goroutine).
func (d *daemon) collectBGP(s metrics.Sink) {
	b := d.bgp.Load()
	if b == nil {
		return
	}
	for _, p := range b.speaker.Peers() {
		s.Add(mPeerUp, boolValue(p.Established()), p.Address.String(), strconv.FormatUint(uint64(p.AS), 10))
		if p.BFD != "" {
			s.Add(mBFDUp, boolValue(p.BFD == "up"), p.Address.String())
		}
	}
	s.Add(mDrained, boolValue(b.isDrained()))
	for _, v := range b.vipRows() {
		s.Add(mAnnounced, boolValue(v.announced), v.vip.String())
	}
}
