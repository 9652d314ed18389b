package lab_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestPing: the Go ping answers for an address that replies (loopback of a
// fresh namespace, both families) and says so for one that does not.
func TestPing(t *testing.T) {
	ns := testutil.NewNetNS(t, "png")
	if err := ns.Run("ip", "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"127.0.0.1", "::1"} {
		if err := lab.Ping(ns, netip.MustParseAddr(a), 3*time.Second); err != nil {
			t.Errorf("ping %s: %v", a, err)
		}
	}
	if err := ns.Run("ip", "route", "add", "blackhole", "192.0.2.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := lab.Ping(ns, netip.MustParseAddr("192.0.2.1"), time.Second); err == nil || !strings.Contains(err.Error(), "192.0.2.1") {
		t.Errorf("ping into a blackhole: %v", err)
	}
}
