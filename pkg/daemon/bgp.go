package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/bgp"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
)

// bgpRuntime is the daemon's BGP side ([bgp] in xlb.toml): the speaker and
// the announce decision per VIP. The control goroutine makes every
// decision; the mutex lets status and metrics read them.
type bgpRuntime struct {
	cfg      *config.BGP
	routerID netip.Addr
	speaker  *bgp.Speaker

	mu      sync.Mutex
	vips    map[netip.Addr]vipDecision
	drained bool // the appliance drain the decisions follow
}

// vipDecision is whether a VIP is announced, why, and since when.
type vipDecision struct {
	announced bool
	reason    string
	since     time.Time
}

// speakerOptions turns [bgp] into the speaker's options.
func speakerOptions(c *config.BGP, routerID netip.Addr) bgp.Options {
	o := bgp.Options{LocalAS: c.LocalAS, RouterID: routerID, HoldTime: c.HoldTime, Peers: bgpPeers(c), Attrs: bgpAttrs(c), GracefulRestart: c.GracefulRestart}
	return o
}

func bgpPeers(c *config.BGP) []bgp.Peer {
	var ps []bgp.Peer
	for _, p := range c.Peers {
		bp := bgp.Peer{Address: p.Address, AS: p.PeerAS, Port: p.Port, Password: p.Password, EBGPMultihop: p.EBGPMultihop, Passive: p.Passive}
		if p.BFD {
			bp.BFD = bgp.BFD{MinTx: c.BFD.MinTx, MinRx: c.BFD.MinRx, Multiplier: uint8(c.BFD.Multiplier)}
		}
		ps = append(ps, bp)
	}
	return ps
}

func bgpAttrs(c *config.BGP) bgp.Attributes {
	a := bgp.Attributes{MED: c.MED}
	for _, cm := range c.Communities {
		a.Communities = append(a.Communities, cm.Uint32())
	}
	for _, lc := range c.LargeCommunities {
		a.LargeCommunities = append(a.LargeCommunities, bgp.LargeCommunity{Global: lc.Global, Local1: lc.Local1, Local2: lc.Local2})
	}
	return a
}

