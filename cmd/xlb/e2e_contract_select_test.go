package main

// Session affinity, trackability and the tracking key (PER_SESSION) on
// real packets.

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
)

// metricSum sums the samples of the lines of body that start with prefix.
func metricSum(body, prefix string) float64 {
	total := 0.0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			total += v
		}
	}
	return total
}

// requests makes n HTTP requests (n connections) from src to vip and
// returns the backends that answered, in order (-1 for a failure).
func requests(l *lab.Lab, src, vip netip.Addr, n int) []int {
	out := make([]int, n)
	for i := range out {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		rep, err := l.HTTPGet(ctx, src, l.VIPURL(vip))
		cancel()
		out[i] = rep.Index
		if err != nil {
			out[i] = -1
		}
	}
	return out
}

// sameBackend returns the one backend of bs, or -1 when they differ or
// one failed.
func sameBackend(bs []int) int {
	for _, b := range bs {
		if b != bs[0] || b < 0 {
			return -1
		}
	}
	return bs[0]
}

// Session affinity on the wire (docs/design.md#session-affinity,
// docs/design.md#trackability, docs/design.md#tracking-key): CLIENT_IP with
// PER_SESSION keeps a client's TCP connections (on both RX queues: the shared
// table) on one backend, even after the eligible set grows; CLIENT_IP_PROTO
// selects by 3-tuple, so a client's connections share a backend;
// CLIENT_IP_PORT_PROTO tracks UDP by 5-tuple, so a client's flows spread and
// each stays on its backend when the eligible set grows, while NONE does not
// track UDP, so flows move.
func TestWireSessionAffinity(t *testing.T) {
	wireTest(t)
	// The lab's default fabric MTU keeps XDP native on the veth, whose RX
	// queue is the one the router's hash picked (in generic mode every
	// packet arrives on queue 0: pkg/lab's doc).
	l := labWith(t, lab.Options{Backends: 4})
	l.Backends[3].SetHealthy(false)
	x := xlbIn(t, l, []lab.Rule{
		rule(l, "web4", "session_affinity = \"CLIENT_IP\"\n[connection_tracking]\ntracking_mode = \"PER_SESSION\"\n"),
		rule(l, "web6", "session_affinity = \"CLIENT_IP_PROTO\"\n"),
		rule(l, "udp4", "session_affinity = \"CLIENT_IP_PORT_PROTO\"\n"),
		rule(l, "udp6", "session_affinity = \"NONE\"\n"),
	})
	for _, r := range []string{"web4", "web6", "udp4", "udp6"} {
		waitHealth(t, l, x, r, "HEALTHY", 0, 1, 2)
	}
	sessions := map[netip.Addr]int{}
	perBackend := map[int]int{}
	for _, src := range l.ClientAddrs4[:20] {
		b := sameBackend(requests(l, src, l.Opts.VIP4, 5))
		if b < 0 {
			t.Fatalf("CLIENT_IP PER_SESSION: the connections of %s went to different backends or failed", src)
		}
		sessions[src] = b
		perBackend[b]++
	}
	byProto := map[int]int{}
	for _, src := range l.ClientAddrs6[:20] {
		b := sameBackend(requests(l, src, l.Opts.VIP6, 5))
		if b < 0 {
			t.Fatalf("CLIENT_IP_PROTO: the connections of %s went to different backends or failed", src)
		}
		byProto[b]++
	}
	if len(perBackend) < 2 || len(byProto) < 2 {
		t.Errorf("20 clients used backends %v (CLIENT_IP) and %v (CLIENT_IP_PROTO); want a spread", perBackend, byProto)
	}
	body := scrape(t, l)
	for _, q := range []string{"0", "1"} {
		if v := metricSum(body, `xlb_verdict_packets_total{queue="`+q+`",verdict="tx"}`); v == 0 {
			t.Errorf("queue %s forwarded nothing: the sessions did not span both queues", q)
		}
	}

	// One client's UDP flows: 5-tuple tracked (CLIENT_IP_PORT_PROTO) and
	// not tracked (NONE).
	dst4 := netip.AddrPortFrom(l.Opts.VIP4, l.Opts.UDPPort)
	dst6 := netip.AddrPortFrom(l.Opts.VIP6, l.Opts.UDPPort)
	var tracked, untracked []*udpFlow
	where := map[*udpFlow]int{}
	spread := map[int]bool{}
	for range 30 {
		f := openUDPFlow(t, l, l.ClientAddrs4[50], dst4)
		where[f] = f.who(16)
		spread[where[f]] = true
		tracked = append(tracked, f)
		g := openUDPFlow(t, l, l.ClientAddrs6[50], dst6)
		where[g] = g.who(16)
		untracked = append(untracked, g)
	}
	if len(spread) < 2 || spread[-1] {
		t.Errorf("30 UDP flows of one client (CLIENT_IP_PORT_PROTO) reached %v; want several backends", spread)
	}

	l.Backends[3].SetHealthy(true)
	for _, r := range []string{"web4", "udp4", "udp6"} {
		waitHealth(t, l, x, r, "HEALTHY", 3)
	}
	for src, b := range sessions {
		if got := requests(l, src, l.Opts.VIP4, 3); sameBackend(got) != b {
			t.Errorf("PER_SESSION CLIENT_IP: %s's new connections went to %v after be3 joined; want its session's be%d", src, got, b)
		}
	}
	fresh := map[int]int{}
	for _, src := range l.ClientAddrs4[100:160] {
		fresh[requests(l, src, l.Opts.VIP4, 1)[0]]++
	}
	if fresh[3] == 0 {
		t.Errorf("60 new clients after be3 joined: %v; want some on be3", fresh)
	}
	movedTracked, movedUntracked := 0, 0
	for _, f := range tracked {
		if f.who(16) != where[f] {
			movedTracked++
		}
	}
	for _, f := range untracked {
		if f.who(16) != where[f] {
			movedUntracked++
		}
	}
	if movedTracked > 0 {
		t.Errorf("CLIENT_IP_PORT_PROTO: %d of 30 tracked UDP flows moved when be3 joined", movedTracked)
	}
	if movedUntracked == 0 {
		var before []int
		for _, f := range untracked {
			before = append(before, where[f])
		}
		t.Errorf("NONE: none of 30 untracked UDP flows moved when be3 joined (they are hashed per packet): %v; udp6 %+v", before, ruleStatus(t, x.status(t), "udp6"))
	}
}
