package dataplane

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

func randomFlow(rng *rand.Rand) pkt {
	var a [4]byte
	a[0], a[1], a[2], a[3] = 198, 18+byte(rng.IntN(2)), byte(rng.IntN(256)), byte(rng.IntN(256))
	p := tcp(netip.AddrFrom4(a).String(), uint16(1024+rng.IntN(60000)), syn)
	if rng.IntN(3) == 0 {
		p = udp(p.src, p.sport)
	}
	return p
}

// Simulator cross-check: on an empty table Decide picks exactly what a
// direct Maglev lookup over the eligible set picks.
func TestSimulatorCrossCheck(t *testing.T) {
	p := failover.DefaultPolicy()
	p.WeightedMaglev = true
	var bs []fb
	for i, n := range names(10) {
		health := h
		if i == 3 {
			health = u
		}
		bs = append(bs, fb{name: n, health: health, weight: uint32(1 + i*7%5)})
	}
	for _, aff := range []hash.Affinity{hash.AffinityNone, hash.AffinityClientIPProto, hash.AffinityClientIP} {
		w := newFWorld(t, RuleConfig{Match: RuleMatch{Protocol: RuleL3Default}, Affinity: aff}, p, nil, bs)
		direct, err := hash.Build(failover.MaglevBackends(w.st.Eligible), 65537, testSeed)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, uint64(aff)))
		mismatch := 0
		const n = 100_000
		// Random flows from 2^17 addresses × 60000 ports practically never
		// repeat, so each meets a table without its entry.
		w.q.Conntrack, _ = conntrack.New(1<<17, 1)
		for range n {
			f := randomFlow(rng)
			k := hash.SelectionKey(f.meta(), aff)
			id, _ := direct.Lookup(hash.Sum64(&k, testSeed))
			d := w.snap.Decide(f.meta(), w.q, w.now)
			if d.Verdict != Tx || d.Backend != id {
				mismatch++
			}
		}
		if mismatch != 0 {
			t.Errorf("affinity %d: %d of %d flows disagree with Maglev", aff, mismatch, n)
		}
	}
}

// Stability: after adding, removing or re-weighting one backend of ten,
// established TCP flows keep their backend; new flows move by no more than
// the Maglev delta.
func TestStability(t *testing.T) {
	p := failover.DefaultPolicy()
	p.WeightedMaglev = true
	base := func() []fb {
		var bs []fb
		for _, n := range names(10) {
			bs = append(bs, fb{name: n, health: h, weight: 10})
		}
		return bs
	}
	changes := []struct {
		name   string
		change func(w *fworld)
	}{
		{"add", func(w *fworld) {
			w.backends = append(w.backends, failover.Backend{Name: "192.0.2.11", ID: 10, Group: "a", Health: h, Weight: 10})
			w.compute()
		}},
		{"remove", func(w *fworld) {
			w.set("192.0.2.5", func(b *failover.Backend) { b.Removed, b.RemovedAt = true, w.wall() })
		}},
		{"reweight", func(w *fworld) { w.set("192.0.2.5", func(b *failover.Backend) { b.Weight = 30 }) }},
	}
	for _, ch := range changes {
		t.Run(ch.name, func(t *testing.T) {
			p := p
			p.ConnectionDrainingTimeout = time.Hour
			w := newFWorld(t, RuleConfig{Match: RuleMatch{Protocol: RuleTCP}}, p, nil, base())
			before := w.snap.Rules[0].Table
			conns := w.establish(2000, 9000)
			ch.change(w)
			if kept := w.stayed(conns, 9000); kept != len(conns) {
				t.Errorf("%d of %d established flows kept their backend", kept, len(conns))
			}
			// New flows: the share that moved equals the Maglev delta's.
			after := w.snap.Rules[0].Table
			d, err := hash.Delta(before, after)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 7))
			moved := 0
			const n = 20000
			for range n {
				f := randomFlow(rng)
				f.proto, f.flags, f.dport = packet.ProtoTCP, syn, 80
				k := hash.SelectionKey(f.meta(), hash.AffinityNone)
				hv := hash.Sum64(&k, testSeed)
				a, _ := before.Lookup(hv)
				b, _ := after.Lookup(hv)
				if a != b {
					moved++
				}
			}
			maxShare := float64(d.Changed)/float64(before.Size()) + 0.01
			if share := float64(moved) / n; share > maxShare {
				t.Errorf("%.3f of new flows moved, Maglev delta allows %.3f", share, maxShare)
			}
		})
	}
}

