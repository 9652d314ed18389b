package neigh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NextHop is where frames for one backend go.
type NextHop struct {
	Backend netip.Addr       // the backend's address
	Gateway netip.Addr       // the router's address; invalid when the backend is on the link
	Ifindex int              // egress interface
	Src     netip.Addr       // the kernel's preferred source address towards the backend
	SrcMAC  net.HardwareAddr // the egress interface's MAC
	DstMAC  net.HardwareAddr // the gateway's (or on-link backend's) MAC
	MTU     int              // route MTU if set, else the interface MTU
}

// OnLink reports whether the backend is directly on the egress link.
func (n NextHop) OnLink() bool { return !n.Gateway.IsValid() }

// ErrUnresolved says the neighbour (ARP/ND) entry did not become usable in
// time; the backend must stay ineligible.
var ErrUnresolved = errors.New("neighbour not resolved")

// Resolver looks next hops up through one netlink handle (and so in one
// network namespace).
type Resolver struct {
	h    *netlink.Handle
	poll time.Duration
}

// New returns a Resolver over h; a nil h means the caller's namespace.
func New(h *netlink.Handle) *Resolver {
	if h == nil {
		h = &netlink.Handle{}
	}
	return &Resolver{h: h, poll: 20 * time.Millisecond}
}

// usable are the neighbour states whose MAC may be used as is. STALE,
// DELAY and PROBE are usable: the kernel is confirming them in the
// background, exactly as it does for its own traffic.
const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT | netlink.NUD_NOARP

// Route returns the next hop towards backend without resolving its MAC.
func (r *Resolver) Route(backend netip.Addr) (NextHop, error) {
	backend = backend.Unmap()
	routes, err := r.h.RouteGet(net.IP(backend.AsSlice()))
	if err != nil {
		return NextHop{}, fmt.Errorf("route to %s: %w", backend, err)
	}
	if len(routes) == 0 {
		return NextHop{}, fmt.Errorf("route to %s: no route", backend)
	}
	rt := routes[0]
	nh := NextHop{Backend: backend, Ifindex: rt.LinkIndex}
	if rt.Gw != nil {
		gw, ok := netip.AddrFromSlice(rt.Gw)
		if !ok {
			return NextHop{}, fmt.Errorf("route to %s: bad gateway %v", backend, rt.Gw)
		}
		nh.Gateway = gw.Unmap()
	}
	if rt.Src != nil {
		if src, ok := netip.AddrFromSlice(rt.Src); ok {
			nh.Src = src.Unmap()
		}
	}
	link, err := r.h.LinkByIndex(rt.LinkIndex)
	if err != nil {
		return NextHop{}, fmt.Errorf("route to %s: link %d: %w", backend, rt.LinkIndex, err)
	}
	nh.SrcMAC = link.Attrs().HardwareAddr
	nh.MTU = link.Attrs().MTU
	if rt.MTU > 0 {
		nh.MTU = rt.MTU
	}
	return nh, nil
}

// Resolve returns the next hop towards backend with its MAC, asking the
// kernel to resolve the neighbour when needed and waiting until it is
// usable or ctx ends (then the error wraps ErrUnresolved).
func (r *Resolver) Resolve(ctx context.Context, backend netip.Addr) (NextHop, error) {
	nh, err := r.Route(backend)
	if err != nil {
		return NextHop{}, err
	}
	target := nh.Gateway
	if !target.IsValid() {
		target = nh.Backend
	}
	kicked := false
	for {
		mac, err := r.lookup(nh.Ifindex, target)
		if err != nil {
			return NextHop{}, err
		}
		if mac != nil {
			nh.DstMAC = mac
			return nh, nil
		}
		if !kicked {
			if err := r.kick(nh.Ifindex, target); err != nil {
				return NextHop{}, err
			}
			kicked = true
		}
		select {
		case <-ctx.Done():
			return NextHop{}, fmt.Errorf("resolve %s via %s: %w (%v)", backend, target, ErrUnresolved, ctx.Err())
		case <-time.After(r.poll):
		}
	}
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// lookup returns the MAC of a usable neighbour entry for ip, or nil.
func (r *Resolver) lookup(ifindex int, ip netip.Addr) (net.HardwareAddr, error) {
	neighs, err := r.h.NeighList(ifindex, family(ip))
	if err != nil {
		return nil, fmt.Errorf("list neighbours of link %d: %w", ifindex, err)
	}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || a.Unmap() != ip {
			continue
		}
		if n.State&usable != 0 && len(n.HardwareAddr) == 6 {
			return n.HardwareAddr, nil
		}
	}
	return nil, nil
}

// kick asks the kernel to resolve ip on ifindex (NTF_USE).
func (r *Resolver) kick(ifindex int, ip netip.Addr) error {
	n := &netlink.Neigh{
		LinkIndex: ifindex,
		Family:    family(ip),
		IP:        net.IP(ip.AsSlice()),
		Flags:     netlink.NTF_USE,
		State:     netlink.NUD_NONE,
	}
	if err := r.h.NeighSet(n); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("request neighbour resolution of %s: %w", ip, err)
	}
	return nil
}
