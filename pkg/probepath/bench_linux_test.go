package probepath

import (
	"context"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/health"
)

// BenchmarkProbes: TCP connect probes (connect, close), one after another,
// from the appliance namespace of the test bench to a server on the
// backend: direct (the appliance's socket to the backend's tunnel address,
// what path = "DIRECT" does) against the data path with DIRECT (MAC
// rewrite: the path's own cost, the backend does nothing more) and with
// IPIP and GUE (the backend's pkg/decap, in this process too, adds its
// read and write per packet). It reports probes/s and the process's CPU
// per probe (user + system; the backend's server and decap run in this
// process as well, the kernel's softirq work mostly not), to be read as
// ratios to direct measured in the same run (bench/README.md). The
// appliance namespace reuses TIME_WAIT 4-tuples (tcp_tw_reuse = 1): every
// probe goes to one address and port, and the benchmark measures what a
// probe costs, not how many a minute of TIME_WAIT allows
// (TestPortsAreSharedAcrossVIPs).
func BenchmarkProbes(b *testing.B) {
	bench := newBench(b)
	sh(b, bench.app, "sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1")
	bench.echo(b, netip.AddrPortFrom(beTunnel4, echoPort)) // for the direct probes
	p := bench.open(b)
	direct := health.DialIn(bench.app.Do, nil)
	for _, tc := range []struct {
		name string
		kind encap.Kind // 0: direct
	}{{"direct", 0}, {"datapath-DIRECT", encap.Direct}, {"datapath-IPIP", encap.IPIP}, {"datapath-GUE", encap.GUE}} {
		b.Run(tc.name, func(b *testing.B) {
			k := health.Key{Rule: tc.name, Backend: beTunnel4}
			dial := direct
			if tc.kind != 0 {
				tm, err := encap.NewTemplate(encap.Spec{Kind: tc.kind, SrcMAC: bench.appMAC, DstMAC: bench.beMAC, Src: appLink4, Dst: beTunnel4})
				if err != nil {
					b.Fatal(err)
				}
				bench.setTemplate(k, tm)
				dial = p.Dial
			}
			addr := netip.AddrPortFrom(beTunnel4, echoPort)
			probe := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				c, err := dial(ctx, "tcp", k, addr)
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
			probe() // warm: neighbour entries, the first registration
			before := cpuTime()
			start := time.Now()
			b.ResetTimer()
			for b.Loop() {
				probe()
			}
			b.StopTimer()
			elapsed, cpu := time.Since(start), cpuTime()-before
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "probes/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/probe")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
