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
	b := d.bgp.Load()
	if b == nil {
		return out
	}
	c := b.config()
	bs := &control.BGP{LocalAS: c.LocalAS, RouterID: b.routerID.String(), HoldTimeSeconds: int(c.HoldTime / time.Second),
		WithdrawDelaySec: c.WithdrawDelay.Seconds(), Peers: []control.BGPPeer{}, VIPs: []control.VIPAnnouncement{}}
	for _, p := range b.speaker.Peers() {
		row := control.BGPPeer{Address: p.Address.String(), PeerAS: p.AS, State: p.State, Announced: []string{}, LastError: p.LastError}
		if !p.Since.IsZero() {
			t := p.Since
			row.Since = &t
		}
		if !p.LastErrorAt.IsZero() {
			t := p.LastErrorAt
			row.LastErrorAt = &t
		}
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

// writeBGPMetrics writes the speaker's metrics (on the scraping goroutine).
func (d *daemon) writeBGPMetrics(w *metrics.Writer) {
	b := d.bgp.Load()
	if b == nil {
		return
	}
	w.Family("xlb_bgp_peer_up", metrics.Gauge, "1 while the BGP session to the peer is established.")
	for _, p := range b.speaker.Peers() {
		w.Sample("xlb_bgp_peer_up", boolValue(p.Established()), "peer", p.Address.String(), "peer_as", strconv.FormatUint(uint64(p.AS), 10))
	}
	w.Family("xlb_appliance_drained", metrics.Gauge, "1 while the appliance is drained (xlb appliance drain): every VIP withdrawn.")
	w.Sample("xlb_appliance_drained", boolValue(b.isDrained()))
	w.Family("xlb_bgp_announced", metrics.Gauge, "1 while the VIP is announced to the routers (0: withdrawn; status says why).")
	for _, v := range b.vipRows() {
		w.Sample("xlb_bgp_announced", boolValue(v.announced), "vip", v.vip.String())
	}
}
