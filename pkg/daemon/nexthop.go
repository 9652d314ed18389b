package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/engine"
	"github.com/xlbnet/xlb/pkg/neigh"
	"github.com/xlbnet/xlb/pkg/packet"
)

type nhKey struct {
	addr   netip.Addr
	direct bool
}

type nexthop struct {
	nh  neigh.NextHop
	err error
}

// resolveAll resolves the next hop of every backend, forgets those of
// backends gone, and returns the backends whose next hop changed (or was
// resolved or lost).
func (d *daemon) resolveAll(ctx context.Context) map[netip.Addr]bool {
	return d.resolve(ctx, nil)
}

// resolveNew resolves the backends of the named rules that have no next
// hop yet (a reload's new backends); the periodic resolveAll refreshes the
// others and forgets the ones gone.
func (d *daemon) resolveNew(ctx context.Context, rules []string) map[netip.Addr]bool {
	if len(rules) == 0 {
		return nil
	}
	only := make(map[string]bool, len(rules))
	for _, r := range rules {
		only[r] = true
	}
	return d.resolve(ctx, only)
}

// resolve resolves every backend (only == nil) or the backends of the
// rules in only that have no next hop yet.
func (d *daemon) resolve(ctx context.Context, only map[string]bool) map[netip.Addr]bool {
	want := map[nhKey]bool{}
	for _, r := range d.cfg.Rules {
		if only != nil && !only[r.Name] {
			continue
		}
		for gi := range r.Groups {
			for _, b := range r.Groups[gi].Backends {
				want[nhKey{b.Addr, r.Encap.Type == config.EncapDirect}] = true
			}
		}
		// A backend a reload removed keeps its next hop while its
		// connections drain: without a template they would be dropped
		// (no-next-hop) at once, whatever connection_draining_timeout says.
		if rt := d.rules[r.Name]; rt != nil {
			for addr := range rt.removed {
				want[nhKey{addr, r.Encap.Type == config.EncapDirect}] = true
			}
		}
	}
	if only != nil {
		for k := range want {
			if _, had := d.nexthops[k]; had {
				delete(want, k)
			}
		}
	}
	changed := map[netip.Addr]bool{}
	if len(want) > 0 {
		d.resolvePass(ctx, want, changed)
	}
	if only == nil {
		for k := range d.nexthops {
			if !want[k] {
				d.forgetNextHop(k) // and from the state document (docparts.go)
			}
		}
	}
	return changed
}

// resolvePass resolves the next hops of want in one pass and records them
// in d.nexthops, and in changed the backends whose next hop changed.
// The backends behind a router share its lookups (one neighbour, one
// interface). Routes first, by as many goroutines as the pass looks
// routes up at once (10 000 backends are 10 000 route lookups, not
// 10 000 goroutines); then one goroutine per neighbour, as each may wait
// up to 2 s for ARP or neighbour discovery. Each goroutine writes its own
// elements of found; d.nexthops is written on the caller's goroutine.
func (d *daemon) resolvePass(ctx context.Context, want map[nhKey]bool, changed map[netip.Addr]bool) {
	pass := d.resolver.NewPass(engine.ControlProcs()) // not the workers' Ps
	defer pass.Close()
	keys := slices.Collect(maps.Keys(want))
	found := make([]nexthop, len(keys))
	var next atomic.Int64 // the next key to route
	var wg sync.WaitGroup
	for range min(len(keys), pass.Parallel()) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(keys); i = int(next.Add(1) - 1) {
				found[i].nh, found[i].err = pass.Route(keys[i].addr)
			}
		})
	}
	wg.Wait()
	type neighbour struct { // the gateway, or the on-link backend
		ifindex int
		addr    netip.Addr
	}
	behind := map[neighbour][]int{} // indices into keys and found
	for i, r := range found {
		if r.err == nil {
			n := neighbour{r.nh.Ifindex, r.nh.Gateway}
			if !n.addr.IsValid() {
				n.addr = r.nh.Backend
			}
			behind[n] = append(behind[n], i)
		}
	}
	for _, is := range behind {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			for _, i := range is { // the first waits; the others share its answer
				found[i].nh, found[i].err = pass.Neighbour(rctx, found[i].nh)
			}
		})
	}
	wg.Wait()
	srcs := map[[2]int]nexthop{} // the interfaces' addresses, by ifindex and family (interfaceAddr)
	var news nextHopLog
	if len(d.nexthops) == 0 { // the start: every backend is new, grow the map once
		d.nexthops = make(map[nhKey]nexthop, len(keys))
	}
	for i, k := range keys {
		nh, err := found[i].nh, found[i].err
		if err == nil && k.direct && !nh.OnLink() {
			err = fmt.Errorf("DIRECT backend %s is not on the link (route via %s)", k.addr, nh.Gateway)
		}
		if err == nil && !nh.Src.IsValid() {
			key := [2]int{nh.Ifindex, 6}
			if k.addr.Is4() {
				key[1] = 4
			}
			s, ok := srcs[key]
			if !ok {
				s.nh.Src, s.err = interfaceAddr(nh.Ifindex, k.addr.Is4())
				srcs[key] = s
			}
			nh.Src, err = s.nh.Src, s.err
		}
		old, had := d.nexthops[k]
		docChanged := !had || !sameNextHop(old.nh, nh) || errText(old.err) != errText(err)
		if !had || (old.err == nil) != (err == nil) || (err == nil && !sameNextHop(old.nh, nh)) {
			changed[k.addr] = true
			if err != nil {
				d.log.Warn("backend next hop unresolved: not eligible", "backend", k.addr, "err", err)
			} else {
				news.add(nh)
			}
		}
		d.setNextHop(k, nexthop{nh: nh, err: err}, docChanged) // and its state document's bucket (docparts.go)
	}
	news.write(d.log)
}