// Flood: with the table full of established flows, ten times its capacity
// in fresh SYNs evicts no established flow and memory stays at the arena.
func TestSYNFloodKeepsEstablishedFlows(t *testing.T) {
	w := probeWorld(t, ruleSpec{protocol: RuleTCP})
	ct, err := conntrack.New(4096, 9)
	if err != nil {
		t.Fatal(err)
	}
	w.q.Conntrack = ct
	arena := ct.ArenaBytes()
	capacity := ct.Cap()
	type flow struct {
		p pkt
		b string
	}
	var est []flow
	rng := rand.New(rand.NewPCG(3, 4))
	// Fill until the table refuses a SYN: every bucket pair a new flow could
	// use is then full of established flows.
	for i := 0; ct.Stats().InsertFailures == 0 && i < 4*capacity; i++ {
		f := randomFlow(rng)
		f.proto, f.flags, f.dport = packet.ProtoTCP, syn, 80
		b := w.send(f)
		if ct.Stats().InsertFailures != 0 {
			break // this one was not tracked
		}
		f.flags = ack
		if w.send(f) != b {
			t.Fatal("handshake split")
		}
		est = append(est, flow{f, b})
	}
	if ct.Stats().EvictedLRU != 0 || len(est) < capacity*3/4 {
		t.Fatalf("fill: %d flows in %d slots, %d evictions", len(est), capacity, ct.Stats().EvictedLRU)
	}
	for range 10 * capacity {
		f := randomFlow(rng)
		f.proto, f.flags, f.dport = packet.ProtoTCP, syn, 80
		if got := w.send(f); len(got) > 15 {
			t.Fatalf("SYN during the flood: %s", got) // still forwarded, statelessly
		}
	}
	w.switchAll()
	lost := 0
	for _, f := range est {
		if w.send(f.p) != f.b {
			lost++
		}
	}
	if lost != 0 {
		t.Errorf("%d of %d established flows lost their backend to a SYN flood of %d", lost, len(est), 10*capacity)
	}
	if ct.ArenaBytes() != arena {
		t.Errorf("arena grew from %d to %d bytes", arena, ct.ArenaBytes())
	}
	if st := ct.Stats(); st.EvictedLRU != 0 {
		t.Errorf("flood: %d confirmed entries evicted", st.EvictedLRU)
	}
}

func TestDecideAllocatesNothing(t *testing.T) {
	w := newWorld(t, ruleSpec{protocol: RuleL3Default, allPorts: true, affinity: hash.AffinityClientIP, mode: hash.PerSession, fragTrk: true, backends: names(5)})
	frag := udp("198.51.100.1", 5)
	frag.frag, frag.fragID = packet.FragNonFirst, 3
	quoted := &packet.Tuple{Src: testVIP, Dst: addr16("198.51.100.1"), SrcPort: 80, DstPort: 4, Proto: packet.ProtoTCP}
	for _, p := range []pkt{tcp("198.51.100.1", 4, syn), tcp("198.51.100.1", 4, ack), udp("198.51.100.2", 9), frag,
		{src: "198.51.100.3", proto: packet.ProtoICMP, icmp: 3, inner: quoted}, {src: "198.51.100.3", proto: packet.ProtoICMP, icmp: 8}} {
		m := p.meta()
		if a := testing.AllocsPerRun(200, func() { w.snap.Decide(m, w.q, w.now) }); a != 0 {
			t.Errorf("Decide(%+v) allocates %v times", p, a)
		}
	}
}
