package bgp

import (
	"context"
	"encoding/json"
	"net/netip"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/lab/labtest"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// burstVIPs is the number of VIPs TestBIRDBurst announces, burstNet where
// they are (the lab's BIRD accepts its host routes: lab.Options.ExtraVIPs4).
const burstVIPs = 1000

var burstNet = netip.MustParsePrefix("198.18.64.0/22")

// maxStartUpdates bounds the UPDATE messages of burstVIPs IPv4 host
// routes at the start: GoBGP sends its whole table to a peer whose
// session comes up as one batch, and an UPDATE of at most 4096 bytes
// carries about 800 /32s (5 bytes each) beside its attributes, so two
// are needed (and one End-of-RIB, were it counted apart).
const maxStartUpdates = 3

// maxBatchUpdates bounds the UPDATEs of burstVIPs announced or withdrawn
// in one Update on an established session. GoBGP queues one message per
// path for the peer and its sender packs whatever is queued when it
// looks, without waiting for more: 4-33 UPDATEs were measured, as the
// scheduling fell (docs/design.md#vip-announcements-at-scale).
// The bound is a tenth of one UPDATE per VIP.
const maxBatchUpdates = burstVIPs / 10

// TestBIRDBurst announces 1000 VIPs to BIRD over one IPv4 session and
// counts the UPDATE messages they take (GoBGP's count of the messages it
// wrote; BIRD's routes confirm every one arrived): at the start (the
// daemon puts every VIP in Options.Announce), withdrawn and announced
// again in one Update each (the daemon's announce after a publication),
// and one VIP added (a reload adding one rule: one UPDATE). The same
// 1000 VIPs announced and withdrawn one call each, as the daemon did
// before it batched, are measured as the reference.
func TestBIRDBurst(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := labtest.Up(t, "bu", lab.Options{Appliances: 1, Backends: 1, ClientAddrs: 2, NoDecap: true, BGP: true, ExtraVIPs4: burstNet})
	a := l.Appliances[0]
	first := burstNet.Addr().Next()
	o := Options{LocalAS: lab.ApplianceAS, RouterID: a.Addr4, HoldTime: 3 * time.Second,
		Peers: []Peer{{Address: l.Gateway4, AS: lab.RouterAS}}, Announce: hostRange(first, burstVIPs)}
	routes := func() int {
		out, err := l.Birdc("show route protocol a0v4 count")
		if err != nil {
			t.Fatalf("%v\n%s", err, l.BIRDLog())
		}
		return routeCount(out)
	}
	waitRoutes := func(what string, want int, since time.Time) time.Duration {
		t.Helper()
		for routes() != want {
			if ctx.Err() != nil {
				t.Fatalf("%s: BIRD has %d routes, want %d\n%s", what, routes(), want, l.RouterReport())
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(since)
	}
	start := time.Now()
	s := startHelper(t, a.NS.Name, o)
	var sent uint64
	updates := func() uint64 {
		var m map[netip.Addr]uint64
		if err := json.Unmarshal([]byte(s.do("sent")), &m); err != nil {
			t.Fatal(err)
		}
		n := m[l.Gateway4]
		d := n - sent
		sent = n
		return d
	}
	step := func(what string, cmd string, want int) (uint64, time.Duration) {
		t.Helper()
		at := start // the start: from the helper's start
		if cmd != "" {
			at = time.Now()
			s.do(cmd)
		}
		took := waitRoutes(what, want, at)
		n := updates()
		t.Logf("%s: %d UPDATEs, BIRD has %d routes after %v", what, n, want, took.Round(time.Millisecond))
		return n, took
	}
	if n, _ := step("start with 1000 VIPs", "", burstVIPs); n > maxStartUpdates {
		t.Errorf("the start announced %d VIPs in %d UPDATEs, want at most %d", burstVIPs, n, maxStartUpdates)
	}
	r := func(cmd, how string) string {
		return cmd + " " + first.String() + " " + strconv.Itoa(burstVIPs) + " " + how
	}
	if n, _ := step("withdraw 1000 in one Update", r("withdraw-range", "batch"), 0); n > maxBatchUpdates {
		t.Errorf("withdrawing %d VIPs took %d UPDATEs, want at most %d", burstVIPs, n, maxBatchUpdates)
	}
	eachIn, _ := step("announce 1000, one call each (reference)", r("announce-range", "each"), burstVIPs)
	eachOut, _ := step("withdraw 1000, one call each (reference)", r("withdraw-range", "each"), 0)
	n, _ := step("announce 1000 in one Update", r("announce-range", "batch"), burstVIPs)
	if n > maxBatchUpdates {
		t.Errorf("announcing %d VIPs in one Update took %d UPDATEs, want at most %d", burstVIPs, n, maxBatchUpdates)
	}
	t.Logf("one call per VIP took %d and %d UPDATEs (announce, withdraw), one Update %d", eachIn, eachOut, n)
	one := hostRange(first, burstVIPs+1)[burstVIPs]
	if n, _ := step("one VIP more", "announce "+one.String(), burstVIPs+1); n != 1 {
		t.Errorf("announcing one VIP beside %d took %d UPDATEs, want 1", burstVIPs, n)
	}
}

var routeCountRE = regexp.MustCompile(`(\d+) of \d+ routes`)

// routeCount reads birdc's "N of M routes for K networks in table …".
func routeCount(out string) int {
	m := routeCountRE.FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
