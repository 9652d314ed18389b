package dataplane

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

// finder looks entries up in the world's own tables, as the daemon does
// through the tables' off-path handles.
func (w *world) finder() EntryFinder {
	return func(k *hash.Key, rule uint16, shared bool) (conntrack.Value, bool) {
		if shared {
			return w.q.Sessions.Get(k, rule, w.now, 0)
		}
		// syn = true: do not confirm anything while looking.
		if e := w.q.Conntrack.Lookup(k, rule, w.now, w.rule.Idle, true); e != nil {
			return e.Value(), true
		}
		return conntrack.Value{}, false
	}
}

// TestExplainAgreesWithDecide: for every affinity and mode, through
// traffic, a change of the eligible set and a drained backend, Explain
// predicts exactly the backend Decide then picks, and whether an entry
// decided.
func TestExplainAgreesWithDecide(t *testing.T) {
	for _, aff := range []hash.Affinity{hash.AffinityNone, hash.AffinityClientIPPortProto, hash.AffinityClientIPProto, hash.AffinityClientIP} {
		for _, mode := range []hash.TrackingMode{hash.PerConnection, hash.PerSession} {
			t.Run(fmt.Sprintf("affinity%d/mode%d", aff, mode), func(t *testing.T) {
				bs := names(6)
				w := newWorld(t, ruleSpec{affinity: aff, mode: mode, protocol: RuleL3Default, backends: bs})
				rng := rand.New(rand.NewPCG(1, uint64(aff)<<8|uint64(mode)))
				srcs := clients(40)
				random := func() pkt {
					p := tcp(srcs[rng.IntN(len(srcs))], uint16(40000+rng.IntN(20)), []uint8{syn, ack, ack, fin}[rng.IntN(4)])
					if rng.IntN(3) == 0 {
						p = udp(p.src, p.sport)
					}
					return p
				}
				tracked, total := 0, 0
				for phase := range 3 {
					switch phase {
					case 1: // a backend leaves the eligible set: its entries still hold (no drain)
						w.setEligible(bs[1:], nil)
					case 2: // and is drained with an expired deadline: its entries are invalid
						w.backend(bs[0], func(b *Backend) { b.DrainGen++; b.DrainFloor = b.DrainGen; b.DrainUntil = w.now })
					}
					for range 400 {
						p := random()
						m := p.meta()
						x := w.snap.Explain(m, w.now, w.finder())
						d := w.snap.Decide(m, w.q, w.now)
						if !x.Matched || x.Decision.Verdict != d.Verdict || x.Decision.Backend != d.Backend || x.Decision.Tracked != d.Tracked {
							t.Fatalf("phase %d, %+v: Explain says %+v (entry found %v valid %v), Decide %+v", phase, p, x.Decision, x.EntryFound, x.EntryValid, d)
						}
						if x.EntryFound && w.snap.EntryValid(x.Rule, x.Entry, m.Proto, w.now) != x.EntryValid {
							t.Fatalf("EntryValid disagrees with Explain")
						}
						if x.Selection != hash.SelectionKey(m, aff) || x.Hash != hash.SelectionHash(m, aff, testSeed) {
							t.Fatalf("selection key/hash differ from hash's")
						}
						if x.MaglevBackend != w.snap.Rules[0].Table.SlotIDs()[x.Slot] {
							t.Fatalf("slot %d does not hold the Maglev backend", x.Slot)
						}
						if d.Tracked {
							tracked++
						}
						total++
						w.advance(conntrack.TicksPerSecond / 10)
					}
				}
				if tracked == 0 || tracked == total {
					t.Errorf("%d of %d packets decided by an entry: the test exercises only one path", tracked, total)
				}
			})
		}
	}
}

func TestExplainUnmatched(t *testing.T) {
	w := newWorld(t, ruleSpec{protocol: RuleTCP, backends: names(2)})
	for _, p := range []pkt{
		{src: "198.51.100.1", sport: 1, dport: 9999, proto: packet.ProtoTCP},                // port not in the rule
		{src: "198.51.100.1", sport: 1, dport: 80, proto: packet.ProtoUDP},                  // protocol
		{src: "198.51.100.1", proto: packet.ProtoICMP, icmp: 8},                             // ICMP
		{src: "198.51.100.1", proto: packet.ProtoTCP, frag: packet.FragNonFirst, dport: 80}, // fragment
	} {
		if x := w.snap.Explain(p.meta(), w.now, w.finder()); x.Matched || x.Decision.Verdict != Drop {
			t.Errorf("%+v: %+v", p, x)
		}
	}
	// An empty eligible set: matched, no backend.
	w.setEligible([]string{}, nil)
	x := w.snap.Explain(tcp("198.51.100.1", 1, syn).meta(), w.now, nil)
	if !x.Matched || x.MaglevOK || x.Decision.Reason != ReasonNoBackend {
		t.Errorf("empty set: %+v", x)
	}
}
