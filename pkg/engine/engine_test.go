package engine

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestServedQueues: "all" is the interface's active receive queues, not
// the allocated ones (a plain veth allocates one per CPU and uses one), and
// a list beyond them is refused before anything is attached, naming the
// problem.
func TestServedQueues(t *testing.T) {
	ns := testutil.NewNetNS(t, "dq")
	err := ns.Do(func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "plain0"}, PeerName: "plain1"}); err != nil {
			return err
		}
		if qs, err := servedQueues("plain0", nil); err != nil || len(qs) != 1 || qs[0] != 0 {
			t.Errorf("all: %v, %v; want [0]", qs, err)
		}
		_, err := servedQueues("plain0", []int{0, 1})
		if err == nil || !strings.Contains(err.Error(), "interface plain0 has 1 active receive queue(s), 0-0 (ethtool channels), so queue 1 cannot be served") {
			t.Errorf("[0, 1]: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
