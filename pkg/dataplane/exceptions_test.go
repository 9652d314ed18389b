package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/spsc"
)

// TestPickIsDecide: for every affinity, tracking mode and protocol, the
// backend Decide places a new flow on is Pick of the flow's tracking key:
// the fleet judges exceptions with the same choice the workers make.
func TestPickIsDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, a := range []hash.Affinity{hash.AffinityNone, hash.AffinityClientIPPortProto, hash.AffinityClientIPProto, hash.AffinityClientIP} {
		for _, mode := range []hash.TrackingMode{hash.PerConnection, hash.PerSession} {
			t.Run(fmt.Sprintf("%v/%v", a, mode), func(t *testing.T) {
				w := newWorld(t, ruleSpec{protocol: RuleL3Default, affinity: a, mode: mode, backends: names(7)})
				checked := 0
				for range 300 {
					p := randomFlow(rng)
					k, ok := hash.TrackingKey(p.meta(), a, mode)
					if !ok {
						continue
					}
					got := w.send(p)
					id, ok := w.snap.Pick(0, &k)
					if !ok || w.rule.Backends[id].Name != got {
						t.Fatalf("%+v: Decide sent it to %s, Pick says %d (%v)", p, got, id, ok)
					}
					checked++
				}
				if checked < 100 {
					t.Errorf("only %d trackable flows checked", checked)
				}
			})
		}
	}
}

// peerWorld is a world whose queue has a peer table, as under [fleet].
func peerWorld(t *testing.T, spec ruleSpec) *world {
	t.Helper()
	w := newWorld(t, spec)
	peers, err := conntrack.NewShared(1<<10, 4)
	if err != nil {
		t.Fatal(err)
	}
	w.q.Peers = peers
	return w
}

// notPick returns a backend of w's rule other than what the table picks
// for p.
func (w *world) notPick(p pkt) string {
	pick := w.maglev(p)
	for _, b := range w.rule.Backends {
		if b.Name != pick {
			return b.Name
		}
	}
	w.t.Fatal("one backend only")
	return ""
}

// givePeer stores what a peer would send for p's flow: backend name, with
// this appliance's generations.
func (w *world) givePeer(p pkt, name string) {
	w.t.Helper()
	k, _ := hash.TrackingKey(p.meta(), w.spec.affinity, w.spec.mode)
	b := &w.rule.Backends[w.slotOf(name)]
	if !w.q.Peers.Set(&k, 0, conntrack.Value{Backend: w.slotOf(name), RuleGen: w.rule.FlushGen, BackendGen: b.Stamp()}, w.now, w.spec.idle) {
		w.t.Fatal("peer table set failed")
	}
}

// TestPeerEntryDecides: a flow this appliance has no entry for follows
// the entry a peer sent (the flow moved here), which is then copied into
// the queue's table, marked as from a peer and as an exception; a SYN (a
// new connection) ignores it; a peer entry no longer valid here (its
// backend failed, the flow does not persist) is ignored; an ICMP error
// follows it without copying it.
func TestPeerEntryDecides(t *testing.T) {
	w := peerWorld(t, ruleSpec{protocol: RuleL3Default, backends: names(4), persist: func(uint8) bool { return false }})
	est := tcp("198.51.100.7", 4000, ack)
	other := w.notPick(est)
	w.givePeer(est, other)
	d := w.snap.Decide(est.meta(), w.q, w.now)
	if d.Verdict != Tx || w.rule.Backends[d.Backend].Name != other || !d.Peer || !d.Tracked || d.New {
		t.Fatalf("a moved flow: %+v, want %s from the peer entry", d, other)
	}
	k, _ := hash.TrackingKey(est.meta(), 0, 0)
	rec, found := peekLocal(w, &k)
	if !found || !rec.FromPeer || !rec.Exception || w.rule.Backends[rec.Value.Backend].Name != other {
		t.Fatalf("not copied into the queue's table as a peer's exception: %+v (found %v)", rec, found)
	}
	w.q.Peers.Set(&k, 0, conntrack.Value{}, w.now, 0) // the peer's copy goes: the local one decides
	if got := w.send(est); got != other {
		t.Errorf("next packet went to %s, want %s (local copy)", got, other)
	}

	newConn := tcp("198.51.100.8", 4001, syn)
	w.givePeer(newConn, w.notPick(newConn))
	if got := w.send(newConn); got != w.maglev(newConn) {
		t.Errorf("a SYN followed a peer entry to %s", got)
	}

	stale := tcp("198.51.100.9", 4002, ack)
	staleTo := w.notPick(stale)
	w.givePeer(stale, staleTo)
	w.backend(staleTo, func(b *Backend) { b.UnhealthyGen++ })
	if got := w.send(stale); got != w.maglev(stale) {
		t.Errorf("a stale peer entry decided: %s", got)
	}

	reply := &packet.Tuple{Src: testVIP, Dst: addr16("198.51.100.10"), SrcPort: 80, DstPort: 4003, Proto: packet.ProtoTCP}
	flow := tcp("198.51.100.10", 4003, ack)
	to := w.notPick(flow)
	if to == staleTo {
		to = w.maglev(flow) // any healthy backend the table does not pick
		for _, b := range w.rule.Backends {
			if b.Name != to && b.Name != staleTo {
				to = b.Name
				break
			}
		}
	}
	w.givePeer(flow, to)
	icmp := pkt{src: "192.0.2.77", proto: packet.ProtoICMP, icmp: 3, inner: reply}
	if got := w.send(icmp); got != to {
		t.Errorf("ICMP error went to %s, want %s", got, to)
	}
	fk, _ := hash.TrackingKey(flow.meta(), 0, 0)
	if _, found := peekLocal(w, &fk); found {
		t.Error("an ICMP error copied the peer entry")
	}
}

