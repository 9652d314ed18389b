package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/benchutil"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/spsc"
)

// receiverEnv, set to a port, makes the test binary the receiving node of
// BenchmarkSyncTraffic (a process of its own, so its CPU is its own).
const receiverEnv = "XLB_FLEET_BENCH_RECEIVER"

func TestMain(m *testing.M) {
	if port := os.Getenv(receiverEnv); port != "" {
		if err := runReceiver(port, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "fleet benchmark receiver:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// BenchmarkSyncTraffic measures what sharing costs on the wire and in
// CPU, with two nodes on loopback: the sender (127.0.0.51) in the
// benchmark's process, fed as the workers' scans feed a node, and the
// receiver (127.0.0.52), which authenticates and applies into its peer
// table, in a process of its own. 100 000 flows, each handed over again
// and again, at two rates:
//
//   - exceptions=100k: 100 000 exceptions on active flows, a refresh pass
//     over all of them every 10 s (the default refresh), each with a
//     deadline moved by 10 s: 10 000 records a second, what sharing only
//     the exceptions costs at 100 000 of them;
//   - newflows=100k/s: 100 000 records a second, what sharing every new
//     flow costs at 100 000 new flows a second (IPVS's sync daemon,
//     pfsync), whatever the tables do. A pass over the 100 000 flows takes
//     a second and moves each flow to the next backend, so every sighting
//     is news to the node and to the peer, as a new flow is (a deadline
//     moved by only the pass's second would not be: the node sends an
//     unchanged entry again only when its deadline moved by more than a
//     second, and at the clock's 1/16 s that is about every other pass).
//
// The window is b.N seconds. Reported, per second of the window: records
// offered (handed to the node), sent and delivered (received by the
// peer; over a short window on a busy machine this swings with the
// receiver's backlog, reported at both ends), datagrams and UDP payload bytes sent to the one peer; the CPU of
// the sender (its process less the feed's thread), of the receiver (its
// process) and of the feed, in cores, and per record sent or delivered; the
// records queued at the sender at the window's end (a backlog that grows
// is a sender that does not keep up); and the counts of everything that
// overflowed in the window: a full hand-off
// ring (the feed retries at its next step), send errors, datagrams the
// receiver's loop had no room for (backlog) and the receiver's socket
// dropped (the kernel's count). On loopback the sender's system time
// includes the kernel's delivery to the receiver's socket.
func BenchmarkSyncTraffic(b *testing.B) {
	for _, tc := range []struct {
		name   string
		rate   int  // records per second
		rotate bool // every pass moves each flow to another backend
	}{{"exceptions=100k", 10000, false}, {"newflows=100k/s", 100000, true}} {
		b.Run(tc.name, func(b *testing.B) {
			port := freePort(b)
			rcv := startReceiver(b, port)
			snap := testSnapshot(b, 0, backends)
			a := startNode(b, port, 51, []int{52}, snap, func(o *Options) {
				o.SendRate, o.Log = 1000000, slog.New(slog.DiscardHandler)
				o.Outboxes[0], _ = spsc.New[dataplane.Sighting](1 << 16)
			})
			eventually(b, 10*time.Second, "joined", func() bool { return a.n.Joined() && rcv.report(b).Joined })
			const n = 100000
			keys := make([]hash.Key, 0, n)
			for i := range n {
				keys = append(keys, key4(fmt.Sprintf("198.%d.%d.%d", 18+i>>16, (i>>8)&255, i&255), "203.0.113.10", uint16(1024+i%60000), 80, 6, hash.Tuple5))
			}
			web := a.webSlot()
			var stamps [4]uint32
			for i := range stamps {
				stamps[i] = snap.Rules[web].Backends[i].Stamp()
			}
			var offered atomic.Uint64
			var feedCPU atomic.Int64 // the feed thread's CPU time, nanoseconds
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { // the workers: tc.rate sightings a second, in 10 ms steps
				defer close(done)
				runtime.LockOSThread() // its CPU is the thread's
				defer runtime.UnlockOSThread()
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
					// scheduler delayed is made up, not lost; a full ring
					// stops the step (the node drains it every 20 ms).
					pushed := 0
					for due := int(time.Since(start).Seconds()*float64(tc.rate)) - next; pushed < due; pushed++ {
						i := next % n
						be := uint32(i % 4)
						if tc.rotate {
							be = uint32((i + int(pass)) % 4)
						}
						s := dataplane.Sighting{Key: keys[i], Rule: web, Value: conntrack.Value{Backend: be, BackendGen: stamps[be]},
							ExpiresIn: conntrack.TicksOf(60 * time.Second), Pass: pass}
						if !a.out.Push(&s) {
							break
						}
						if next++; next%n == 0 {
							for !a.out.Push(&dataplane.Sighting{End: true, Pass: pass}) {
								time.Sleep(time.Millisecond)
							}
							pass++
						}
					}
					offered.Add(uint64(pushed))
					feedCPU.Store(int64(threadCPU()))
				}
			}()
			var once sync.Once
			stopFeed := func() { once.Do(func() { close(stop); <-done }) }
			defer stopFeed()
			// Warm up: every flow owned, sent once and held.
			eventually(b, 60*time.Second, "warm", func() bool { return a.statusWithin(30*time.Second).Owned == n })
			time.Sleep(2 * time.Second)
			// The receiver's count first, at both ends, so that what it is
			// behind is never negative.
			r0 := rcv.report(b)
			s0, o0, f0, cpu0, t0 := a.statusWithin(30*time.Second), offered.Load(), feedCPU.Load(), processCPU(), time.Now()
			b.ResetTimer()
			for b.Loop() {
				time.Sleep(time.Second)
			}
			r1 := rcv.report(b)
			s1, o1, f1, cpu1, wall := a.statusWithin(30*time.Second), offered.Load(), feedCPU.Load(), processCPU(), time.Since(t0)
			sec := wall.Seconds()
			ps0, ps1 := s0.Peers[0], s1.Peers[0]
			sent := float64(ps1.SentRecords - ps0.SentRecords)
			delivered := float64(r1.RecvRecords - r0.RecvRecords)
			b.ReportMetric(float64(o1-o0)/sec, "offered/s")
			b.ReportMetric(sent/sec, "records/s")
			b.ReportMetric(delivered/sec, "delivered/s")
			b.ReportMetric(float64(ps1.SentDatagrams-ps0.SentDatagrams)/sec, "datagrams/s")
			b.ReportMetric(float64(ps1.SentBytes-ps0.SentBytes)/sec, "bytes/s")
			feed := time.Duration(f1 - f0)
			sender := cpu1 - cpu0 - feed
			receiver := time.Duration(r1.CPU - r0.CPU)
			b.ReportMetric(sender.Seconds()/sec, "sender-cores")
			b.ReportMetric(receiver.Seconds()/sec, "receiver-cores")
			b.ReportMetric(feed.Seconds()/sec, "feed-cores")
			if sent > 0 && delivered > 0 {
				b.ReportMetric(float64(sender.Nanoseconds())/sent, "sender-ns/record")
				b.ReportMetric(float64(receiver.Nanoseconds())/delivered, "receiver-ns/record")
			}
			// What the receiver had still to read at each end of the window
			// (in its socket or queue): delivered = sent - the change of it.
			b.ReportMetric(float64(ps0.SentRecords)-float64(r0.RecvRecords), "behind-at-start")
			b.ReportMetric(float64(ps1.SentRecords)-float64(r1.RecvRecords), "behind-at-end")
			b.ReportMetric(float64(s1.Queued), "queued")
			b.ReportMetric(float64(s1.HandoffFull-s0.HandoffFull), "handoff-full")
			b.ReportMetric(float64(ps1.SendErrors-ps0.SendErrors), "send-errors")
			b.ReportMetric(float64(r1.Backlog-r0.Backlog), "backlog-drops")
			b.ReportMetric(float64(r1.SocketDrops-r0.SocketDrops), "socket-drops")
			if delivered < float64(tc.rate)*sec*0.95 {
				b.Logf("delivered %.0f records/s of %d due (offered %.0f/s, sent %.0f/s); load %s", delivered/sec, tc.rate, float64(o1-o0)/sec, sent/sec, loadavg())
			}
			// Nothing sent is lost uncounted: once the feed stops, the
			// receiver has every record the sender ever sent it (at r1 the
			// last ones may still wait in its socket or queue on a busy
			// machine), but for those in datagrams the kernel dropped and
			// counted.
			stopFeed()
			var rr receiverReport
			var all uint64
			for last, still := uint64(0), time.Now(); ; time.Sleep(50 * time.Millisecond) {
				all, rr = a.statusWithin(30 * time.Second).Peers[0].SentRecords, rcv.report(b)
				if rr.RecvRecords != last {
					last, still = rr.RecvRecords, time.Now()
				}
				if rr.RecvRecords >= all || time.Since(still) > 2*time.Second {
					break
				}
			}
			if lost := int64(all) - int64(rr.RecvRecords); lost > 0 {
				dropped := max(rr.Backlog, rr.SocketDrops)
				if lost > int64(dropped)*maxRecordsIPv4 {
					b.Errorf("receiver got %d of %d records, %d dropped datagrams counted (drops %v)", rr.RecvRecords, all, dropped, rr.Drops)
				} else {
					b.Logf("receiver got %d of %d records: the rest in %d datagrams the kernel dropped and counted; load %s", rr.RecvRecords, all, dropped, loadavg())
				}
			}
		})
	}
}

// maxRecordsIPv4 is the most records of IPv4 flows a datagram carries.
const maxRecordsIPv4 = (maxBody - recordsHead) / 32

// receiverReport is what the receiver process answers each request with.
type receiverReport struct {
	Joined                                bool
	RecvRecords, RecvDatagrams, RecvBytes uint64
	Drops                                 map[string]uint64
	Backlog                               uint64
	SocketDrops                           uint64 // the kernel's drops on the node's socket
	CPU                                   int64  // the process's CPU time, nanoseconds
}

// receiver is the benchmark's receiving node, a child process: a line on
// its stdin asks for a report, closing stdin ends it.
type receiver struct {
	*benchutil.Child
}

func startReceiver(b *testing.B, port uint16) *receiver {
	b.Helper()
	cmd, err := benchutil.Self(exec.Command)
	if err != nil {
		b.Fatal(err)
	}
	return &receiver{benchutil.StartChild(b, cmd, fmt.Sprintf("%s=%d", receiverEnv, port))}
}

func (r *receiver) report(b *testing.B) receiverReport {
	b.Helper()
	if _, err := io.WriteString(r.In, "report\n"); err != nil {
		b.Fatalf("receiver: %v", err)
	}
	line, err := r.Out.ReadBytes('\n')
	if err != nil {
		b.Fatalf("receiver ended: %v", err)
	}
	var rr receiverReport
	if err := json.Unmarshal(line, &rr); err != nil {
		b.Fatalf("receiver's report %q: %v", line, err)
	}
	return rr
}

// runReceiver is the receiver process: a node at 127.0.0.52 with the
// sender as its peer, a peer table of 2^20 slots, answering each line
// read from in with a report on out until in closes.
func runReceiver(portArg string, in io.Reader, out io.Writer) error {
	port, err := strconv.ParseUint(portArg, 10, 16)
	if err != nil {
		return err
	}
	snap, err := newSnapshot(0, backends)
	if err != nil {
		return err
	}
	keys, err := NewKeyring(testKey)
	if err != nil {
		return err
	}
	table, err := conntrack.NewShared(1<<20, 52)
	if err != nil {
		return err
	}
	ring, err := spsc.New[dataplane.Sighting](1024)
	if err != nil {
		return err
	}
	me := netip.AddrFrom4([4]byte{127, 0, 0, 52})
	n, err := New(Options{Listen: me, Port: uint16(port), Peers: []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 51})},
		Keys: keys, Table: table, Outboxes: []*spsc.Ring[dataplane.Sighting]{ring},
		Snapshot: func() *dataplane.Snapshot { return snap }, Clock: conntrack.NewSystemClock(),
		Heartbeat: 200 * time.Millisecond, Refresh: time.Second, JoinTimeout: 3 * time.Second, SendRate: 1000000})
	if err != nil {
		return err
	}
	n.Start(context.Background())
	defer n.Close()
	lines, enc := bufio.NewScanner(in), json.NewEncoder(out)
	for lines.Scan() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := n.Status(ctx)
		cancel()
		if err != nil {
			return err
		}
		rr := receiverReport{Joined: st.Joined, Backlog: st.Backlog, SocketDrops: socketDrops(me, uint16(port)), CPU: processCPU().Nanoseconds()}
		if len(st.Peers) == 1 {
			p := st.Peers[0]
			rr.RecvRecords, rr.RecvDatagrams, rr.RecvBytes, rr.Drops = p.RecvRecords, p.RecvDatagrams, p.RecvBytes, p.Drops
		}
		if err := enc.Encode(&rr); err != nil {
			return err
		}
	}
	return lines.Err()
}

// socketDrops is the kernel's count of datagrams dropped on the UDP socket
// bound to a:port (the last column of /proc/net/udp), 0 when not found.
func socketDrops(a netip.Addr, port uint16) uint64 {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return 0
	}
	ip := a.As4()
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], port)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == local {
			d, _ := strconv.ParseUint(f[len(f)-1], 10, 64)
			return d
		}
	}
	return 0
}

func processCPU() time.Duration { d, _ := benchutil.ProcessCPU(); return d }
func threadCPU() time.Duration  { d, _ := benchutil.ThreadCPU(); return d }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}
