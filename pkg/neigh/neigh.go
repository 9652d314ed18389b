package neigh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
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

// Resolver looks next hops up in one network namespace.
type Resolver struct {
	ns   Namespace // nil: the caller's
	poll time.Duration
}

// Namespace is a network namespace that runs a function inside it (as
// netns.NS does): the Resolver opens its sockets there.
type Namespace interface {
	Do(func() error) error
}

// New returns a Resolver in the namespace ns; a nil ns means the caller's
// (the namespace of the threads that open a pass's sockets).
func New(ns Namespace) *Resolver {
	return &Resolver{ns: ns, poll: 20 * time.Millisecond}
}

// in runs open in the Resolver's namespace: sockets stay in the namespace
// they were opened in.
func (r *Resolver) in(open func() error) error {
	if r.ns == nil {
		return open()
	}
	return r.ns.Do(open)
}

// usable are the neighbour states whose MAC may be used as is. STALE,
// DELAY and PROBE are usable: the kernel is confirming them in the
// background, exactly as it does for its own traffic.
const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT | netlink.NUD_NOARP

// Route returns the next hop towards backend without resolving its MAC.
func (r *Resolver) Route(backend netip.Addr) (NextHop, error) {
	p := r.NewPass(1)
	defer p.Close()
	return p.Route(backend)
}

// Resolve returns the full next hop for backend, asking the kernel to
// resolve the neighbour if needed and polling until it is usable or ctx
// ends (then the error wraps ErrUnresolved).
func (r *Resolver) Resolve(ctx context.Context, backend netip.Addr) (NextHop, error) {
	p := r.NewPass(1)
	defer p.Close()
	return p.Resolve(ctx, backend)
}

// Pass resolves many backends as one: an interface's attributes and a
// gateway's (or on-link backend's) MAC are looked up once per pass and
// shared by every backend behind them, so 10 000 backends behind one
// router cost 10 000 route lookups and one neighbour lookup instead of
// four netlink requests each. Its answers are as fresh as the pass: make
// a new one for each refresh, and Close it. Safe for concurrent use; the
// route lookups of concurrent callers run in parallel, each on a socket
// of the pass that no other caller uses meanwhile.
type Pass struct {
	r *Resolver
	// sockets are the pass's route sockets (NewPass's parallel): a
	// caller takes one for a lookup and puts it back; a nil one is
	// opened when taken.
	sockets chan *routeSocket
	// h is the pass's netlink handle for links and neighbours (few
	// requests: one per interface and neighbour), opened on first use
	// (handle).
	hOnce sync.Once
	h     *netlink.Handle
	hErr  error
	mu    sync.Mutex
	links map[int]*memo[linkAttrs]
	macs  map[hop]*memo[net.HardwareAddr]
}

// maxRouteSockets bounds a pass's route sockets (and so the goroutines
// worth looking its routes up).
const maxRouteSockets = 8

// routeTaken, when set (by tests), is called with each route socket a
// lookup takes, while the lookup holds it.
var routeTaken func(*routeSocket)

// linkAttrs are what a next hop takes from its egress interface.
type linkAttrs struct {
	mac net.HardwareAddr
	mtu int
}

// hop is a neighbour to resolve: a gateway, or an on-link backend.
type hop struct {
	ifindex int
	addr    netip.Addr
}

// memo is one lookup of a pass, done once for all its callers.
type memo[T any] struct {
	once sync.Once
	v    T
	err  error
}

// NewPass starts a pass over r whose route lookups run up to parallel at
// once (at most 8), each on a socket of its own; parallel < 1 means one
// per Go P (GOMAXPROCS).
func (r *Resolver) NewPass(parallel int) *Pass {
	if parallel < 1 {
		parallel = runtime.GOMAXPROCS(0)
	}
	width := min(parallel, maxRouteSockets)
	p := &Pass{r: r, sockets: make(chan *routeSocket, width), links: map[int]*memo[linkAttrs]{}, macs: map[hop]*memo[net.HardwareAddr]{}}
	for range width {
		p.sockets <- nil
	}
	return p
}

// handle returns the pass's netlink handle, opened on first use.
func (p *Pass) handle() (*netlink.Handle, error) {
	p.hOnce.Do(func() {
		p.hErr = p.r.in(func() (err error) {
			p.h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
			return err
		})
		if p.hErr != nil {
			p.hErr = fmt.Errorf("open netlink handle: %w", p.hErr)
		}
	})
	return p.h, p.hErr
}

// Parallel is how many route lookups of the pass run at once: callers
// beyond it wait for a socket.
func (p *Pass) Parallel() int { return cap(p.sockets) }

// Close closes the pass's sockets; call it after the pass's last lookup.
func (p *Pass) Close() {
	for range cap(p.sockets) {
		if s := <-p.sockets; s != nil {
			s.close()
		}
	}
	p.hOnce.Do(func() {}) // not opened by now: never
	if p.h != nil {
		p.h.Close()
	}
}