// TestPeerSessionDecides: a PER_SESSION client session a peer sent is
// followed by this appliance's first connection of the client, and copied
// into the session table.
func TestPeerSessionDecides(t *testing.T) {
	w := peerWorld(t, ruleSpec{protocol: RuleTCP, affinity: hash.AffinityClientIP, mode: hash.PerSession, backends: names(4)})
	first := tcp("198.51.100.20", 5000, syn)
	other := w.notPick(first)
	w.givePeer(first, other)
	if got := w.send(first); got != other {
		t.Fatalf("the client's connection went to %s, want its session's %s", got, other)
	}
	k, _ := hash.TrackingKey(first.meta(), hash.AffinityClientIP, hash.PerSession)
	if v, ok := w.q.Sessions.Get(&k, 0, w.now, 0); !ok || w.rule.Backends[v.Backend].Name != other {
		t.Errorf("session not copied: %+v %v", v, ok)
	}
}

func peekLocal(w *world, k *hash.Key) (conntrack.Record, bool) {
	return w.q.Conntrack.Peek(k, 0, w.now)
}

// scanWorld is a world with an exception scan feeding a ring.
type scanWorld struct {
	*world
	s   *exceptionScan
	out *spsc.Ring[Sighting]
}

func newScanWorld(t *testing.T, spec ruleSpec, ring int) *scanWorld {
	w := newWorld(t, spec)
	out, err := spsc.New[Sighting](ring)
	if err != nil {
		t.Fatal(err)
	}
	wk := &Worker{}
	wk.ShareExceptions(out, 10*conntrack.TicksPerSecond)
	return &scanWorld{world: w, s: wk.scan, out: out}
}

// pass steps the scan until a pass ends and returns what it handed over
// (the End marker last), popping the ring as the sender would.
func (sw *scanWorld) pass() []Sighting {
	sw.t.Helper()
	var got []Sighting
	buf := make([]Sighting, 16)
	for range 100000 {
		sw.s.step(sw.q.Conntrack, sw.snap, sw.now, 64)
		for n := sw.out.Pop(buf); n > 0; n = sw.out.Pop(buf) {
			got = append(got, buf[:n]...)
			if buf[n-1].End {
				return got
			}
		}
	}
	sw.t.Fatal("no pass ended")
	return nil
}

