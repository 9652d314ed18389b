package probepath

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"

	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/packet"
)

// Route is how the packets of one target travel: what a worker does with
// a packet of the target's rule that it places on this backend.
type Route struct {
	// VIP is the rule's address: where the target's probes go.
	VIP netip.Addr
	// Template is the backend's encapsulation as published to the workers
	// (its next hop's MAC, the outer addresses, the MTU).
	Template *encap.Template
	// Seed is the fleet-wide hash seed: a probe's flow hash (GUE source
	// port, IPv6 flow label) is the one a worker computes for its flow.
	Seed uint64
}

// Routes returns the route of a target, or why it has none (no next hop,
// no template). It is called by Dial and for every probe packet, from
// several goroutines at once, so it must be safe for concurrent use and
// quick.
type Routes func(health.Key) (Route, error)

// Options configure a Path.
type Options struct {
	// Interface is the appliance's interface (the one the workers serve):
	// probe packets leave by it.
	Interface string
	// Routes tells the path how each target's packets travel. Required.
	Routes Routes
	// Namespace is where the TUN, the policy rules and every socket live;
	// nil means the calling process's namespace.
	Namespace *netns.NS
	// Log receives what the path sets up and removes; nil: slog.Default().
	Log *slog.Logger
}

// Path is one daemon's data path for health probes: a TUN device its
// marked probe sockets route into, the policy rules that send them there,
// the registry of their local ports and the goroutine that encapsulates
// what they send. Dial is its health.DialFunc.
type Path struct {
	o     Options
	log   *slog.Logger
	slot  int
	tun   string // the TUN's name, TUNPrefix + slot
	mark  uint32 // the probe sockets' SO_MARK, also the routing table
	mtu   int    // the TUN's MTU
	ifidx int    // the interface's index
	noV6  error  // why IPv6 VIPs cannot be probed (nil: they can)

	tunFile *os.File // the TUN queue the reader owns
	tx      *os.File // AF_PACKET socket bound to the interface
	reg     registry
	addrs   addrCache
	ipID    atomic.Uint32 // outer IPv4 identification (reader and parked sends)
	stats   counters
	done    chan struct{} // closed when the reader has returned

	closeOnce sync.Once
	closeErr  error
}

// Stats counts what the path did. Safe to read from any goroutine.
type Stats struct {
	Dials      uint64 // probe connections dialled through the path
	Sent       uint64 // probe packets encapsulated and sent
	Unmatched  uint64 // packets out of the TUN that belong to no registered probe
	Parked     uint64 // SYNs read before their probe registered (sent once it did)
	NoRoute    uint64 // probe packets whose target had no route (no next hop)
	TooBig     uint64 // probe packets that did not fit their backend's path
	Failed     uint64 // probe packets the encapsulation or the send refused
	ReadErrors uint64 // failed reads of the TUN
}

type counters struct {
	dials, sent, unmatched, parked, noRoute, tooBig, failed, readErrors atomic.Uint64
}

// Stats returns the path's counters.
func (p *Path) Stats() Stats {
	c := &p.stats
	return Stats{Dials: c.dials.Load(), Sent: c.sent.Load(), Unmatched: c.unmatched.Load(), Parked: c.parked.Load(), NoRoute: c.noRoute.Load(),
		TooBig: c.tooBig.Load(), Failed: c.failed.Load(), ReadErrors: c.readErrors.Load()}
}

// Name returns the TUN device's name; Mark the probe sockets' mark (and
// routing table); MTU the TUN's MTU.
func (p *Path) Name() string { return p.tun }

// Mark returns the SO_MARK of the probe sockets, which is also the number
// of the routing table the policy rule sends them to.
func (p *Path) Mark() uint32 { return p.mark }

// MTU returns the TUN's MTU: the interface's minus MaxOverhead.
func (p *Path) MTU() int { return p.mtu }

// Open sets up a data path for probes on Options.Interface: it takes the
// first free slot (a TUN named TUNPrefix + slot that no other process
// holds), replaces the policy rules a crashed owner of that slot left,
// routes the slot's mark into the TUN and starts the reader.
func Open(o Options) (*Path, error) {
	if o.Routes == nil {
		return nil, errors.New("probe path: no Routes")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	p := &Path{o: o, log: o.Log, done: make(chan struct{})}
	p.reg.init()
	if err := p.in(p.setUp); err != nil {
		p.in(p.tearDown)
		return nil, fmt.Errorf("probe path on %s: %w", o.Interface, err)
	}
	go p.read()
	p.log.Info("data-path probes", "tun", p.tun, "mtu", p.mtu, "fwmark", fmt.Sprintf("%#x", p.mark), "table", p.mark, "rule_priority", RulePriority)
	return p, nil
}

// Close removes the policy rules and the TUN (its routes go with it) and
// stops the reader. Probes in flight fail. Safe to call more than once.
func (p *Path) Close() error {
	p.closeOnce.Do(func() {
		p.closeErr = p.in(p.tearDown)
		<-p.done
		p.log.Info("data-path probes stopped", "tun", p.tun)
	})
	return p.closeErr
}

// in runs f in the path's namespace.
func (p *Path) in(f func() error) error {
	if p.o.Namespace == nil {
		return f()
	}
	return p.o.Namespace.Do(f)
}

// Frame layout of the reader's buffer: the IP packet read from the TUN
// sits behind room for the outer headers and an Ethernet header, so the
// encapsulation writes in front of it as a worker's does in a UMEM chunk.
const (
	headroom  = 64 // ≥ the most any template writes in front of the IP packet (encap: 56)
	ethLen    = 14
	maxPacket = 1 << 16
)

// read is the reader goroutine: one packet from the TUN, one frame out.
func (p *Path) read() {
	defer close(p.done)
	buf := make([]byte, headroom+ethLen+maxPacket)
	var m packet.Meta
	for {
		n, err := p.tunFile.Read(buf[headroom+ethLen:])
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			p.stats.readErrors.Add(1)
			continue
		}
		p.send(buf, n, &m, true)
	}
}

