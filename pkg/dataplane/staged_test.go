package dataplane

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

// TestBatchEqualsOneAtATime: the staged worker (prepare a whole batch,
// prefetch, then finish in order) places every packet on the backend
// that Decide, one packet at a time on a twin of the same tables, picks,
// and leaves the conntrack table with the same counters: inserts,
// re-selections, hits, evictions. The stream repeats a few hundred flows
// of SYNs, ACKs, FINs and UDP in batches of random size (so one batch
// often holds several packets of one new flow) over a small table that
// evicts.
func TestBatchEqualsOneAtATime(t *testing.T) {
	for _, spec := range []ruleSpec{
		{protocol: RuleL3Default, backends: names(7)},
		{protocol: RuleL3Default, backends: names(7), affinity: 1},
		{protocol: RuleL3Default, backends: names(7), affinity: 3, mode: 1},
	} {
		fw := newFakeWorker(t, spec, encap.IPIP, 1500)
		ct, err := conntrack.New(256, 1) // both tables: same size and seed
		if err != nil {
			t.Fatal(err)
		}
		fw.wk.tables.Conntrack = ct
		twin := newWorld(t, spec)
		twin.q.Conntrack, _ = conntrack.New(256, 1)
		// New entries live as long as confirmed ones here: the worker's
		// sweep (which the twin has not) would otherwise reclaim the many
		// unconfirmed ones at other moments than the twin's lookups, and
		// the counters compared below would differ for that alone.
		ct.SetUnconfirmedIdle(conntrack.DefaultIdle)
		twin.q.Conntrack.SetUnconfirmedIdle(conntrack.DefaultIdle)
		sess, _ := conntrack.NewShared(1<<12, 2) // the worker's own, fresh
		fw.wk.tables.Sessions = sess
		rng := rand.New(rand.NewPCG(11, uint64(spec.affinity)))
		srcs := clients(60)
		for round := range 300 {
			var frames [][]byte
			var want []string
			twin.now = conntrack.Now(fw.clock)
			for range 1 + rng.IntN(Batch) {
				src, sport := srcs[rng.IntN(len(srcs))], uint16(40000+rng.IntN(8))
				s := packettest.Spec{Src: netip.MustParseAddr(src), Dst: netip.AddrFrom16(testVIP).Unmap(), Proto: layers.IPProtocolTCP,
					SrcPort: sport, DstPort: 80, DF: true, Payload: []byte("x")}
				switch rng.IntN(5) {
				case 0:
					s.SYN = true
				case 1:
					s.ACK, s.FIN = true, true
				case 2:
					s.Proto = layers.IPProtocolUDP
				default:
					s.ACK = true
				}
				f := packettest.Frame(s)
				m, res := packet.Parse(f)
				if res != packet.OK {
					t.Fatal(res)
				}
				d := twin.snap.Decide(&m, twin.q, twin.now)
				if d.Verdict != Tx {
					t.Fatalf("twin: %+v", d)
				}
				frames = append(frames, f)
				want = append(want, twin.rule.Backends[d.Backend].Name)
			}
			out := fw.run(frames...)
			if len(out) != len(frames) {
				t.Fatalf("round %d: %d of %d frames out", round, len(out), len(frames))
			}
			for i, o := range out {
				m, _ := packet.Parse(o)
				if got := netip.AddrFrom16(m.Dst).Unmap().String(); got != want[i] {
					t.Fatalf("round %d, packet %d: worker sent to %s, one at a time %s", round, i, got, want[i])
				}
			}
			fw.clock.Advance(time.Duration(rng.IntN(3)) * time.Second)
		}
		a, b := ct.Stats(), twin.q.Conntrack.Stats()
		// The worker's sweep reclaims some expired entries (Expired) that
		// the twin, which does not sweep, finds as victims of an insert
		// (EvictedExpired): the same entries under two names.
		for _, s := range []*conntrack.Stats{&a, &b} {
			s.Expired, s.EvictedExpired = s.Expired+s.EvictedExpired, 0
		}
		if a != b {
			t.Errorf("affinity %d: conntrack stats differ:\n worker %+v\n  twin  %+v", spec.affinity, a, b)
		}
		if spec.mode == 0 && (a.Inserts == 0 || a.Hits == 0 || a.EvictedLRU+a.EvictedUnconfirmed == 0) {
			t.Errorf("affinity %d: the stream did not exercise inserts, hits and evictions: %+v", spec.affinity, a)
		}
	}
}

// TestTwoPacketsOfANewFlowInOneBatch: the first ACK of an unknown flow
// inserts its entry, the second, in the same batch, is placed by it.
func TestTwoPacketsOfANewFlowInOneBatch(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(5)}, encap.IPIP, 1500)
	f := tcpFrame("198.51.100.77", 4242, false)
	out := fw.run(f, f)
	if len(out) != 2 {
		t.Fatalf("%d frames out", len(out))
	}
	m0, _ := packet.Parse(out[0])
	m1, _ := packet.Parse(out[1])
	if m0.Dst != m1.Dst {
		t.Errorf("the two packets went to %v and %v", m0.Dst, m1.Dst)
	}
	st := fw.w.q.Conntrack.Stats()
	if st.Inserts != 1 || st.Hits != 1 || fw.wk.Counters.TrackedHit.Load() != 1 {
		t.Errorf("inserts %d hits %d tracked %d; want 1 each", st.Inserts, st.Hits, fw.wk.Counters.TrackedHit.Load())
	}
}
