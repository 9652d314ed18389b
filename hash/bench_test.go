package hash

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/xlbnet/xlb/pkg/benchutil"
	"github.com/xlbnet/xlb/pkg/packet"
)

func BenchmarkMaglevBuild(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			bs := testBackends(n, 100)
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu := benchutil.Thread()
			for b.Loop() {
				if _, err := Build(bs, testM, 0x5eed); err != nil {
					b.Fatal(err)
				}
			}
			cpu.Report(b, "cpu-ns/op")
		})
	}
}

// BenchmarkMaglevBuildWeighted is the same with unequal weights, where
// turns must be ordered by time within buckets.
func BenchmarkMaglevBuildWeighted(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			bs := testBackends(n, 0)
			for i := range bs {
				bs[i].Weight = uint32(1 + i*7919%1000)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(bs, testM, 0x5eed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// lookupFixture returns a 100-backend table and 256 parsed TCP packets of
// distinct flows: few enough to stay in L1 like the Meta the parser has
// just written, while their hashes spread over the whole table.
func lookupFixture(b *testing.B) (*MaglevTable, []packet.Meta) {
	tab, err := Build(testBackends(100, 1), testM, 0x5eed)
	if err != nil {
		b.Fatal(err)
	}
	metas := make([]packet.Meta, 256)
	for i := range metas {
		m := testMeta(packet.ProtoTCP, packet.FragNone)
		m.Src[14], m.Src[15] = byte(i>>8), byte(i)
		m.SrcPort = uint16(1024 + i*13)
		metas[i] = *m
	}
	return tab, metas
}

// BenchmarkLookup measures the per-packet selection work together: build
// the selection key from a parsed Meta (in place, as the packet path
// does), hash it with Sum64, look the hash up in the Maglev table.
func BenchmarkLookup(b *testing.B) {
	tab, metas := lookupFixture(b)
	var sink uint32
	var k Key
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := &metas[i&(len(metas)-1)]
		i++
		k.SetSelection(m, AffinityNone)
		id, _ := tab.Lookup(Sum64(&k, 0x5eed))
		sink += id
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
	_ = sink
}

// BenchmarkLookupByValue is BenchmarkLookup with the by-value SelectionKey,
// to show what the struct copy costs.
func BenchmarkLookupByValue(b *testing.B) {
	tab, metas := lookupFixture(b)
	var sink uint32
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := &metas[i&(len(metas)-1)]
		i++
		k := SelectionKey(m, AffinityNone)
		id, _ := tab.Lookup(Sum64(&k, 0x5eed))
		sink += id
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
	_ = sink
}

// BenchmarkLookupFused is BenchmarkLookup with SelectionHash, which
// hashes the selection key without building it.
func BenchmarkLookupFused(b *testing.B) {
	tab, metas := lookupFixture(b)
	var sink uint32
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := &metas[i&(len(metas)-1)]
		i++
		id, _ := tab.Lookup(SelectionHash(m, AffinityNone, 0x5eed))
		sink += id
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
	_ = sink
}

// BenchmarkSum64 hashes independent keys (as a batch of packets would).
func BenchmarkSum64(b *testing.B) {
	k := sanityKey()
	var sink uint64
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k.SrcPort = uint16(i)
		i++
		sink += Sum64(&k, 0x5eed)
	}
	_ = sink
}