// nextHopLog gathers the new next hops of a pass by where they lead, so
// the thousands of backends behind one router at start are one line
// (with their count and a few of them), not one each: a line per backend
// was a tenth of the pass's CPU at 10 000 backends, and filled
// journald's default burst (10 000 messages in 30 s).
type nextHopLog struct {
	by    map[nextHopWay]*nextHopGroup
	order []nextHopWay
}

// nextHopWay is where a next hop sends frames.
type nextHopWay struct {
	gateway netip.Addr
	ifindex int
	mac     [6]byte
	mtu     int
}

type nextHopGroup struct {
	n     int
	first []netip.Addr // the first few backends, for the log line
}

// logFirst is how many backends a group's line names.
const logFirst = 3

func (l *nextHopLog) add(nh neigh.NextHop) {
	w := nextHopWay{gateway: nh.Gateway, ifindex: nh.Ifindex, mtu: nh.MTU}
	copy(w.mac[:], nh.DstMAC)
	g := l.by[w]
	if g == nil {
		if l.by == nil {
			l.by = map[nextHopWay]*nextHopGroup{}
		}
		g = &nextHopGroup{}
		l.by[w] = g
		l.order = append(l.order, w)
	}
	g.n++
	if len(g.first) < logFirst {
		g.first = append(g.first, nh.Backend)
	}
}

// write logs a line per group: as before for a single backend, with the
// count and the first few for more.
func (l *nextHopLog) write(log *slog.Logger) {
	for _, w := range l.order {
		g := l.by[w]
		mac := net.HardwareAddr(w.mac[:]).String()
		if g.n == 1 {
			log.Info("backend next hop", "backend", g.first[0], "gateway", w.gateway, "mac", mac, "mtu", w.mtu)
			continue
		}
		log.Info("backend next hops", "backends", g.n, "first", g.first, "gateway", w.gateway, "mac", mac, "mtu", w.mtu)
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func sameNextHop(a, b neigh.NextHop) bool {
	return a.Gateway == b.Gateway && a.Ifindex == b.Ifindex && a.Src == b.Src && a.MTU == b.MTU &&
		string(a.DstMAC) == string(b.DstMAC) && string(a.SrcMAC) == string(b.SrcMAC)
}

// interfaceAddr returns a global address of the family on the interface,
// for the outer source when the route names none.
func interfaceAddr(ifindex int, v4 bool) (netip.Addr, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return netip.Addr{}, err
	}
	fam := netlink.FAMILY_V6
	if v4 {
		fam = netlink.FAMILY_V4
	}
	addrs, err := netlink.AddrList(l, fam)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if ok && ip.IsGlobalUnicast() {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %d has no global %s address for the outer header", ifindex, map[bool]string{true: "IPv4", false: "IPv6"}[v4])
}

// template builds the encapsulation towards one backend from its next hop.
func (d *daemon) template(r *config.Rule, addr netip.Addr) (*encap.Template, error) {
	nhs, ok := d.nexthops[nhKey{addr, r.Encap.Type == config.EncapDirect}]
	if !ok || nhs.err != nil {
		return nil, fmt.Errorf("next hop of %s unresolved", addr)
	}
	nh := nhs.nh
	var src, dst [6]byte
	copy(src[:], nh.SrcMAC)
	copy(dst[:], nh.DstMAC)
	inner := packet.IPv4
	if r.VIP.Is6() && !r.VIP.Is4In6() {
		inner = packet.IPv6
	}
	return d.templates.of(encap.Spec{
		Kind: encapKinds.of(r.Encap.Type), SrcMAC: src, DstMAC: dst,
		Src: nh.Src, Dst: addr, Inner: inner, GUEPort: r.Encap.GUEPort, MTU: nh.MTU,
	})
}

// templateCache shares one encapsulation template among the rules that
// send to a backend the same way (a backend in ten rules of one
// encapsulation has one template, not ten: 16 MB at 1000 rules × 100
// backends). Templates are immutable; the cache holds them weakly, so
// memory follows what the published snapshots reference. Control
// goroutine only.
type templateCache struct {
	live map[encap.Spec]weak.Pointer[encap.Template]
	// sweepAt is the size at which the collected templates' entries are
	// dropped: twice the live ones after a sweep, so sweeps cost O(1) a
	// template.
	sweepAt int
}

// of returns the live template of s, or builds one.
func (c *templateCache) of(s encap.Spec) (*encap.Template, error) {
	if t := c.live[s].Value(); t != nil {
		return t, nil
	}
	t, err := encap.NewTemplate(s)
	if err != nil {
		return nil, err
	}
	if c.live == nil {
		c.live = map[encap.Spec]weak.Pointer[encap.Template]{}
	}
	if len(c.live) >= c.sweepAt {
		maps.DeleteFunc(c.live, func(_ encap.Spec, p weak.Pointer[encap.Template]) bool { return p.Value() == nil })
		c.sweepAt = 2*len(c.live) + 1024
	}
	c.live[s] = weak.Make(t)
	return t, nil
}
