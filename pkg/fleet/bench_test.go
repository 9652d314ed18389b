package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/spsc"
)

// BenchmarkSyncTraffic measures what sharing costs on the wire and in
// CPU, with two nodes on loopback (one sends, one receives and applies):
//
//   - exceptions=100k: a node owning 100 000 exceptions on active flows
//     sends each again once per Refresh (1 s here, so the second is one
//     refresh round; at the default 10 s divide the rates by ten);
//   - newflows=100k/s: the design that shares every new flow (IPVS's
//     sync daemon, pfsync), fed 100 000 new flows a second, each sent
//     once.
//
// One iteration is one second of traffic. Reported: records, datagrams
// and UDP payload bytes per second to one peer, the CPU of both nodes in
// cores (process CPU time over wall time, sender and receiver together,
// feeding included), and CPU nanoseconds per record.
func BenchmarkSyncTraffic(b *testing.B) {
	for _, mode := range []string{"exceptions=100k", "newflows=100k/s"} {
		b.Run(mode, func(b *testing.B) {
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
			sighting := func(k hash.Key, i int, left conntrack.Ticks, pass uint32) dataplane.Sighting {
				return dataplane.Sighting{Key: k, Rule: web, Value: conntrack.Value{Backend: uint32(i % 4), BackendGen: snap.Rules[web].Backends[i%4].Stamp()}, ExpiresIn: left, Pass: pass}
			}
			push := func(s *dataplane.Sighting) {
				for !a.out.Push(s) {
					time.Sleep(time.Millisecond)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			feed := make(chan int) // seconds to feed
			fed := make(chan struct{})
			go func() {
				pass := uint32(0)
				next := 0
				for secs := range feed {
					for range secs {
						start := time.Now()
						if mode == "exceptions=100k" {
							// One refresh round: every exception again,
							// its deadline moved (active flows).
							pass++
							left := conntrack.TicksOf(60 * time.Second)
							for i, k := range keys {
								s := sighting(k, i, left, pass)
								push(&s)
							}
							push(&dataplane.Sighting{End: true, Pass: pass})
						} else {
							// 2000 new flows every 20 ms, each once.
							for range 50 {
								for range 2000 {
									k := keys[next%n]
									k.Dst[15] = byte(next / n) // a new flow each time round
									s := sighting(k, next, conntrack.TicksOf(60*time.Second), 1)
									push(&s)
									next++
								}
								time.Sleep(time.Until(start.Add(time.Duration(next%100000) * 10 * time.Microsecond)))
							}
						}
						time.Sleep(time.Until(start.Add(time.Second)))
					}
					fed <- struct{}{}
				}
			}()
			_ = ctx
			// Warm up: the first round fills the owned map and the peer table.
			feed <- 1
			<-fed
			time.Sleep(500 * time.Millisecond)
			s0, r0, cpu0, t0 := a.status(), r.status(), cpuTime(), time.Now()
			b.ResetTimer()
			secs := 0
			for b.Loop() {
				feed <- 1
				<-fed
				secs++
			}
			time.Sleep(300 * time.Millisecond) // the last sends
			s1, r1, cpu1, wall := a.status(), r.status(), cpuTime(), time.Since(t0)
			close(feed)
			records := float64(s1.Peers[0].SentRecords - s0.Peers[0].SentRecords)
			sec := wall.Seconds()
			b.ReportMetric(records/sec, "records/s")
			b.ReportMetric(float64(s1.Peers[0].SentDatagrams-s0.Peers[0].SentDatagrams)/sec, "datagrams/s")
			b.ReportMetric(float64(s1.Peers[0].SentBytes-s0.Peers[0].SentBytes)/sec, "bytes/s")
			b.ReportMetric((cpu1-cpu0).Seconds()/sec, "cpu-cores")
			if records > 0 {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/records, "cpu-ns/record")
			}
			got := r1.Peers[0].RecvRecords - r0.Peers[0].RecvRecords
			if float64(got) < records*0.99 {
				b.Errorf("receiver got %d of %d records (drops %v, backlog %d)", got, uint64(records), r1.Peers[0].Drops, r1.Backlog)
			}
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
