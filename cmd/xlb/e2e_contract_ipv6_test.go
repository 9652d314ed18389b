package main

// Fragments and ICMP packet too big with IPv6 on real packets.

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
)

// smallAndLarge sends, on one UDP flow from each source, a datagram of 100
// bytes and then one of 3000 (three fragments), at once over the sources,
// and reports how many large datagrams arrived whole and on how many flows
// the two went to different backends.
func smallAndLarge(t *testing.T, l *lab.Lab, srcs []netip.Addr, dst netip.AddrPort) (whole, split int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, src := range srcs {
		f := openUDPFlow(t, l, src, dst)
		wg.Add(1)
		go func() {
			defer wg.Done()
			small, ok1 := f.whoReply(100)
			large, ok2 := f.whoReply(3000)
			mu.Lock()
			defer mu.Unlock()
			if ok2 && large.Size == 3000 {
				whole++
			}
			if ok1 && ok2 && small.Index != large.Index {
				split++
			}
		}()
	}
	wg.Wait()
	return whole, split
}

// Fragments (docs/design.md#fragments): datagrams of 3000 bytes leave the
// client in three fragments, over IPv4 and IPv6, and arrive whole (no
// reassembly: every fragment is forwarded as it comes, all by the 3-tuple).
// Under 5-tuple affinity (NONE) a flow's unfragmented datagrams go by the
// 5-tuple, so without fragment tracking its fragmented and whole datagrams
// often reach different backends; with fragment_tracking the first fragment
// is placed like the flow's whole datagrams and the others follow it, in both
// families.
func TestWireFragments(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 3})
	rules := []lab.Rule{rule(l, "udp4", ""), rule(l, "udp6", "")}
	x := xlbIn(t, l, rules)
	for _, r := range []string{"udp4", "udp6"} {
		waitHealth(t, l, x, r, "HEALTHY", 0, 1, 2)
	}
	for _, fam := range []int{4, 6} {
		dst := netip.AddrPortFrom(vipOf(l, fam), l.Opts.UDPPort)
		whole, split := smallAndLarge(t, l, clientsOf(l, fam)[:30], dst)
		if whole != 30 {
			t.Errorf("IPv%d without fragment tracking: %d of 30 fragmented datagrams arrived whole", fam, whole)
		}
		if split == 0 {
			t.Errorf("IPv%d without fragment tracking: every flow's 100- and 3000-byte datagrams shared a backend; want 5-tuple and 3-tuple placements to differ for some", fam)
		}
	}

	for i := range rules {
		rules[i].Extra = "fragment_tracking = true\n"
	}
	reloadWith(t, l, x, rules)
	for _, fam := range []int{4, 6} {
		dst := netip.AddrPortFrom(vipOf(l, fam), l.Opts.UDPPort)
		whole, split := smallAndLarge(t, l, clientsOf(l, fam)[30:70], dst)
		if whole != 40 || split != 0 {
			t.Errorf("IPv%d with fragment tracking: %d of 40 fragmented datagrams arrived whole, %d flows split", fam, whole, split)
		}
	}
}

// Packet too big for IPv6 (docs/design.md#icmp): with 1500 bytes between
// appliance and backends, a full-size IPv6 segment does not fit the IPIP
// (6in6, 40 bytes) header; the appliance answers with an ICMPv6
// packet-too-big quoting 1460, the client's kernel caches it and the request
// completes.
func TestWireICMPPacketTooBigIPv6(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 2, FabricMTU: 1500})
	x := xlbIn(t, l, []lab.Rule{rule(l, "web6", "")})
	waitHealth(t, l, x, "web6", "HEALTHY", 0, 1)
	src := l.ClientAddrs6[5]
	body := []byte(strings.Repeat("x", 20000))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := l.HTTPPost(ctx, src, l.VIPURL(l.Opts.VIP6), body)
	if err != nil {
		t.Fatalf("POST through a 1500-byte path: %v", err)
	}
	if rep.Size != len(body) {
		t.Errorf("backend received %d of %d bytes", rep.Size, len(body))
	}
	if mtu := routeMTU(t, l.Client, l.Opts.VIP6.String(), "from", src.String()); mtu != 1460 {
		t.Errorf("client's cached path MTU to the VIP is %d, want 1460 (from xlb's packet-too-big)", mtu)
	}
	if n := x.status(t).Counters.Drops["packet-too-big"]; n == 0 {
		t.Errorf("no packet-too-big counted")
	}
}
