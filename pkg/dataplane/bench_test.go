package dataplane

import (
	"runtime"

	"github.com/xlbnet/xlb/pkg/benchutil"
	"math/rand/v2"
	"testing"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

// BenchmarkDecide measures Decide for a tracked established flow (hit), a
// non-SYN packet of an unknown flow (miss: Maglev and insert), and a SYN
// (re-selection and insert), over 4096 flows cycling through a 1M-entry
// table, as one worker sees them. miss+peers is the miss with a fleet's
// peer table (64 Ki exceptions of other flows, with its presence filter)
// consulted first: what [fleet] adds to every miss. hit+ranges is the hit
// with 1000 source ranges on the rule (every client admitted, by a /24
// three trie levels down), refused a packet those ranges refuse.
func BenchmarkDecide(b *testing.B) {
	for _, mode := range []string{"hit", "miss", "syn", "miss+peers", "hit+ranges", "refused"} {
		b.Run(mode, func(b *testing.B) {
			spec := ruleSpec{protocol: RuleTCP, backends: names(100)}
			want := Tx
			switch mode {
			case "hit+ranges":
				spec.sources = sourceBenchPrefixes(1000)
				mode = "hit"
			case "refused":
				spec.sources = sourceBenchPrefixes(1000)[512:] // none of 198.18.0.0/15
				mode, want = "hit", Drop
			}
			w := newWorld(&testing.T{}, spec)
			ct, err := conntrack.New(1<<16, 1)
			if err != nil {
				b.Fatal(err)
			}
			w.q.Conntrack = ct
			if mode == "miss+peers" {
				w.q.Peers = benchPeers(b)
				mode = "miss"
			}
			rng := rand.New(rand.NewPCG(1, 2))
			const n = 4096
			metas := make([]packet.Meta, n)
			for i := range metas {
				f := randomFlow(rng)
				f.proto, f.dport, f.flags = packet.ProtoTCP, 80, ack
				if mode == "syn" {
					f.flags = syn
				}
				metas[i] = *f.meta()
				if mode == "hit" {
					w.snap.Decide(&metas[i], w.q, w.now)
				}
			}
			i := 0
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu := benchutil.Thread()
			for b.Loop() {
				m := &metas[i&(n-1)]
				if mode == "miss" {
					m.SrcPort++ // a flow never seen
				}
				if d := w.snap.Decide(m, w.q, w.now); d.Verdict != want {
					b.Fatal(d.Reason)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
			cpu.Report(b, "cpu-ns/pkt")
		})
	}
}

// benchPeers is a peer table of 2^17 slots holding 2^16 exceptions of
// flows the benchmarks never send.
func benchPeers(b *testing.B) *conntrack.Shared {
	peers, err := conntrack.NewShared(1<<17, 7)
	if err != nil {
		b.Fatal(err)
	}
	peers.EnablePresence(8, 0)
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1 << 16 {
		f := randomFlow(rng)
		f.src = "192.0.2.200"
		f.sport = uint16(rng.IntN(65536))
		k, _ := hashTrackingKey(f)
		peers.Set(&k, 0, conntrack.Value{Backend: 1}, 0, conntrack.DefaultIdle)
	}
	return peers
}

func hashTrackingKey(f pkt) (hash.Key, bool) { return hash.TrackingKey(f.meta(), 0, 0) }
