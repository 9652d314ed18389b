package conntrack

import (
	"github.com/xlbnet/xlb/pkg/benchutil"
	"testing"

	"github.com/xlbnet/xlb/hash"
)

var sinkU64 uint64

// BenchmarkSum64 calibrates the machine: hash.Sum64 is part of every
// Lookup and Insert.
func BenchmarkSum64(b *testing.B) {
	k := flowKey(1)
	cpu := benchutil.Process()
	for b.Loop() {
		sinkU64 += hash.Sum64(&k, sinkU64)
	}
	cpu.Report(b, "cpu-ns/op")
}
