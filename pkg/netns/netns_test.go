package netns_test

import (
	"net"
	"sort"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
)

func TestDoEntersAndLeaves(t *testing.T) {
	ns := testutil.NewNetNS(t, "nst")
	if err := ns.Run("ip", "link", "add", "vx0", "type", "veth", "peer", "name", "vx1"); err != nil {
		t.Fatal(err)
	}
	var inside []string
	if err := ns.Do(func() error {
		ifs, err := net.Interfaces()
		for _, i := range ifs {
			inside = append(inside, i.Name)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(inside)
	if got := strings.Join(inside, ","); got != "lo,vx0,vx1" {
		t.Errorf("interfaces inside = %q, want lo,vx0,vx1", got)
	}
	outside, err := net.InterfaceByName("vx0")
	if err == nil {
		t.Errorf("vx0 visible outside the namespace: %+v", outside)
	}
	if !netns.Exists(ns.Name) {
		t.Errorf("Exists(%q) = false", ns.Name)
	}
}

func TestNewRejectsDuplicate(t *testing.T) {
	ns := testutil.NewNetNS(t, "nsd")
	if _, err := netns.New(ns.Name); err == nil {
		t.Fatal("creating an existing namespace succeeded")
	}
}