// TestExceptionScan: the first pass judges every entry (none is an
// exception: each was placed by the table); a backend added to the table
// makes the flows whose pick changed exceptions, found by a pass over
// every entry and no others; refresh passes hand them over again while
// they live, without those a SYN re-selected; the table going back clears
// them all. A ring smaller than the exceptions loses none.
func TestExceptionScan(t *testing.T) {
	for _, ring := range []int{4, 1024} {
		t.Run(fmt.Sprint("ring ", ring), func(t *testing.T) {
			sw := newScanWorld(t, ruleSpec{protocol: RuleTCP, backends: names(5), eligible: names(4)}, ring)
			var flows []pkt
			for i := range 400 {
				p := tcp(fmt.Sprintf("198.51.%d.%d", 100+i/200, i%200), uint16(1000+i), syn)
				sw.send(p)
				p.flags = ack
				sw.send(p)
				flows = append(flows, p)
			}
			if got := sw.pass(); len(got) != 1 || !got[0].End || got[0].Pass != 1 {
				t.Fatalf("first pass handed over %d items: %+v", len(got), got)
			}
			before := map[string]string{}
			for _, p := range flows {
				before[p.src] = sw.maglev(p)
			}
			sw.setEligible(names(5), nil) // a fifth backend
			want := map[string]string{}
			for _, p := range flows {
				if sw.maglev(p) != before[p.src] {
					want[p.src] = before[p.src]
				}
			}
			if len(want) < 40 {
				t.Fatalf("only %d of 400 flows changed pick", len(want))
			}
			check := func(what string, got []Sighting, want map[string]string) {
				t.Helper()
				seen := map[string]bool{}
				for _, s := range got[:len(got)-1] {
					src := netip.AddrFrom16(s.Key.Src).Unmap().String()
					if s.End || want[src] != sw.rule.Backends[s.Value.Backend].Name || seen[src] || s.ExpiresIn <= 0 || s.Rule != 0 {
						t.Errorf("%s: unexpected %+v (%s)", what, s, src)
					}
					seen[src] = true
				}
				if len(seen) != len(want) || !got[len(got)-1].End {
					t.Errorf("%s: %d exceptions handed over, want %d", what, len(seen), len(want))
				}
			}
			check("after a backend was added", sw.pass(), want)
			if ring == 4 && sw.out.Full() == 0 {
				t.Error("a 4-slot ring never filled")
			}
			// Nothing changed: no pass until the refresh interval.
			sw.s.step(sw.q.Conntrack, sw.snap, sw.now, 8)
			if sw.out.Len() != 0 {
				t.Error("a scan ran before the refresh interval")
			}
			var reused pkt
			for _, p := range flows {
				if _, ok := want[p.src]; ok {
					reused = p
					break
				}
			}
			reused.flags = syn // a new connection on the same tuple: placed by the table
			sw.send(reused)
			delete(want, reused.src)
			sw.advance(10 * conntrack.TicksPerSecond)
			check("refresh", sw.pass(), want)
			sw.setEligible(names(4), nil) // the fifth backend goes again
			check("after the table went back", sw.pass(), map[string]string{})
			sw.advance(10 * conntrack.TicksPerSecond)
			check("refresh after clearing", sw.pass(), map[string]string{})
		})
	}
}

// TestWorkerSharesExceptions: a worker told to share exceptions scans
// between batches (idle loops included) and allocates nothing doing so or
// deciding with a peer table.
func TestWorkerSharesExceptions(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(3), eligible: names(2)}, encap.GUE, 1500)
	peers, _ := conntrack.NewShared(1<<10, 5)
	fw.wk.tables.Peers = peers
	out, _ := spsc.New[Sighting](64)
	fw.wk.ShareExceptions(out, 5*conntrack.TicksPerSecond)
	var frames [][]byte
	for i := range 30 {
		frames = append(frames, tcpFrame("198.51.100.50", uint16(2000+i), true))
	}
	fw.run(frames...)
	fw.w.setEligible(names(3), nil)
	fw.snap.Store(fw.w.snap)
	fw.clock.Advance(time.Second)
	buf := make([]Sighting, 64)
	var got []Sighting
	for range 20 {
		fw.wk.Step() // idle loops scan too
		n := out.Pop(buf)
		got = append(got, buf[:n]...)
	}
	ends, exc := 0, 0
	for _, s := range got {
		if s.End {
			ends++
		} else {
			exc++
		}
	}
	if ends < 2 || exc == 0 {
		t.Errorf("after a table change: %d exceptions, %d pass ends", exc, ends)
	}
	if allocs := stepAllocs(fw); allocs != 0 {
		t.Errorf("a worker loop with a peer table and the scan allocates %v times", allocs)
	}
}

func TestDecideWithPeersAllocatesNothing(t *testing.T) {
	w := peerWorld(t, ruleSpec{protocol: RuleTCP, backends: names(3)})
	moved := tcp("198.51.100.60", 7000, ack)
	w.givePeer(moved, w.notPick(moved))
	unknown := tcp("198.51.100.61", 7001, ack)
	for _, p := range []pkt{moved, unknown} {
		m := p.meta()
		if a := testing.AllocsPerRun(200, func() { w.snap.Decide(m, w.q, w.now) }); a != 0 {
			t.Errorf("Decide(%+v) allocates %v times", p, a)
		}
	}
}

// TestPickIsDecideZonal: under zonal affinity Pick uses the client's zone
// view, as Decide does, and the default view for clients of no zone.
func TestPickIsDecideZonal(t *testing.T) {
	w := zonalWorld(t) // eligible_test.go
	seen := map[string]bool{}
	for i, c := range append(clients(512), "203.0.113.77", "203.0.113.78") {
		f := tcp(c, uint16(3000+i), syn)
		got := w.send(f)
		k, _ := hash.TrackingKey(f.meta(), 0, 0)
		id, ok := w.snap.Pick(0, &k)
		if !ok || w.snap.Rules[0].Backends[id].Name != got {
			t.Fatalf("client %s: Decide %s, Pick %d", c, got, id)
		}
		seen[got] = true
	}
	if len(seen) != 4 {
		t.Errorf("flows reached %v", seen)
	}
}
