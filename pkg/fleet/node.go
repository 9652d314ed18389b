package fleet

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/spsc"
)

// Options configure a Node.
type Options struct {
	// Listen is this appliance's fleet address, bound with Port and sent
	// as the datagrams' sender; a peer knows the appliance by it.
	Listen netip.Addr
	// Port is the UDP port of every appliance's node.
	Port uint16
	// Peers are the other appliances' fleet addresses (Listen, if listed,
	// is left out).
	Peers []netip.Addr
	// Keys authenticate every datagram (the first signs).
	Keys *Keyring

	// Table receives the peers' exceptions; the workers consult it
	// (dataplane.FlowTables.Peers). The node is its only writer and gives
	// it a presence filter.
	Table *conntrack.Shared
	// Outboxes are the workers' hand-off rings (dataplane.Worker.
	// ShareExceptions), one per queue.
	Outboxes []*spsc.Ring[dataplane.Sighting]
	// Sessions is the PER_SESSION session table, whose exceptions the node
	// finds itself every Refresh; nil: none.
	Sessions *conntrack.Shared
	// Snapshot returns the workers' current snapshot.
	Snapshot func() *dataplane.Snapshot
	// Clock is the workers' clock (entries' deadlines).
	Clock conntrack.Clock

	// Refresh is how often an owned exception still in use is sent again
	// (the workers scan at the same interval); well within the idle
	// timeouts. Default 10 s.
	Refresh time.Duration
	// SendRate bounds the records per second sent to each peer (bursts of
	// a quarter second). Default 50 000.
	SendRate int
	// JoinTimeout bounds how long Joined waits for peers' syncs. Default 5 s.
	JoinTimeout time.Duration
	// Heartbeat is how often a HELLO goes to every peer. Default 1 s.
	Heartbeat time.Duration
	// OnJoin, when set, is called (on the node's goroutine) when a join
	// ends: every peer synced, or the timeout fired with peers missing. It
	// must not wait for anything that waits for the node.
	OnJoin func(JoinResult)
	// Joined starts the node joined: its table already holds the peers'
	// exceptions (handed over by the process it succeeds). It still asks
	// every peer for its exceptions once it proves the peer's epoch.
	Joined bool

	Log *slog.Logger
}

// Node is one appliance's end of fleet flow-state sharing: a UDP socket,
// a goroutine that reads it, and one that owns everything else (see
// doc.go "Goroutines").
type Node struct {
	o     Options
	conn  *net.UDPConn
	epoch uint64
	log   *slog.Logger

	peers  []*peer
	byAddr map[netip.Addr]*peer
	recv   *Keyring // the loop's
	send   *Keyring

	in      chan []byte // datagrams from the reader
	bufs    chan []byte // free datagram buffers
	joinRQ  chan struct{}
	stRQ    chan chan Status
	queries chan func()
	done    chan struct{}
	wg      sync.WaitGroup

	// Loop state (the loop goroutine only).
	res         resolved
	own         owner
	join        joinState
	held        int
	rate        tokens
	lastHB      time.Time
	rebuilt     time.Time
	stored      int // live entries of the table at the last presence rebuild
	sessPass    uint32
	sessNext    time.Time
	sessPlan    uint64
	scratch     []Record
	body        recordsBody
	out         []byte // the datagram being sent
	scratchBody []byte
	drops       [numReasons]uint64 // of datagrams from no configured peer
	recvOver    atomic.Uint64      // datagrams the kernel dropped on the socket: the loop was behind (the reader stores it)
	joined      atomic.Bool        // Joined
}

// Defaults.
const (
	defaultRefresh   = 10 * time.Second
	defaultSendRate  = 50000
	defaultJoin      = 5 * time.Second
	defaultHeartbeat = time.Second
	loopTick         = 20 * time.Millisecond
	// silentAfter is how long without a datagram from a peer makes it
	// silent (three heartbeats).
	silentAfter = 3
	// rebuildEvery is how often the presence filter is rebuilt from the
	// live entries.
	rebuildEvery = 30 * time.Second
	inQueue      = 2048
	rcvBuf       = 8 << 20
)

