package daemon

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/neigh"
)

// TestNextHopLog: the new next hops of a pass are logged a line per way
// out: the backends behind one router as one line with their count and
// the first few, a lone backend (on the link, or behind a router or MTU
// of its own) as before.
func TestNextHopLog(t *testing.T) {
	gw := netip.MustParseAddr("198.18.0.2")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	nh := func(backend string, gateway netip.Addr, mtu int) neigh.NextHop {
		return neigh.NextHop{Backend: netip.MustParseAddr(backend), Gateway: gateway, Ifindex: 3, DstMAC: mac, MTU: mtu}
	}
	var l nextHopLog
	for i := range 5 {
		l.add(nh(netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}).String(), gw, 1500))
	}
	l.add(nh("198.18.0.2", netip.Addr{}, 1500)) // the router itself, on the link
	l.add(nh("198.51.100.7", gw, 1400))         // behind the router, a smaller MTU
	var out bytes.Buffer
	l.write(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	want := []string{
		`level=INFO msg="backend next hops" backends=5 first="[192.0.2.10 192.0.2.11 192.0.2.12]" gateway=198.18.0.2 mac=02:00:00:00:00:02 mtu=1500`,
		`level=INFO msg="backend next hop" backend=198.18.0.2 gateway="" mac=02:00:00:00:00:02 mtu=1500`,
		`level=INFO msg="backend next hop" backend=198.51.100.7 gateway=198.18.0.2 mac=02:00:00:00:00:02 mtu=1400`,
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), out.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}
