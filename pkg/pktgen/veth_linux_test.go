//go:build linux

package pktgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func ipCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// peerCounters reads the receive counters of dev in netns ns.
func peerCounters(t *testing.T, ns, dev string) (packets, bytes uint64) {
	t.Helper()
	var links []struct {
		Address string `json:"address"`
		Stats64 struct {
			RX struct {
				Packets uint64 `json:"packets"`
				Bytes   uint64 `json:"bytes"`
			} `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(ipCmd(t, "-n", ns, "-s", "-j", "link", "show", dev)), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link: %v", err)
	}
	return links[0].Stats64.RX.Packets, links[0].Stats64.RX.Bytes
}

// TestRunOnVeth sends a counted burst from two queues of a veth in one
// namespace and counts it on the peer in another: every packet arrives,
// with the configured size.
func TestRunOnVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and an AF_XDP socket")
	}
	suffix := fmt.Sprintf("%d", os.Getpid()%100000)
	a, b := "pgtest-a"+suffix, "pgtest-b"+suffix
	for _, ns := range []string{a, b} {
		ipCmd(t, "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		// No IPv6: no router solicitations or ND on the peer's counters.
		ipCmd(t, "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	ipCmd(t, "-n", a, "link", "add", "pg0", "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
		"peer", "name", "pg1", "netns", b, "numtxqueues", "2", "numrxqueues", "2")
	ipCmd(t, "-n", a, "addr", "add", "198.18.0.1/24", "dev", "pg0")
	ipCmd(t, "-n", a, "link", "set", "pg0", "up")
	ipCmd(t, "-n", b, "link", "set", "pg1", "up")
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(ipCmd(t, "-n", b, "-j", "link", "show", "pg1")), &links); err != nil || len(links) != 1 {
		t.Fatalf("peer MAC: %v", err)
	}
	peerMAC, err := net.ParseMAC(links[0].Address)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	before, beforeBytes := peerCounters(t, b, "pg1")

	const perThread = 3000
	cfg := Config{Netns: a, Ifname: "pg0", Threads: 2, Count: perThread, Batch: 32, Bind: "copy",
		Packet: Packet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: peerMAC,
			Src: mustRange(t, "198.19.0.0/16"), Dst: mustRange(t, "198.18.0.42"), Proto: TCPSYN, Flows: 100, Size: 128}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	rep.WriteText(&text)
	t.Logf("\n%s", text.String())
	for i, r := range rep.Results {
		if r.Packets != perThread || r.Errors != 0 || r.Size != 128 || r.Device != fmt.Sprintf("pg0@%d", i) || r.Mode != "copy" {
			t.Errorf("thread %d: %+v", i, r)
		}
	}
	// The peer counts on its softirq; give it a moment.
	var got, gotBytes uint64
	for range 50 {
		got, gotBytes = peerCounters(t, b, "pg1")
		if got-before >= 2*perThread {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got-before != 2*perThread || gotBytes-beforeBytes != 2*perThread*128 {
		t.Fatalf("peer received %d packets, %d bytes; want %d, %d", got-before, gotBytes-beforeBytes, 2*perThread, 2*perThread*128)
	}
}

// TestRateLimitOnVeth: a paced thread never sends ahead of its rate
// (the bound is one batch over rate × elapsed), and sleeps for most of
// the run. Only the upper bound is asserted: a loaded machine may make
// the thread late, never early.
func TestRateLimitOnVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and an AF_XDP socket")
	}
	ns := fmt.Sprintf("pgrate%d", os.Getpid()%100000)
	ipCmd(t, "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ipCmd(t, "-n", ns, "link", "add", "pr0", "type", "veth", "peer", "name", "pr1")
	ipCmd(t, "-n", ns, "link", "set", "pr0", "up")
	ipCmd(t, "-n", ns, "link", "set", "pr1", "up")
	const rate = 20000
	cfg := Config{Netns: ns, Ifname: "pr0", Rate: rate, Duration: 300 * time.Millisecond, Batch: 64, Bind: "copy",
		Packet: Packet{SrcMAC: srcMAC, DstMAC: dstMAC, Src: mustRange(t, "198.18.0.1"), Dst: mustRange(t, "198.18.0.42")}}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if limit := uint64(rate*r.Elapsed.Seconds()) + 64; r.Packets > limit || r.Packets == 0 {
		t.Fatalf("sent %d packets in %v at %d pps (limit %d)", r.Packets, r.Elapsed, rate, limit)
	}
	if r.Idle < r.Elapsed/2 {
		t.Errorf("idle %v of %v: a paced thread should mostly sleep", r.Idle, r.Elapsed)
	}
}

// TestRunFailsWhenAQueueIsMissing: a thread whose queue does not exist
// fails the run, and the threads that opened theirs stop without sending
// (Count 0 and no Duration would otherwise run forever).
func TestRunFailsWhenAQueueIsMissing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and an AF_XDP socket")
	}
	ns := fmt.Sprintf("pgmissing%d", os.Getpid()%100000)
	ipCmd(t, "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ipCmd(t, "-n", ns, "link", "add", "pm0", "type", "veth", "peer", "name", "pm1") // one queue
	ipCmd(t, "-n", ns, "link", "set", "pm0", "up")
	ipCmd(t, "-n", ns, "link", "set", "pm1", "up")
	cfg := Config{Netns: ns, Ifname: "pm0", Threads: 2, Bind: "copy",
		Packet: Packet{SrcMAC: srcMAC, DstMAC: dstMAC, Src: mustRange(t, "198.18.0.1"), Dst: mustRange(t, "198.18.0.42")}}
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), cfg); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "open tx queue 1 of pm0") {
			t.Fatalf("err = %v, want the failure to open queue 1", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after a queue failed to open")
	}
}