// send encapsulates the packet of n bytes at buf[headroom+ethLen:] and
// sends it on the interface; park lets an unregistered SYN wait for its
// registration.
func (p *Path) send(buf []byte, n int, m *packet.Meta, park bool) {
	off, l, e, v := p.encapsulate(buf, n, m, uint16(p.ipID.Add(1)), park)
	if v != sent {
		p.count(v)
		return
	}
	if _, err := p.tx.Write(buf[off : off+l]); err != nil {
		p.stats.failed.Add(1)
		e.noteErr(fmt.Errorf("send on %s: %w", p.o.Interface, err))
		return
	}
	p.stats.sent.Add(1)
	e.sent.Add(1)
}

// sendParked sends a packet the reader parked until its probe registered
// (on the dialling goroutine, with a buffer of its own: rare).
func (p *Path) sendParked(pkt []byte) {
	buf := make([]byte, headroom+ethLen+len(pkt))
	copy(buf[headroom+ethLen:], pkt)
	var m packet.Meta
	p.send(buf, len(pkt), &m, false)
}

// verdict is what became of one packet out of the TUN.
type verdict uint8

const (
	sent      verdict = iota // encapsulated: send buf[off:off+l]
	unmatched                // not a registered probe's packet
	parked                   // a SYN waiting for its probe's registration
	noRoute                  // the target has no route
	tooBig                   // does not fit the backend's path
	failed                   // the encapsulation refused it
)

func (p *Path) count(v verdict) {
	switch v {
	case unmatched:
		p.stats.unmatched.Add(1)
	case parked:
		p.stats.parked.Add(1)
	case noRoute:
		p.stats.noRoute.Add(1)
	case tooBig:
		p.stats.tooBig.Add(1)
	case failed:
		p.stats.failed.Add(1)
	}
}

// encapsulate turns the IP packet of n bytes at buf[headroom+ethLen:] into
// the frame for its probe's backend, in place, the way a worker turns a
// client's packet: Parse, then the backend's template with the flow hash
// a worker would use. On sent the frame is buf[off:off+l] and e its probe;
// otherwise the probe (when there is one) has a note saying why. With
// park, a TCP SYN of a flow not registered yet waits for its registration.
func (p *Path) encapsulate(buf []byte, n int, m *packet.Meta, ipID uint16, park bool) (off, l int, e *entry, v verdict) {
	frame := buf[headroom : headroom+ethLen+n]
	clear(frame[:12]) // the template writes both MACs
	switch frame[ethLen] >> 4 {
	case 4:
		frame[12], frame[13] = 0x08, 0x00
	case 6:
		frame[12], frame[13] = 0x86, 0xdd
	default:
		return 0, 0, nil, unmatched
	}
	if packet.ParseInto(frame, m) != packet.OK || m.Frag != packet.FragNone ||
		(m.Proto != packet.ProtoTCP && m.Proto != packet.ProtoUDP) {
		return 0, 0, nil, unmatched
	}
	syn := m.Proto == packet.ProtoTCP && m.TCPFlags&(packet.TCPFlagSYN|packet.TCPFlagACK) == packet.TCPFlagSYN
	k := flowKey{src: m.Src, dst: m.Dst, sport: m.SrcPort, dport: m.DstPort, proto: m.Proto}
	if e = p.reg.get(k, frame[ethLen:], park && syn); e == nil {
		if park && syn {
			return 0, 0, nil, parked
		}
		return 0, 0, nil, unmatched
	}
	r, err := p.o.Routes(e.key)
	if err == nil && r.Template == nil {
		err = errNoTemplate
	}
	if err != nil {
		e.noteErr(fmt.Errorf("no route to backend %s: %w", e.key.Backend, err))
		return 0, 0, e, noRoute
	}
	t := r.Template
	var h uint64
	if t.UsesFlowHash() {
		h = hash.SelectionHash(m, hash.AffinityNone, r.Seed)
	}
	off, l, res := t.Encap(buf, headroom, len(frame), m, h, ipID)
	switch res {
	case encap.OK:
		return off, l, e, sent
	case encap.TooBig, encap.NeedFragments, encap.DropTooBig:
		e.noteErr(fmt.Errorf("a %d-byte probe packet does not fit the %s path to %s (MTU %d leaves %d bytes inside)",
			n, t.Kind(), e.key.Backend, t.MTU(), t.InnerMTU()))
		return 0, 0, e, tooBig
	}
	e.noteErr(fmt.Errorf("%s encapsulation to %s refused a probe packet: %s", t.Kind(), e.key.Backend, res))
	return 0, 0, e, failed
}

var errNoTemplate = errors.New("no encapsulation template")
