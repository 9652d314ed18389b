package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/spsc"
)

// The test fleet runs on loopback: every node on its own 127.0.0.x with
// one port, as appliances share the fleet port.
var backends = []string{"198.18.1.100", "198.18.1.101", "198.18.1.102", "198.18.1.103"}

// testSnapshot builds a snapshot with rule "web" (TCP to 203.0.113.10:80,
// the backends in the given order of slots) after extra rules, so two
// nodes can number rules and backends differently.
func testSnapshot(t testing.TB, extra int, order []string) *dataplane.Snapshot {
	t.Helper()
	s, err := newSnapshot(extra, order)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newSnapshot is testSnapshot for a process without a testing.TB (the
// benchmark's receiver).
func newSnapshot(extra int, order []string) (*dataplane.Snapshot, error) {
	var rules []*dataplane.Rule
	for i := range extra + 1 {
		name, port := fmt.Sprintf("other%d", i), 81+i
		if i == extra {
			name, port = "web", 80
		}
		r := dataplane.Rule{Name: name, Present: true, Idle: conntrack.DefaultIdle,
			Match: dataplane.RuleMatch{VIP: netip.MustParseAddr("203.0.113.10").As16(), Protocol: dataplane.RuleTCP, Ports: []dataplane.PortRange{{Lo: uint16(port), Hi: uint16(port)}}}}
		r.Persist.Set(6, true)
		var bs []hash.Backend
		for i, a := range order {
			r.Backends = append(r.Backends, dataplane.Backend{Name: a, Addr: netip.MustParseAddr(a).As16(), Present: true, UnhealthyGen: uint16(3 + i), DrainGen: uint16(7 + i)})
			bs = append(bs, hash.Backend{Name: a, ID: uint32(i), Weight: 1})
		}
		tbl, err := hash.Build(bs, 65537, 1)
		if err != nil {
			return nil, err
		}
		r.Table = tbl
		rules = append(rules, &r)
	}
	return dataplane.NewSnapshot(1, rules)
}

type testNode struct {
	t     testing.TB
	n     *Node
	addr  netip.Addr
	table *conntrack.Shared
	sess  *conntrack.Shared
	out   *spsc.Ring[dataplane.Sighting]
	snap  *dataplane.Snapshot
	clock conntrack.Clock
	pass  uint32
	joins chan JoinResult
}

// freePort returns a UDP port free on loopback.
func freePort(t testing.TB) uint16 {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

type nodeOpt func(*Options)

// testWriter logs a node's lines through t.
type testWriter struct {
	t    testing.TB
	addr netip.Addr
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(w.addr.String() + ": " + strings.TrimSpace(string(p)))
	return len(p), nil
}

// startNode runs a node at 127.0.0.<me> with peers 127.0.0.<peers>.
func startNode(t testing.TB, port uint16, me int, peers []int, snap *dataplane.Snapshot, opts ...nodeOpt) *testNode {
	t.Helper()
	table, _ := conntrack.NewShared(1<<12, uint64(me))
	sess, _ := conntrack.NewShared(1<<10, uint64(me)+100)
	out, _ := spsc.New[dataplane.Sighting](1024)
	keys, _ := NewKeyring(testKey)
	tn := &testNode{t: t, addr: netip.AddrFrom4([4]byte{127, 0, 0, byte(me)}), table: table, sess: sess, out: out, snap: snap, clock: conntrack.NewSystemClock(), joins: make(chan JoinResult, 4)}
	o := Options{Listen: tn.addr, Port: port, Keys: keys, Table: table, Sessions: sess, Outboxes: []*spsc.Ring[dataplane.Sighting]{out},
		Snapshot: func() *dataplane.Snapshot { return tn.snap }, Clock: tn.clock, JoinTimeout: 3 * time.Second, Heartbeat: 200 * time.Millisecond,
		Refresh: time.Second, OnJoin: func(r JoinResult) { tn.joins <- r },
		Log: slog.New(slog.NewTextHandler(testWriter{t, tn.addr}, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, p := range peers {
		o.Peers = append(o.Peers, netip.AddrFrom4([4]byte{127, 0, 0, byte(p)}))
	}
	for _, f := range opts {
		f(&o)
	}
	tn.out, tn.table = o.Outboxes[0], o.Table
	n, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	tn.n = n
	n.Start(context.Background())
	t.Cleanup(n.Close)
	return tn
}

func (tn *testNode) now() conntrack.Time { return conntrack.Now(tn.clock) }

// webSlot is the rule slot of "web" in tn's snapshot.
func (tn *testNode) webSlot() uint16 { return uint16(len(tn.snap.Rules) - 1) }

func (tn *testNode) backendSlot(a string) uint32 {
	for i, b := range tn.snap.Rules[tn.webSlot()].Backends {
		if b.Name == a {
			return uint32(i)
		}
	}
	tn.t.Fatalf("no backend %s", a)
	return 0
}

// exc is an exception a test node owns: its backend and its entry's
// deadline.
type exc struct {
	backend  string
	deadline conntrack.Time
}

// own hands the node a scan pass (as a worker would) that found the given
// flows, and the end of the pass.
func (tn *testNode) own(flows map[hash.Key]exc) {
	tn.pass++
	now := tn.now()
	for k, e := range flows {
		slot := tn.backendSlot(e.backend)
		be := &tn.snap.Rules[tn.webSlot()].Backends[slot]
		s := dataplane.Sighting{Key: k, Rule: tn.webSlot(), Value: conntrack.Value{Backend: slot, BackendGen: be.Stamp()}, ExpiresIn: conntrack.Ticks(e.deadline.Sub(now)), Pass: tn.pass}
		if !tn.out.Push(&s) {
			tn.t.Fatal("outbox full")
		}
	}
	tn.out.Push(&dataplane.Sighting{End: true, Pass: tn.pass})
}

// held returns the backend address tn holds for k, "" for none.
func (tn *testNode) held(k hash.Key) (string, conntrack.Value, conntrack.Ticks) {
	v, left, ok := tn.table.Peek(&k, tn.webSlot(), tn.now())
	if !ok {
		return "", v, 0
	}
	return tn.snap.Rules[tn.webSlot()].Backends[v.Backend].Name, v, left
}

func (tn *testNode) status() Status { return tn.statusWithin(5 * time.Second) }

// statusWithin is status, waiting up to d for the node's loop.
func (tn *testNode) statusWithin(d time.Duration) Status {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	st, err := tn.n.Status(ctx)
	if err != nil {
		tn.t.Fatal(err)
	}
	return st
}

// eventually polls cond for up to d.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func flow(i int) hash.Key {
	return key4(fmt.Sprintf("198.51.%d.%d", 100+i/200, 10+i%200), "203.0.113.10", uint16(40000+i), 80, 6, hash.Tuple5)
}

// TestNodesShareExceptions: an exception one node owns reaches the other,
// named by rule and address (the two number them differently), stamped
// with the receiver's generations, living what the owner's entry has left;
// it is sent again only when its deadline moved; a pass that no longer
// sees it withdraws it.
func TestNodesShareExceptions(t *testing.T) {
	port := freePort(t)
	a := startNode(t, port, 11, []int{12}, testSnapshot(t, 0, backends))
	rev := []string{backends[3], backends[2], backends[1], backends[0]}
	b := startNode(t, port, 12, []int{11}, testSnapshot(t, 2, rev))
	for _, n := range []*testNode{a, b} {
		select {
		case r := <-n.joins:
			if r.TimedOut {
				t.Fatalf("join timed out: %+v", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no join")
		}
	}
	f1, f2 := flow(1), flow(2)
	d := a.now().Add(conntrack.TicksOf(50 * time.Second))
	a.own(map[hash.Key]exc{f1: {backends[1], d}, f2: {backends[3], d}})
	eventually(t, 3*time.Second, "exceptions at b", func() bool { x, _, _ := b.held(f2); return x != "" })
	got, v, left := b.held(f1)
	be := &b.snap.Rules[b.webSlot()].Backends[v.Backend]
	if got != backends[1] || v.BackendGen != be.Stamp() || v.RuleGen != b.snap.Rules[b.webSlot()].FlushGen {
		t.Errorf("b holds %s %+v, want %s with b's own generations %#x", got, v, backends[1], be.Stamp())
	}
	if left > conntrack.TicksOf(50*time.Second) || left < conntrack.TicksOf(45*time.Second) {
		t.Errorf("copy lives %v, want about 50s", left.Duration())
	}
	st := b.status()
	if len(st.Peers) != 1 || st.Peers[0].Held != 2 || st.Peers[0].RecvRecords != 2 || st.Peers[0].State != "synced" || st.Held != 2 {
		t.Errorf("b's status: %+v", st)
	}
	if st := a.status(); st.Owned != 2 || st.Peers[0].SentRecords != 2 {
		t.Errorf("a's status: %+v", st)
	}

	// The same pass again, deadlines unchanged: nothing is sent. Then f1
	// carried traffic (its deadline moved): f1 alone is sent again.
	a.own(map[hash.Key]exc{f1: {backends[1], d}, f2: {backends[3], d}})
	time.Sleep(300 * time.Millisecond)
	if got := b.status().Peers[0].RecvRecords; got != 2 {
		t.Errorf("unchanged exceptions sent again: %d records received", got)
	}
	a.own(map[hash.Key]exc{f1: {backends[1], d.Add(10 * conntrack.TicksPerSecond)}, f2: {backends[3], d}})
	eventually(t, 3*time.Second, "f1 refreshed", func() bool { return b.status().Peers[0].RecvRecords == 3 })
	if _, _, left := b.held(f1); left < conntrack.TicksOf(55*time.Second) {
		t.Errorf("refreshed copy lives %v", left.Duration())
	}

	// A pass that no longer sees f1 (a SYN took its tuple, or it expired
	// or was flushed): b drops its copy, keeps f2's.
	a.own(map[hash.Key]exc{f2: {backends[3], d}})
	eventually(t, 3*time.Second, "f1 withdrawn", func() bool { x, _, _ := b.held(f1); return x == "" })
	if x, _, _ := b.held(f2); x != backends[3] {
		t.Errorf("f2 lost with f1's withdrawal: %q", x)
	}
	if st := b.status(); st.Held != 1 {
		t.Errorf("b holds %d after the withdrawal", st.Held)
	}
}

// TestJoin: a node that starts gets its peers' exceptions before it is
// joined; a peer that never answers holds the join until the timeout,
// which says so and is counted; a second join (undrain) asks again.
func TestJoin(t *testing.T) {
	port := freePort(t)
	a := startNode(t, port, 21, []int{22, 23}, testSnapshot(t, 0, backends))
	<-a.joins // times out on 22 and 23, which are not running yet
	d := a.now().Add(conntrack.TicksOf(40 * time.Second))
	owned := map[hash.Key]exc{}
	for i := range 500 { // more than one datagram's worth
		owned[flow(i)] = exc{backends[i%4], d}
	}
	a.own(owned)
	eventually(t, 3*time.Second, "a owns them", func() bool { return a.status().Owned == 500 })

	// 22 joins with 21 alive and 23 dead: 21's exceptions arrive, 23 times out.
	// From before the start: the join's timer starts inside it, and a
	// loaded machine may hold the test up between the two.
	start := time.Now()
	c := startNode(t, port, 22, []int{21, 23}, testSnapshot(t, 1, backends), func(o *Options) { o.JoinTimeout = 1500 * time.Millisecond })
	if c.n.Joined() {
		t.Fatal("joined at once")
	}
	var r JoinResult
	select {
	case r = <-c.joins:
	case <-time.After(5 * time.Second):
		t.Fatal("join never ended")
	}
	if !r.TimedOut || len(r.Pending) != 1 || r.Pending[0] != netip.MustParseAddr("127.0.0.23") || time.Since(start) < 1400*time.Millisecond {
		t.Errorf("join with a dead peer: %+v after %v", r, time.Since(start))
	}
	held := 0
	for k, e := range owned {
		if got, _, _ := c.held(k); got == e.backend {
			held++
		}
	}
	if held != 500 || !c.n.Joined() {
		t.Fatalf("joined %v holding %d of 500 exceptions", c.n.Joined(), held)
	}
	st := c.status()
	if st.JoinTimeouts != 1 || !st.JoinTimedOut || len(st.JoinPending) != 1 || st.Peers[0].State != "synced" || st.Peers[1].State != "silent" {
		t.Errorf("status after the timed-out join: %+v", st)
	}

	// 23 starts: its join ends as soon as both answered.
	e := startNode(t, port, 23, []int{21, 22}, testSnapshot(t, 0, backends))
	select {
	case r = <-e.joins:
		if r.TimedOut || r.Took > time.Second {
			t.Errorf("join with every peer alive: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no join")
	}
	if got, _, _ := e.held(flow(7)); got != backends[3] {
		t.Errorf("23 holds %q for flow 7", got)
	}
	// A later join (an undrain) asks again and ends once both answered.
	e.n.Join()
	select {
	case r = <-e.joins:
		if r.TimedOut {
			t.Errorf("rejoin: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no rejoin")
	}
}

// fakePeer speaks the protocol by hand from a configured peer's address:
// the adversary (and the replayer) of TestHostileDatagrams.
type fakePeer struct {
	t     *testing.T
	conn  *net.UDPConn
	addr  netip.Addr
	to    netip.AddrPort
	keys  *Keyring
	epoch uint64
	seq   uint64
}

func newFakePeer(t *testing.T, me int, to *testNode, port uint16) *fakePeer {
	a := netip.AddrFrom4([4]byte{127, 0, 0, byte(me)})
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	k, _ := NewKeyring(testKey)
	return &fakePeer{t: t, conn: c, addr: a, to: netip.AddrPortFrom(to.addr, port), keys: k, epoch: 0x1000 + uint64(me)}
}

// datagram seals a body as the fake peer's next datagram.
func (f *fakePeer) datagram(typ Type, body []byte) []byte {
	f.seq++
	h := Header{Type: typ, Epoch: f.epoch, Seq: f.seq, From: f.addr, To: f.to.Addr()}
	return f.keys.seal(append(appendHeader(nil, &h, len(body)), body...))
}

func (f *fakePeer) send(d []byte) {
	if _, err := f.conn.WriteToUDPAddrPort(d, f.to); err != nil {
		f.t.Fatal(err)
	}
}

// handshake proves the fake peer's epoch: a HELLO, the node's challenge,
// the echo.
func (f *fakePeer) handshake() {
	f.t.Helper()
	f.send(f.datagram(TypeHello, appendHello(nil, &Hello{})))
	buf := make([]byte, 2000)
	f.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		k, err := f.conn.Read(buf)
		if err != nil {
			f.t.Fatalf("no challenge: %v", err)
		}
		h, body, err := parseHeader(buf[:k])
		if err != nil || h.Type != TypeHello {
			continue
		}
		if m, _ := parseHello(body); m.Challenge != 0 {
			f.send(f.datagram(TypeHello, appendHello(nil, &Hello{Echo: m.Challenge})))
			return
		}
	}
}

func (f *fakePeer) records(rs ...Record) []byte {
	var rb recordsBody
	rb.reset(0)
	for i := range rs {
		rb.add(&rs[i])
	}
	return f.datagram(TypeRecords, rb.b)
}

// TestHostileDatagrams: datagrams with a wrong key, replayed, truncated,
// malformed, from an unknown address, addressed to another appliance, or
// from a peer's epoch not proven since it restarted are dropped and
// counted by reason, and nothing of them is applied; the good ones are.
func TestHostileDatagrams(t *testing.T) {
	port := freePort(t)
	b := startNode(t, port, 32, []int{31}, testSnapshot(t, 0, backends))
	f := newFakePeer(t, 31, b, port)
	f.handshake()
	eventually(t, 3*time.Second, "fake peer verified", func() bool { return b.status().Peers[0].State != "silent" })
	web := RuleID("web")
	rec := func(i int, backend string) Record {
		return Record{Rule: web, Key: flow(i), Backend: netip.MustParseAddr(backend), TTLms: 30000}
	}
	good := f.records(rec(1, backends[2]))
	f.send(good)
	eventually(t, 3*time.Second, "good record applied", func() bool { x, _, _ := b.held(flow(1)); return x == backends[2] })

	other, _ := NewKeyring([]byte("an-attacker-key-that-is-long-enough"))
	wrongKey := f.records(rec(2, backends[0]))
	wrongKey = other.seal(wrongKey[:len(wrongKey)-tagLen])
	truncated := f.records(rec(3, backends[0]))
	truncated = truncated[:len(truncated)-5]
	unknownRule := f.records(Record{Rule: RuleID("nope"), Key: flow(4), Backend: netip.MustParseAddr(backends[0]), TTLms: 1000})
	unknownBackend := f.records(rec(5, "192.0.2.99"))
	misdirected := func() []byte {
		g := *f
		g.to = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.99"), port)
		d := g.records(rec(6, backends[0]))
		f.seq = g.seq
		return d
	}()
	malformed := f.records(rec(7, backends[0]))
	malformed[headerLen+recordsHead+1] = 9 // tuple kind 9 …
	malformed = f.keys.seal(malformed[:len(malformed)-tagLen])
	// The flow's entry is withdrawn: a replay of the datagram that made
	// it must not bring it back.
	w := rec(1, backends[2])
	w.Flags, w.TTLms = FlagWithdraw, 30000
	f.send(f.records(w))
	eventually(t, 3*time.Second, "withdrawn", func() bool { x, _, _ := b.held(flow(1)); return x == "" })
	for _, d := range [][]byte{good, wrongKey, truncated, unknownRule, unknownBackend, misdirected, malformed, good} {
		f.send(d)
	}
	// From an address no node is configured with, with the fleet key.
	stranger := newFakePeer(t, 39, b, port)
	stranger.send(stranger.records(rec(8, backends[0])))
	want := map[string]uint64{"replay": 2, "auth": 1, "truncated": 1, "unknown-rule": 1, "unknown-backend": 1, "misdirected": 1, "malformed": 1}
	eventually(t, 3*time.Second, "every drop counted", func() bool {
		st := b.status()
		return fmt.Sprint(st.Peers[0].Drops) == fmt.Sprint(want) && st.Drops["unknown-peer"] == 1
	})
	for i := 1; i <= 8; i++ {
		if x, _, _ := b.held(flow(i)); x != "" {
			t.Errorf("flow %d applied from a bad datagram: %s", i, x)
		}
	}

	// The peer restarts (a new epoch): its datagrams count as unverified
	// until it answers a challenge, and a recording from the old epoch
	// replayed afterwards is never applied.
	oldEpochRecord := f.records(rec(9, backends[1]))
	f.epoch++
	f.seq = 0
	f.send(f.records(rec(10, backends[1])))
	eventually(t, 3*time.Second, "unverified counted", func() bool { return b.status().Peers[0].Drops["unverified"] == 1 })
	f.handshake()
	f.send(f.records(rec(11, backends[1])))
	eventually(t, 3*time.Second, "new epoch applied", func() bool { x, _, _ := b.held(flow(11)); return x == backends[1] })
	f.send(oldEpochRecord)
	eventually(t, 3*time.Second, "old epoch refused", func() bool { return b.status().Peers[0].Drops["unverified"] >= 2 })
	for _, i := range []int{9, 10} {
		if x, _, _ := b.held(flow(i)); x != "" {
			t.Errorf("flow %d applied from an unverified epoch", i)
		}
	}
}

// TestSessionExceptions: a PER_SESSION session whose backend the rule's
// table no longer picks is found by the node's walk of the session table
// and shared like a worker's exception.
func TestSessionExceptions(t *testing.T) {
	port := freePort(t)
	snap := testSnapshot(t, 0, backends)
	a := startNode(t, port, 41, []int{42}, snap)
	b := startNode(t, port, 42, []int{41}, testSnapshot(t, 0, backends))
	k := key4("198.51.100.77", "203.0.113.10", 0, 0, 0, hash.Tuple2)
	pick, _ := snap.Pick(a.webSlot(), &k)
	off := (pick + 1) % 4
	a.sess.Set(&k, a.webSlot(), conntrack.Value{Backend: off, BackendGen: snap.Rules[a.webSlot()].Backends[off].Stamp()}, a.now(), conntrack.TicksOf(time.Minute))
	same := key4("198.51.100.78", "203.0.113.10", 0, 0, 0, hash.Tuple2)
	p2, _ := snap.Pick(a.webSlot(), &same)
	a.sess.Set(&same, a.webSlot(), conntrack.Value{Backend: p2, BackendGen: snap.Rules[a.webSlot()].Backends[p2].Stamp()}, a.now(), conntrack.TicksOf(time.Minute))
	eventually(t, 5*time.Second, "session exception at b", func() bool {
		v, _, ok := b.table.Peek(&k, b.webSlot(), b.now())
		return ok && v.Backend == off
	})
	if _, _, ok := b.table.Peek(&same, b.webSlot(), b.now()); ok {
		t.Error("a session on its pick was shared")
	}
	if st := a.status(); st.Owned != 1 {
		t.Errorf("a owns %d", st.Owned)
	}
}

// TestLoopBehind: while the node's loop is held up, its reader fills the
// queue and then waits, so the socket's buffer holds what comes next
// instead of the reader dropping it; what the kernel drops beyond that
// is counted (Backlog: the socket's own count in /proc/net/udp, which the
// kernel tells with the next datagram). 20 000
// datagrams of filler (malformed, each counted so once handled) arrive
// while the loop is held.
func TestLoopBehind(t *testing.T) {
	port := freePort(t)
	a := startNode(t, port, 61, []int{62}, testSnapshot(t, 0, backends))
	release := make(chan struct{})
	a.n.queries <- func() { <-release } // the loop waits here
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a.addr, port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	filler := make([]byte, MaxDatagram)
	const sent = 20000
	for range sent {
		c.Write(filler)
	}
	close(release)
	kernel := socketDrops(a.addr, port)
	var st Status
	eventually(t, 10*time.Second, "the filler handled", func() bool {
		st = a.status()
		return st.Drops["malformed"]+kernel >= sent
	})
	handled := st.Drops["malformed"]
	if handled <= inQueue+1 {
		t.Errorf("the loop handled %d datagrams of %d: no more than its queue (%d) held, the socket's buffer none", handled, sent, inQueue)
	}
	if kernel == 0 {
		t.Fatal("the kernel dropped nothing: the test did not fill the socket")
	}
	// The kernel tells its count with the next datagram it queues.
	c.Write(filler)
	eventually(t, 5*time.Second, "the kernel's drops counted", func() bool { st = a.status(); return st.Backlog == kernel })
	t.Logf("%d sent while the loop was held: %d handled, %d dropped by the kernel (backlog %d)", sent, handled, kernel, st.Backlog)
}
