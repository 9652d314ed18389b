package ethtool

import (
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestActiveRXQueues: a plain veth allocates a queue per CPU but uses one
// (what `queues = "all"` must bind: docs/design.md#the-appliance-file); one
// created with
// four uses four.
func TestActiveRXQueues(t *testing.T) {
	ns := testutil.NewNetNS(t, "eth")
	err := ns.Do(func() error {
		for _, v := range []*netlink.Veth{
			{LinkAttrs: netlink.LinkAttrs{Name: "plain0"}, PeerName: "plain1"},
			{LinkAttrs: netlink.LinkAttrs{Name: "four0", NumRxQueues: 4, NumTxQueues: 4}, PeerName: "four1"},
		} {
			if err := netlink.LinkAdd(v); err != nil {
				return err
			}
		}
		for _, c := range []struct {
			name      string
			want      int
			allocated int
		}{{"plain0", 1, runtime.NumCPU()}, {"four0", 4, 4}} {
			n, src, err := ActiveRXQueues(c.name)
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			l, err := netlink.LinkByName(c.name)
			if err != nil {
				return err
			}
			t.Logf("%s: %d active receive queues (%s), %d allocated", c.name, n, src, l.Attrs().NumRxQueues)
			if n != c.want || src != "ethtool channels" {
				t.Errorf("%s: %d active receive queues from %s, want %d from ethtool channels", c.name, n, src, c.want)
			}
			ch, err := GetChannels(c.name)
			if err != nil || ch.MaxRX != uint32(l.Attrs().NumRxQueues) {
				t.Errorf("%s: channels %+v, %v; want max rx %d", c.name, ch, err, l.Attrs().NumRxQueues)
			}
		}
		if _, _, err := ActiveRXQueues("nonexistent0"); err == nil {
			t.Error("a missing interface has queues")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOffloads: the legacy switches turn an offload off and read it back.
func TestOffloads(t *testing.T) {
	ns := testutil.NewNetNS(t, "eth")
	err := ns.Do(func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0"}, PeerName: "v1"}); err != nil {
			return err
		}
		for _, c := range []struct{ set, get uint32 }{{STXCSUM, GTXCSUM}, {SSG, GSG}, {STSO, GTSO}, {SGSO, GGSO}} {
			if err := Set("v0", c.set, 0); err != nil {
				return err
			}
			if v, err := Get("v0", c.get); err != nil || v != 0 {
				t.Errorf("command %#x: %d, %v after turning it off", c.get, v, err)
			}
		}
		if v, err := Get("v1", GTSO); err != nil || v != 1 {
			t.Errorf("the peer's TSO: %d, %v; want on (untouched)", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