// route looks dst's route up on a socket of the pass no other caller
// uses meanwhile.
func (p *Pass) route(dst netip.Addr) (route, error) {
	s := <-p.sockets
	if s == nil {
		var err error
		if err = p.r.in(func() (err error) { s, err = openRouteSocket(); return err }); err != nil {
			p.sockets <- nil
			return route{}, err
		}
	}
	defer func() { p.sockets <- s }()
	if routeTaken != nil {
		routeTaken(s)
	}
	return s.get(dst)
}

// memoOf returns m's entry for k, made on first use; p.mu guards m.
func memoOf[K comparable, T any](p *Pass, m map[K]*memo[T], k K) *memo[T] {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := m[k]
	if e == nil {
		e = new(memo[T])
		m[k] = e
	}
	return e
}

// Route is Resolver.Route within the pass.
func (p *Pass) Route(backend netip.Addr) (NextHop, error) {
	backend = backend.Unmap()
	rt, err := p.route(backend)
	if err != nil {
		return NextHop{}, fmt.Errorf("route to %s: %w", backend, err)
	}
	nh := NextHop{Backend: backend, Ifindex: rt.oif, Gateway: rt.gw.Unmap(), Src: rt.src.Unmap()}
	l := memoOf(p, p.links, rt.oif)
	l.once.Do(func() {
		h, err := p.handle()
		if err != nil {
			l.err = err
			return
		}
		link, err := h.LinkByIndex(rt.oif)
		if err != nil {
			l.err = fmt.Errorf("link %d: %w", rt.oif, err)
			return
		}
		// A copy: the attribute points into the netlink message, which
		// a kept next hop would otherwise keep whole.
		l.v = linkAttrs{mac: bytes.Clone(link.Attrs().HardwareAddr), mtu: link.Attrs().MTU}
	})
	if l.err != nil {
		return NextHop{}, fmt.Errorf("route to %s: %w", backend, l.err)
	}
	nh.SrcMAC, nh.MTU = l.v.mac, l.v.mtu
	if rt.mtu > 0 {
		nh.MTU = rt.mtu
	}
	return nh, nil
}

// Resolve is Resolver.Resolve within the pass: Route, then Neighbour.
func (p *Pass) Resolve(ctx context.Context, backend netip.Addr) (NextHop, error) {
	nh, err := p.Route(backend)
	if err != nil {
		return NextHop{}, err
	}
	return p.Neighbour(ctx, nh)
}

// Neighbour fills in the MAC of a routed next hop: the gateway's, or the
// on-link backend's. The neighbour behind several backends is resolved
// once per pass, by the first of them to ask (with its ctx).
func (p *Pass) Neighbour(ctx context.Context, nh NextHop) (NextHop, error) {
	target := nh.Gateway
	if !target.IsValid() {
		target = nh.Backend
	}
	m := memoOf(p, p.macs, hop{nh.Ifindex, target})
	m.once.Do(func() { m.v, m.err = p.resolveMAC(ctx, nh.Ifindex, target) })
	if m.err != nil {
		return NextHop{}, fmt.Errorf("resolve %s via %s: %w", nh.Backend, target, m.err)
	}
	nh.DstMAC = m.v
	return nh, nil
}

// resolveMAC returns the MAC of target on the interface, asking the
// kernel to resolve it if it has no usable entry and polling until it has
// one or ctx ends.
func (p *Pass) resolveMAC(ctx context.Context, ifindex int, target netip.Addr) (net.HardwareAddr, error) {
	kicked := false
	// ARP on the link answers in well under a millisecond: poll soon,
	// then less often (every backend behind the neighbour waits for it).
	wait := time.Millisecond
	for {
		mac, err := p.lookup(ifindex, target)
		if err != nil {
			return nil, err
		}
		if mac != nil {
			return mac, nil
		}
		if !kicked {
			if err := p.kick(ifindex, target); err != nil {
				return nil, err
			}
			kicked = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%v)", ErrUnresolved, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, p.r.poll)
	}
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// lookup returns the MAC of a usable neighbour entry for ip, or nil.
func (p *Pass) lookup(ifindex int, ip netip.Addr) (net.HardwareAddr, error) {
	h, err := p.handle()
	if err != nil {
		return nil, err
	}
	neighs, err := h.NeighList(ifindex, family(ip))
	if err != nil {
		return nil, fmt.Errorf("list neighbours of link %d: %w", ifindex, err)
	}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || a.Unmap() != ip {
			continue
		}
		if n.State&usable != 0 && len(n.HardwareAddr) == 6 {
			return bytes.Clone(n.HardwareAddr), nil // not the dump's buffer
		}
	}
	return nil, nil
}

// kick asks the kernel to resolve ip on ifindex (NTF_USE).
func (p *Pass) kick(ifindex int, ip netip.Addr) error {
	n := &netlink.Neigh{
		LinkIndex: ifindex,
		Family:    family(ip),
		IP:        net.IP(ip.AsSlice()),
		Flags:     netlink.NTF_USE,
		State:     netlink.NUD_NONE,
	}
	h, err := p.handle()
	if err != nil {
		return err
	}
	if err := h.NeighSet(n); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("request neighbour resolution of %s: %w", ip, err)
	}
	return nil
}
