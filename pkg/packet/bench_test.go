package packet_test

import (
	"runtime"
	"testing"

	"github.com/xlbnet/xlb/pkg/benchutil"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

func goldenFrame(tb testing.TB, name string) []byte {
	for _, g := range goldens() {
		if g.name == name {
			return g.frame
		}
	}
	tb.Fatalf("no golden frame %q", name)
	return nil
}

var sinkMeta packet.Meta

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct{ name, frame string }{
		{"tcp4", "tcp4-ack-payload"},
		{"udp6", "udp6"},
		{"frag4", "frag4-first-udp"},
	} {
		frame := goldenFrame(b, bc.frame)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			// Pinned so that thread CPU time covers exactly this loop.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0, cpuOK := benchutil.ThreadCPU()
			var res packet.Result
			for b.Loop() {
				sinkMeta, res = packet.Parse(frame)
			}
			cpu1, _ := benchutil.ThreadCPU()
			if res != packet.OK {
				b.Fatalf("Parse() = %v", res)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
			if cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/pkt")
			}
		})
	}
}

func BenchmarkChecksum(b *testing.B) {
	buf := packettest.Bytes(1500)
	b.SetBytes(int64(len(buf)))
	var s uint16
	for b.Loop() {
		s = packet.Checksum(buf, s)
	}
	_ = s
}

//go:noinline
func returnMetaOnly(frame []byte) (m packet.Meta, r packet.Result) {
	m.L3Off = uint16(len(frame))
	return m, packet.OK
}

// BenchmarkMetaReturnFloor measures what any Parse costs before reading a
// byte: the call, zeroing the 120-byte Meta and copying it out. Subtract
// it from BenchmarkParse to see the parsing work itself.
func BenchmarkMetaReturnFloor(b *testing.B) {
	frame := goldenFrame(b, "udp6")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, cpuOK := benchutil.ThreadCPU()
	for b.Loop() {
		sinkMeta, _ = returnMetaOnly(frame)
	}
	cpu1, _ := benchutil.ThreadCPU()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
	if cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/pkt")
	}
}
