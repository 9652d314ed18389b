package fleet

import (
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/spsc"
)

// BenchmarkSyncTraffic measures what sharing costs on the wire and in
// CPU, with two nodes on loopback (one sends, one receives and applies),
// fed as the workers' scans feed a node: 100 000 exceptions on active
// flows, each handed over again with a moved deadline (so each is a
// record), at two rates:
//
//   - exceptions=100k: a refresh pass over all of them every 10 s (the
//     default refresh): 10 000 records a second, what sharing only the
//     exceptions costs at 100 000 of them;
//   - newflows=100k/s: 100 000 records a second, what sharing every new
//     flow costs at 100 000 new flows a second (IPVS's sync daemon,
//     pfsync), whatever the tables do.
//
// One iteration is one second of traffic. Reported: records, datagrams
// and UDP payload bytes per second to one peer, the CPU of both nodes and
// the feeding, in cores (process CPU time over wall time), and CPU
// nanoseconds per record.
func BenchmarkSyncTraffic(b *testing.B) {
	for _, tc := range []struct {
		name string
		rate int // records per second
	}{{"exceptions=100k", 10000}, {"newflows=100k/s", 100000}} {
		b.Run(tc.name, func(b *testing.B) {
			port := freePort(b)
			snap := testSnapshot(b, 0, backends)
			quiet := func(o *Options) {
				o.SendRate, o.Log = 1000000, slog.New(slog.DiscardHandler)
			}
			a := startNode(b, port, 51, []int{52}, snap, quiet, func(o *Options) { o.Outboxes[0], _ = spsc.New[dataplane.Sighting](1 << 16) })
			r := startNode(b, port, 52, []int{51}, testSnapshot(b, 0, backends), quiet, func(o *Options) {
				o.Table, _ = conntrack.NewShared(1<<20, 52)
			})
			eventually(b, 10*time.Second, "joined", func() bool { return a.n.Joined() && r.n.Joined() })
			const n = 100000
			keys := make([]hash.Key, 0, n)
			for i := range n {
				keys = append(keys, key4(fmt.Sprintf("198.%d.%d.%d", 18+i>>16, (i>>8)&255, i&255), "203.0.113.10", uint16(1024+i%60000), 80, 6, hash.Tuple5))
			}
			web := a.webSlot()
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { // the workers: tc.rate sightings a second, in 10 ms steps
				defer close(done)
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				pass, next, start := uint32(1), 0, time.Now()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					// As many as are due since the start: a step the
					// scheduler delayed is made up, not lost.
					for range int(time.Since(start).Seconds()*float64(tc.rate)) - next {
						i := next % n
						s := dataplane.Sighting{Key: keys[i], Rule: web, Value: conntrack.Value{Backend: uint32(i % 4), BackendGen: snap.Rules[web].Backends[i%4].Stamp()},
							ExpiresIn: conntrack.TicksOf(60 * time.Second), Pass: pass}
						for !a.out.Push(&s) {
							time.Sleep(time.Millisecond)
						}
						if next++; next%n == 0 {
							end := dataplane.Sighting{End: true, Pass: pass}
							for !a.out.Push(&end) {
								time.Sleep(time.Millisecond)
							}
							pass++
						}
					}
				}
			}()
			var once sync.Once
			stopFeed := func() { once.Do(func() { close(stop); <-done }) }
			defer stopFeed()
			// Warm up: every exception owned, sent once and held.
			eventually(b, 60*time.Second, "warm", func() bool { return a.statusWithin(30*time.Second).Owned == n })
			time.Sleep(2 * time.Second)
			// The receiver's count first: every record sent after s0 is
			// received after r0.
			r0, s0, cpu0, t0 := r.statusWithin(30*time.Second), a.statusWithin(30*time.Second), cpuTime(), time.Now()
			b.ResetTimer()
			for b.Loop() {
				time.Sleep(time.Second)
			}
			s1, r1, cpu1, wall := a.statusWithin(30*time.Second), r.statusWithin(30*time.Second), cpuTime(), time.Since(t0)
			records := float64(s1.Peers[0].SentRecords - s0.Peers[0].SentRecords)
			sec := wall.Seconds()
			b.ReportMetric(records/sec, "records/s")
			b.ReportMetric(float64(s1.Peers[0].SentDatagrams-s0.Peers[0].SentDatagrams)/sec, "datagrams/s")
			b.ReportMetric(float64(s1.Peers[0].SentBytes-s0.Peers[0].SentBytes)/sec, "bytes/s")
			b.ReportMetric((cpu1-cpu0).Seconds()/sec, "cpu-cores")
			if records > 0 {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/records, "cpu-ns/record")
			}
			if records < float64(tc.rate)*sec*0.9 {
				b.Logf("sent %.0f records/s of the %d fed: the machine did not keep up", records/sec, tc.rate)
			}
			// Nothing sent is lost: once the feed stops, the receiver has
			// every record sent since s0 (at r1 the last ones may still
			// wait in its socket or queue on a busy machine).
			stopFeed()
			var sent, got uint64
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				sent = a.statusWithin(30 * time.Second).Peers[0].SentRecords - s0.Peers[0].SentRecords
				rs := r.statusWithin(30 * time.Second)
				if got = rs.Peers[0].RecvRecords - r0.Peers[0].RecvRecords; got >= sent {
					break
				}
				if time.Now().After(deadline) {
					b.Errorf("receiver got %d of %d records (drops %v, backlog %d)", got, sent, rs.Peers[0].Drops, rs.Backlog)
					break
				}
			}
			if lag := float64(s1.Peers[0].SentRecords-s0.Peers[0].SentRecords) - float64(r1.Peers[0].RecvRecords-r0.Peers[0].RecvRecords); lag > 0 {
				b.ReportMetric(lag, "records-behind")
			}
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
