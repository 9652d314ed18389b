package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/testutil"
	"github.com/xlbnet/xlb/ring"
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

// TestOpenSocketWaitsForTheQueue: a start after a crash waits while the
// dead process's socket still holds the queue (the kernel frees it later,
// from a work queue) and binds once it is free.
func TestOpenSocketWaitsForTheQueue(t *testing.T) {
	ns := testutil.NewNetNS(t, "oq")
	err := ns.Do(func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "plain0"}, PeerName: "plain1"}); err != nil {
			return err
		}
		link, err := netlink.LinkByName("plain0")
		if err != nil {
			return err
		}
		o := ring.Options{Ifindex: link.Attrs().Index, Queue: 0}
		holder, err := ring.Open(o)
		if err != nil {
			return err
		}
		if s, err := ring.Open(o); err == nil || !errors.Is(err, unix.EBUSY) {
			if s != nil {
				s.Close()
			}
			holder.Close()
			return fmt.Errorf("a second socket on a held queue: %v, want EBUSY", err)
		}
		const held = 2 * time.Second // longer than the 1 s once waited
		go func() {
			time.Sleep(held)
			holder.Close()
		}()
		start := time.Now()
		s, err := openSocket(o)
		if err != nil {
			return fmt.Errorf("open while the queue is released %v later: %w", held, err)
		}
		s.Close()
		took := time.Since(start)
		if took < held {
			t.Errorf("bound after %v, before the holder closed (%v)", took, held)
		}
		t.Logf("bound %v after the holder closed", (took - held).Round(time.Millisecond))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
