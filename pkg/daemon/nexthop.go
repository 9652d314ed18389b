package daemon

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"time"
	"weak"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/encap"
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
				delete(d.nexthops, k)
			}
		}
	}
	return changed
}

// resolvePass resolves the next hops of want in one pass and records them
// in d.nexthops, and in changed the backends whose next hop changed.
// The backends behind a router share its lookups (one neighbour, one
// interface). Routes first, by a few goroutines (10 000 backends are
// 10 000 route lookups, not 10 000 goroutines); then one goroutine per
// neighbour, as each may wait up to 2 s for ARP or neighbour discovery;
// d.nexthops is written on the caller's goroutine.
func (d *daemon) resolvePass(ctx context.Context, want map[nhKey]bool, changed map[netip.Addr]bool) {
	pass := d.resolver.NewPass()
	defer pass.Close()
	routed := make(map[nhKey]nexthop, len(want))
	var mu sync.Mutex
	var wg sync.WaitGroup
	keys := make(chan nhKey)
	for range min(len(want), resolvers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				nh, err := pass.Route(k.addr)
				mu.Lock()
				routed[k] = nexthop{nh: nh, err: err}
				mu.Unlock()
			}
		}()
	}
	for k := range want {
		keys <- k
	}
	close(keys)
	wg.Wait()
	type neighbour struct { // the gateway, or the on-link backend
		ifindex int
		addr    netip.Addr
	}
	behind := map[neighbour][]nhKey{}
	for k, r := range routed {
		if r.err == nil {
			n := neighbour{r.nh.Ifindex, r.nh.Gateway}
			if !n.addr.IsValid() {
				n.addr = r.nh.Backend
			}
			behind[n] = append(behind[n], k)
		}
	}
	// Every group's routes are read before the first goroutine starts:
	// they write routed (a read beside them killed the daemon with a
	// concurrent map read and write).
	routes := map[neighbour][]nexthop{}
	for n, ks := range behind {
		for _, k := range ks {
			routes[n] = append(routes[n], routed[k])
		}
	}
	for n, ks := range behind {
		rs := routes[n]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			for i, k := range ks { // the first waits; the others share its answer
				nh, err := pass.Neighbour(rctx, rs[i].nh)
				mu.Lock()
				routed[k] = nexthop{nh: nh, err: err}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	srcs := map[[2]int]nexthop{} // the interfaces' addresses, by ifindex and family (interfaceAddr)
	for k, r := range routed {
		nh, err := r.nh, r.err
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
		if !had || (old.err == nil) != (err == nil) || (err == nil && !sameNextHop(old.nh, nh)) {
			changed[k.addr] = true
			if err != nil {
				d.log.Warn("backend next hop unresolved: not eligible", "backend", k.addr, "err", err)
			} else {
				d.log.Info("backend next hop", "backend", k.addr, "gateway", nh.Gateway, "mac", nh.DstMAC.String(), "mtu", nh.MTU)
			}
		}
		d.nexthops[k] = nexthop{nh: nh, err: err}
	}
}

// resolvers are the goroutines that look the routes of a pass up.
const resolvers = 8

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