// routerIDOf is [bgp] router_id, else the interface's first IPv4 address.
func routerIDOf(c *config.BGP, ifname string) (netip.Addr, error) {
	if c.RouterID.IsValid() {
		return c.RouterID, nil
	}
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bgp router id: %w", err)
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bgp router id: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.Unmap().IsLoopback() {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("bgp router id: %s has no IPv4 address; set bgp.router_id", ifname)
}

// startBGP starts the speaker once the data plane serves, and announces
// what may be announced. The returned stop withdraws every VIP, waits
// withdraw_delay (the data plane still forwards what the routers send
// meanwhile), then closes the sessions. Without [bgp] both do nothing.
func (d *daemon) startBGP(ctx context.Context) (stop func(), err error) {
	if d.cfg.BGP == nil {
		d.bgpRestarting = false // a [bgp] a reload adds later starts over
		return func() {}, nil
	}
	if err := d.openBGP(ctx, d.cfg.BGP); err != nil {
		return nil, err
	}
	d.announce()
	return func() { d.closeBGP("shutting down", true) }, nil
}

func (d *daemon) openBGP(ctx context.Context, c *config.BGP) error {
	rid, err := routerIDOf(c, d.cfg.Interface)
	if err != nil {
		return err
	}
	o := speakerOptions(c, rid)
	o.Log = d.log.With("component", "bgp")
	o.BFDCarried, d.bfdCarried = d.bfdCarried, nil // once: a later speaker starts over
	o.BFD, d.bfdEarly = d.bfdEarly, nil
	o.Restarting, d.bgpRestarting = d.bgpRestarting, false
	// What announce is about to announce goes in before any session can
	// come up: a restarting speaker's first End-of-RIB must carry it.
	for vip, w := range d.vipWants() {
		if w.announced {
			o.Announce = append(o.Announce, bgp.HostPrefix(vip))
		}
	}
	o.OnPeerChange = func(p bgp.PeerStatus) {
		d.events.add(control.RuleEvent{Kind: eventPeer, Backend: p.Address.String(), To: p.State, Reason: p.LastError, At: p.Since})
	}
	s, err := bgp.Start(ctx, o)
	if err != nil {
		return err
	}
	d.bgp.Store(&bgpRuntime{cfg: c, routerID: rid, speaker: s, vips: map[netip.Addr]vipDecision{}})
	d.log.Info("bgp speaker started", "local_as", c.LocalAS, "router_id", rid, "peers", len(c.Peers), "hold_time", c.HoldTime)
	return nil
}

// closeBGP withdraws every VIP (logged with reason), waits withdraw_delay
// when wait is set and something was announced, and closes the sessions.
func (d *daemon) closeBGP(reason string, wait bool) {
	b := d.bgp.Load()
	if b == nil {
		return
	}
	announced := len(b.speaker.Announced())
	b.mu.Lock()
	for vip, v := range b.vips {
		if v.announced {
			d.log.Info("bgp withdraw", "vip", vip, "reason", reason)
		}
		b.vips[vip] = vipDecision{reason: reason, since: time.Now()}
	}
	b.mu.Unlock()
	if err := b.speaker.WithdrawAll(); err != nil {
		d.log.Error("bgp withdraw", "err", err)
	}
	if wait && announced > 0 && b.cfg.WithdrawDelay > 0 {
		d.log.Info("bgp: every VIP withdrawn; waiting withdraw_delay before closing the sessions", "withdraw_delay", b.cfg.WithdrawDelay)
		time.Sleep(b.cfg.WithdrawDelay)
	}
	b.speaker.Close()
	d.bgp.Store(nil)
	d.log.Info("bgp speaker stopped", "reason", reason)
}

// detachBGP stops the speaker without withdrawing anything, for a
// hand-over: with graceful restart negotiated the routers keep the routes
// (stale) until the successor's speaker announces them again; without it
// they drop them when the sessions close and take them back when the
// successor announces, which moves flows meanwhile.
func (d *daemon) detachBGP() {
	b := d.bgp.Load()
	if b == nil {
		return
	}
	if b.cfg.GracefulRestart == 0 {
		d.log.Warn("bgp: handing over without graceful restart (bgp.graceful_restart = 0s): the routers drop this appliance's routes until the successor announces them")
	}
	b.speaker.Detach()
	d.bgp.Store(nil)
	d.log.Info("bgp speaker detached for the successor", "graceful_restart", b.cfg.GracefulRestart)
}

// holdBFD keeps the speaker's BFD sessions from closing or opening BGP
// sessions while a hand-over cuts over (bgp.Speaker.HoldBFD); false
// applies what changed meanwhile, after a hand-over that did not happen.
func (d *daemon) holdBFD(hold bool) {
	if b := d.bgp.Load(); b != nil {
		b.speaker.HoldBFD(hold)
	}
}

// announce makes every VIP's announcement follow the published state and
// the appliance drain. It runs on the control goroutine after every
// publication and every appliance drain or undrain. Every change goes to
// the speaker in one batch (bgp.Speaker.Update), so a thousand VIPs that
// become announceable together leave in a few UPDATEs.
func (d *daemon) announce() {
	b := d.bgp.Load()
	if b == nil {
		return
	}
	want := d.vipWants()
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drained = d.state.Appliance.Drained
	type change struct {
		vip  netip.Addr
		w    vipDecision
		gone bool // no rule has the VIP any more
	}
	var changes []change
	for vip, old := range b.vips {
		if _, still := want[vip]; !still {
			if old.announced {
				changes = append(changes, change{vip: vip, w: vipDecision{reason: "no rule has this VIP any more"}, gone: true})
			}
			delete(b.vips, vip)
		}
	}
	for vip, w := range want {
		old, had := b.vips[vip]
		switch {
		case had && old.announced == w.announced:
			old.reason = w.reason // the reason may change while the decision stays
			b.vips[vip] = old
		case !had && !w.announced:
			w.since = now
			b.vips[vip] = w
		default:
			changes = append(changes, change{vip: vip, w: w})
		}
	}
	if len(changes) == 0 {
		return
	}
	slices.SortFunc(changes, func(x, y change) int { return x.vip.Compare(y.vip) })
	var announce, withdraw []netip.Prefix
	for _, c := range changes {
		if c.w.announced {
			announce = append(announce, bgp.HostPrefix(c.vip))
		} else {
			withdraw = append(withdraw, bgp.HostPrefix(c.vip))
		}
	}
	if err := b.speaker.Update(announce, withdraw); err != nil {
		d.log.Error("bgp announce and withdraw", "announce", len(announce), "withdraw", len(withdraw), "err", err)
	}
	announced := map[netip.Prefix]bool{}
	for _, p := range b.speaker.Announced() {
		announced[p] = true
	}
	for _, c := range changes {
		p := bgp.HostPrefix(c.vip)
		if announced[p] != c.w.announced {
			continue // not applied: try again at the next publication
		}
		what := "withdrawn"
		if c.w.announced {
			what = "announced"
			d.log.Info("bgp announce", "vip", c.vip, "prefix", p, "reason", c.w.reason)
		} else {
			d.log.Info("bgp withdraw", "vip", c.vip, "prefix", p, "reason", c.w.reason)
		}
		d.events.add(control.RuleEvent{Kind: eventBGP, Backend: c.vip.String(), To: what, Reason: c.w.reason})
		if !c.gone {
			c.w.since = now
			b.vips[c.vip] = c.w
		}
	}
}

// vipWants is the announce decision of every VIP of the published rules:
// one pass groups the rules by VIP, then each VIP is decided on its own
// rules.
func (d *daemon) vipWants() map[netip.Addr]vipDecision {
	byVIP := map[netip.Addr][]*ruleStatus{}
	var order []netip.Addr
	for _, r := range d.Status().Rules {
		vip := r.VIP.Unmap()
		if _, seen := byVIP[vip]; !seen {
			order = append(order, vip)
		}
		byVIP[vip] = append(byVIP[vip], r)
	}
	drained, held := d.state.Appliance.Drained, d.fleetHold()
	want := make(map[netip.Addr]vipDecision, len(order))
	for _, vip := range order {
		ok, why := decideVIP(byVIP[vip], vip, drained, held)
		want[vip] = vipDecision{announced: ok, reason: why}
	}
	return want
}

// decideVIP says whether vip may be announced: the appliance is not
// drained, it has its fleet peers' exceptions (fleetHold, fleet.go: held
// is why not, "" when it has), every rule of the VIP has its first round
// of health checks in the published snapshot (warmup.go), and at least one
// of them can place a new flow on a usable backend. A rule in LAST_RESORT (nothing usable: new
// flows go to backends that fail their checks) or EMPTY (drop) cannot: in a
// fleet, appliances that see a usable backend take the traffic; when none
// does, the VIP is withdrawn everywhere, as ExaBGP's withdraw-on-down and
// vc5 do.
func decideVIP(rules []*ruleStatus, vip netip.Addr, drained bool, held string) (bool, string) {
	if drained {
		return false, "appliance drained (xlb appliance drain)"
	}
	if held != "" {
		return false, held
	}
	var cold, placing, stuck []string
	for _, r := range rules {
		if r.VIP.Unmap() != vip {
			continue
		}
		if !r.Warm {
			cold = append(cold, fmt.Sprintf("%s (%d backends without a verdict)", r.Name, len(r.Pending)))
		}
		if canPlace(r) {
			placing = append(placing, fmt.Sprintf("%s: %s, %d eligible", r.Name, r.Tier, r.Eligible))
		} else {
			stuck = append(stuck, r.Name+": "+r.Tier)
		}
	}
	switch {
	case len(cold) > 0:
		return false, "first round of health checks not finished: " + strings.Join(cold, ", ")
	case len(placing) == 0:
		return false, "no rule can place a new flow on a usable backend (" + strings.Join(stuck, ", ") + ")"
	}
	return true, "serving (" + strings.Join(placing, "; ") + ")"
}

func canPlace(r *ruleStatus) bool {
	if r.State == nil || r.Eligible == 0 {
		return false
	}
	switch r.State.Tier {
	case failover.TierPrimary, failover.TierFailover, failover.TierPrimaryFallback:
		return true
	}
	return false
}

// checkBGPReload refuses a reload that changes what a running speaker
// cannot change: its identity and hold time.
func checkBGPReload(old, new *config.BGP) error {
	if old == nil || new == nil {
		return nil
	}
	var changed []string
	if old.LocalAS != new.LocalAS {
		changed = append(changed, "bgp.local_as")
	}
	if old.RouterID != new.RouterID {
		changed = append(changed, "bgp.router_id")
	}
	if old.HoldTime != new.HoldTime {
		changed = append(changed, "bgp.hold_time")
	}
	if old.GracefulRestart != new.GracefulRestart {
		changed = append(changed, "bgp.graceful_restart")
	}
	if len(changed) > 0 {
		return fmt.Errorf("reload: %s cannot change while running (restart xlb)", strings.Join(changed, ", "))
	}
	return nil
}

// reloadBGP follows a reloaded [bgp]: a new table starts the speaker, a
// removed one withdraws and closes it at once (the appliance keeps
// serving), changed peers and attributes apply live.
func (d *daemon) reloadBGP(ctx context.Context) {
	c := d.cfg.BGP
	b := d.bgp.Load()
	switch {
	case c == nil && b == nil:
		return
	case c == nil:
		d.closeBGP("[bgp] removed from the configuration", false)
		return
	case b == nil:
		if err := d.openBGP(ctx, c); err != nil {
			d.log.Error("bgp: not started after reload", "err", err)
			return
		}
	default:
		if err := b.speaker.SetPeers(ctx, bgpPeers(c)); err != nil {
			d.log.Error("bgp peers after reload", "err", err)
		}
		if err := b.speaker.SetAttributes(bgpAttrs(c)); err != nil {
			d.log.Error("bgp attributes after reload", "err", err)
		}
		b.mu.Lock()
		b.cfg = c
		b.mu.Unlock()
	}
	d.announce()
}

// vipRow is one VIP's decision, for status and metrics.
type vipRow struct {
	vip netip.Addr
	vipDecision
}

// vipRows copies the announce decisions, sorted by VIP.
func (b *bgpRuntime) vipRows() []vipRow {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]vipRow, 0, len(b.vips))
	for vip, v := range b.vips {
		out = append(out, vipRow{vip, v})
	}
	slices.SortFunc(out, func(a, b vipRow) int { return a.vip.Compare(b.vip) })
	return out
}

func (b *bgpRuntime) isDrained() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.drained
}

// config returns the [bgp] the speaker runs with.
func (b *bgpRuntime) config() *config.BGP {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
}
