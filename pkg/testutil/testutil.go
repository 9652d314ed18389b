package testutil

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/netns"
)

// RequireRoot skips the test, saying why, unless it runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("skipped: needs root for network namespaces, veth and XDP (run go test as root to include it)")
	}
}

var seq atomic.Uint32

// Unique returns prefix followed by a suffix unique to this process and
// call, at most 15 bytes long so that it is a valid interface name when
// prefix is at most 6 bytes.
func Unique(prefix string) string {
	n := seq.Add(1)
	name := fmt.Sprintf("%s%05x%03x", prefix, os.Getpid()&0xfffff, n&0xfff)
	if len(name) > 15 {
		name = name[:15]
	}
	return name
}

// NewNetNS creates a namespace with a unique name derived from prefix and
// deletes it when the test ends, pass or fail. It skips the test without root.
func NewNetNS(tb testing.TB, prefix string) *netns.NS {
	tb.Helper()
	RequireRoot(tb)
	ns, err := netns.New(Unique(prefix))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			tb.Errorf("teardown: %v", err)
		}
	})
	return ns
}

// WaitFor polls cond every 200 ms until it holds, then logs what it says;
// it fails the test with cond's last word when d passes first.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			tb.Logf("%s: %s", what, msg)
			return
		}
		last = msg
		time.Sleep(200 * time.Millisecond)
	}
	tb.Fatalf("%s: not within %v (last: %s)", what, d, last)
}
