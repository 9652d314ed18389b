package lab_test

import (
	"context"
	"testing"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// BenchmarkHTTPKernelStandIn measures one HTTP request (new TCP connection,
// namespace switch for the dial, request, reply) through the lab with the
// kernel's ECMP routing as the forwarder: the baseline to read a real
// forwarder's numbers in the same lab against.
func BenchmarkHTTPKernelStandIn(b *testing.B) {
	testutil.RequireRoot(b)
	l, err := lab.Up(context.Background(), lab.Options{Prefix: testutil.Unique("lb") + "-", ClientAddrs: 50})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if err := l.KernelForward(0, 1, 2); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	url := l.VIPURL(l.Opts.VIP4)
	i := 0
	for b.Loop() {
		if _, err := l.HTTPGet(ctx, l.ClientAddrs4[i%len(l.ClientAddrs4)], url); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/req")
}
