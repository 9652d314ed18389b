package bench

import (
	"testing"

	"github.com/xlbnet/xlb/pkg/capture"
	"github.com/xlbnet/xlb/pkg/encap"
)

// BenchmarkPipelineCapture is BenchmarkPipeline's ipip/hit case with the
// capture hook in each state: off (no tap: one atomic load per batch, the
// state the other benchmarks measure), a tap whose filter matches nothing
// (a port no flow uses: the per-packet filter test), and taps that take
// everything at both points at the default and the highest rate (the
// rate limit admits that many copies per second, refusing the rest after
// a filter test and a credit check). The drain of the ring (the daemon's
// work) runs in the loop, as it would beside the worker.
func BenchmarkPipelineCapture(b *testing.B) {
	for _, c := range []struct {
		name string
		f    *capture.Filter
		rate int
	}{
		{"off", nil, 0},
		{"no-match", &capture.Filter{Port: 9}, capture.MaxRate},
		{"all-default-rate", &capture.Filter{}, capture.DefaultRate},
		{"all-max-rate", &capture.Filter{}, capture.MaxRate},
	} {
		b.Run(c.name, func(b *testing.B) {
			pl := newPipeline(b, encap.IPIP, mixes[0].p)
			warm(b, pl, 4096/batch*2, true)
			var s *capture.Session
			if c.f != nil {
				var err error
				if s, err = capture.NewSession(*c.f, 1, capture.Options{Rate: c.rate}); err != nil {
					b.Fatal(err)
				}
				pl.wk.SetCapture(s.Tap(0))
			}
			var drain func()
			if s != nil {
				drain = func() { s.Drain(func(int, *capture.Record, []byte) {}) }
			}
			n := measureRounds(b, pl, drain)
			if s != nil {
				st := s.Stats()
				b.ReportMetric(float64(st.Captured)/float64(n), "copied/pkt")
			}
		})
	}
}
