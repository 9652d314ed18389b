package bench

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/spsc"
)

// The scan interval of the fleet benchmarks: one tick (with the worker's
// clock moved a tick a round, a pass is always under way: the worst case)
// or the default 10 s (after its first pass the scan waits).
const (
	fleetScanning = 1
	fleetRefresh  = 10 * conntrack.TicksPerSecond
)

// withFleet gives pl's worker what [fleet] gives it: a peer table (2^17
// slots with its presence filter, holding 2^16 exceptions of flows the
// generator never sends) consulted on every miss, and the exception scan
// with its hand-off ring, drained after every round as the fleet node
// does every 20 ms. It returns what to call after each round: the drain,
// and with fleetScanning a tick of the worker's clock, so a refresh pass
// is always due (otherwise the clock stands: after the first pass over
// every entry the scan waits, as it does between two refreshes).
func withFleet(tb testing.TB, pl *pipeline, refresh conntrack.Ticks) func() {
	peers, err := conntrack.NewShared(1<<17, 9)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 1 << 16 {
		k := hash.Key{Src: netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(256))}).As16(), Dst: vip.As16(),
			SrcPort: uint16(rng.IntN(65536)), DstPort: 80, Proto: 6, Kind: hash.Tuple5}
		peers.Set(&k, 0, conntrack.Value{Backend: 1}, 0, conntrack.DefaultIdle)
	}
	peers.EnablePresence(8, 0)
	out, err := spsc.New[dataplane.Sighting](4096)
	if err != nil {
		tb.Fatal(err)
	}
	clock := &conntrack.FakeClock{}
	pl.wk = dataplane.NewWorker(pl.fake.Rings(), &pl.snap, dataplane.FlowTables{Conntrack: pl.ct, Sessions: pl.sess, Fragments: pl.frags, Peers: peers}, clock, nil)
	pl.wk.ShareExceptions(out, refresh)
	pl.wk.Step()
	buf := make([]dataplane.Sighting, 256)
	return func() {
		for out.Pop(buf) == len(buf) {
		}
		if refresh == fleetScanning {
			clock.Advance(time.Second / conntrack.TicksPerSecond) // a tick a round: a refresh is always due
		}
	}
}

// BenchmarkPipelineFleet is BenchmarkPipeline's IPIP cases with [fleet]:
// every miss consults the peer table; the worker scans its table for
// exceptions between batches, once and then every 10 s (<mix>), or
// continuously (<mix>/scanning). Compare with BenchmarkPipeline/ipip/<mix>
// of the same run.
func BenchmarkPipelineFleet(b *testing.B) {
	for _, mix := range mixes {
		for _, sc := range []struct {
			name    string
			refresh conntrack.Ticks
		}{{"", fleetRefresh}, {"/scanning", fleetScanning}} {
			b.Run("ipip/"+mix.name+sc.name, func(b *testing.B) {
				pl := newPipeline(b, encap.IPIP, mix.p)
				drain := withFleet(b, pl, sc.refresh)
				// Warm-up includes the first pass over every entry (2^17
				// buckets at 32 a batch) unless the scan runs all along.
				rounds := 4096 / batch * 2
				if sc.refresh == fleetRefresh {
					rounds = pl.ct.Buckets()/32 + 64
				}
				for range rounds {
					pl.round()
					drain()
				}
				measureRounds(b, pl, drain)
			})
		}
	}
}

// TestPipelineFleetForwards: with the peer table and the scan the
// pipeline still forwards everything, scans, and allocates nothing.
func TestPipelineFleetForwards(t *testing.T) {
	for _, mix := range mixes {
		pl := newPipeline(t, encap.IPIP, mix.p)
		drain := withFleet(t, pl, fleetScanning)
		for range 10 {
			if n := pl.round(); n != batch {
				t.Fatalf("%s: forwarded %d of %d", mix.name, n, batch)
			}
			drain()
		}
		if a := testing.AllocsPerRun(20, func() { pl.round(); drain() }); a != 0 {
			t.Errorf("%s: %v allocations per batch", mix.name, a)
		}
	}
}
