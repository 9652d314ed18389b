package failover

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkCompute measures one control-plane recompute of a large rule
// (off the packet path: allocations are expected).
func BenchmarkCompute(b *testing.B) {
	for _, n := range []int{16, 1000} {
		b.Run(fmt.Sprintf("backends=%d", n), func(b *testing.B) {
			gs := []Group{primary("p0"), primary("p1"), failoverGroup("f0")}
			var bs []Backend
			for i := range n {
				h := up
				if i%5 == 0 {
					h = down
				}
				bs = append(bs, be(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255), gs[i%3].Name, h, weight(uint32(1+i%1000))))
			}
			p := DefaultPolicy()
			p.WeightedMaglev, p.FailoverRatio, p.AutoCapacityDrain = true, 0.5, true
			prev := mustCompute(b, p, gs, bs, nil, t0)
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Second)
				if _, err := Compute(p, gs, bs, prev, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEntryValid is the per-packet validity check of a conntrack hit
// (an entry of an older drain generation, so every comparison runs).
func BenchmarkEntryValid(b *testing.B) {
	st := mustCompute(b, DefaultPolicy(), []Group{primary("a")}, []Backend{be("a1", "a", up)}, nil, t0)
	g := st.Backends[0].Gens()
	s := g.Stamp() + 1
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		if g.Valid(s, true, true) {
			n++
		}
	}
	_ = n
}