// New binds the node's socket (SO_REUSEPORT, so a successor of xlb
// restart can bind it while this process still runs) and returns the
// node, not started.
func New(o Options) (*Node, error) {
	if o.Refresh <= 0 {
		o.Refresh = defaultRefresh
	}
	if o.SendRate <= 0 {
		o.SendRate = defaultSendRate
	}
	if o.JoinTimeout <= 0 {
		o.JoinTimeout = defaultJoin
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Keys == nil || o.Table == nil || o.Snapshot == nil || o.Clock == nil || !o.Listen.IsValid() {
		return nil, errors.New("fleet: options lack keys, table, snapshot, clock or listen address")
	}
	var e [8]byte
	if _, err := rand.Read(e[:]); err != nil {
		return nil, fmt.Errorf("fleet epoch: %w", err)
	}
	n := &Node{o: o, log: o.Log, epoch: binary.BigEndian.Uint64(e[:]) | 1, byAddr: map[netip.Addr]*peer{},
		recv: o.Keys.Clone(), send: o.Keys.Clone(),
		in: make(chan []byte, inQueue), bufs: make(chan []byte, inQueue+8), joinRQ: make(chan struct{}, 1),
		stRQ: make(chan chan Status), queries: make(chan func()), done: make(chan struct{}),
		out: make([]byte, 0, MaxDatagram), scratchBody: make([]byte, 0, 64), body: recordsBody{b: make([]byte, 0, maxBody)}}
	for _, a := range o.Peers {
		a = a.Unmap()
		if a == o.Listen.Unmap() || n.byAddr[a] != nil {
			continue
		}
		p := newPeer(a, o.Port)
		n.peers = append(n.peers, p)
		n.byAddr[a] = p
	}
	n.own.init(len(o.Outboxes))
	n.rate = tokens{rate: float64(o.SendRate), burst: float64(o.SendRate) / 4}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			if serr == nil {
				// The kernel's count of what it dropped on this socket comes
				// with each datagram (read: Backlog).
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
			}
			// Room for a burst (a table change, a full sync) while the loop
			// is busy: FORCE needs CAP_NET_ADMIN, which the daemon has.
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", netip.AddrPortFrom(o.Listen, o.Port).String())
	if err != nil {
		return nil, fmt.Errorf("fleet: listen on %s port %d: %w", o.Listen, o.Port, err)
	}
	n.conn = pc.(*net.UDPConn)
	return n, nil
}

// Addr returns the bound address.
func (n *Node) Addr() netip.AddrPort { return n.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Start runs the node until ctx ends or Close, and starts a join: peers
// are asked for their exceptions at once (Joined).
func (n *Node) Start(ctx context.Context) {
	n.stored = n.table().EnablePresence(8, conntrack.Now(n.o.Clock))
	n.rebuilt = time.Now()
	if n.o.Joined {
		n.joined.Store(true)
	} else {
		n.join.start(n, time.Now())
	}
	n.wg.Add(2)
	go func() { defer n.wg.Done(); n.read() }()
	go func() { defer n.wg.Done(); n.loop(ctx) }()
}

// Close stops the node and closes its socket.
func (n *Node) Close() {
	select {
	case <-n.done:
	default:
		close(n.done)
	}
	n.conn.Close()
	n.wg.Wait()
}

func (n *Node) table() *conntrack.Shared { return n.o.Table }

// read moves datagrams from the socket to the loop. When the loop is
// behind and its queue full, the reader waits for it, and the socket's
// buffer (rcvBuf) holds what comes meanwhile: what the kernel drops when
// that is full too is counted (Backlog, from SO_RXQ_OVFL); every record
// is refreshed later anyway.
func (n *Node) read() {
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		var buf []byte
		select {
		case buf = <-n.bufs:
		default:
			buf = make([]byte, MaxDatagram+1) // one more: a longer datagram is malformed, not cut
		}
		k, oobn, _, _, err := n.conn.ReadMsgUDPAddrPort(buf[:cap(buf)], oob)
		if err != nil {
			select {
			case <-n.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if d, ok := kernelDrops(oob[:oobn]); ok {
			n.recvOver.Store(uint64(d))
		}
		select {
		case n.in <- buf[:k]:
		case <-n.done:
			return
		}
	}
}

// kernelDrops reads the socket's drop count (SO_RXQ_OVFL) from a
// datagram's control messages; the kernel sends it once it is not zero.
func kernelDrops(oob []byte) (uint32, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_RXQ_OVFL && len(m.Data) >= 4 {
			return binary.NativeEndian.Uint32(m.Data), true
		}
	}
	return 0, false
}

// loop owns the node's state: it handles datagrams, drains the workers'
// rings, sends, and answers status requests.
func (n *Node) loop(ctx context.Context) {
	tick := time.NewTicker(loopTick)
	defer tick.Stop()
	n.heartbeat(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.done:
			return
		case d := <-n.in:
			n.handle(d, time.Now())
			select {
			case n.bufs <- d[:cap(d)]:
			default:
			}
		case <-n.joinRQ:
			n.join.start(n, time.Now())
			n.heartbeat(time.Now())
		case c := <-n.stRQ:
			c <- n.status(time.Now())
		case q := <-n.queries:
			q()
		case now := <-tick.C:
			n.tick(now)
		}
	}
}

// tick is the loop's periodic work.
func (n *Node) tick(now time.Time) {
	n.res.update(n.o.Snapshot())
	n.drain()
	n.sessions(now)
	n.sendUpdates(now)
	n.sendSyncs(now)
	if now.Sub(n.lastHB) >= n.o.Heartbeat {
		n.heartbeat(now)
	}
	n.syncStalled(now)
	n.join.check(n, now)
	if now.Sub(n.rebuilt) >= rebuildEvery {
		n.rebuilt = now
		n.stored = n.table().RebuildPresence(conntrack.Now(n.o.Clock))
		n.expireHeld()
	}
}

// Join starts a join again (an undrained appliance asks its peers for
// their exceptions before it announces): Joined reports false until every
// peer answered or the join timeout passed.
func (n *Node) Join() {
	n.joined.Store(false) // at once: a gate asked right after must hold
	select {
	case n.joinRQ <- struct{}{}:
	default:
	}
}

// Holder returns the peer whose exception for (rule, key) this node
// holds, if any (for `xlb lookup`; from the node's goroutine).
func (n *Node) Holder(ctx context.Context, rule uint16, key hash.Key) (netip.Addr, bool, error) {
	type answer struct {
		a  netip.Addr
		ok bool
	}
	c := make(chan answer, 1)
	q := func() {
		k := ownedKey{rule, key}
		now := conntrack.Now(n.o.Clock)
		for _, p := range n.peers {
			if d, ok := p.held[k]; ok && now.Before(d) {
				c <- answer{p.addr, true}
				return
			}
		}
		c <- answer{}
	}
	select {
	case n.queries <- q:
	case <-ctx.Done():
		return netip.Addr{}, false, ctx.Err()
	case <-n.done:
		return netip.Addr{}, false, errors.New("fleet node stopped")
	}
	select {
	case r := <-c:
		return r.a, r.ok, nil
	case <-ctx.Done():
		return netip.Addr{}, false, ctx.Err()
	}
}

// Status returns the node's state (from its loop; ctx bounds the wait).
func (n *Node) Status(ctx context.Context) (Status, error) {
	c := make(chan Status, 1)
	select {
	case n.stRQ <- c:
	case <-ctx.Done():
		return Status{}, ctx.Err()
	case <-n.done:
		return Status{}, errors.New("fleet node stopped")
	}
	select {
	case st := <-c:
		return st, nil
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}
