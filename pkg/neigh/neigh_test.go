package neigh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// twoHosts builds a (198.18.0.1/24, fd00:18::1/64) <-> b (198.18.0.2, fd00:18::2)
// over a veth pair; b also owns 192.0.2.10, routed from a via b.
func twoHosts(t testing.TB) (a, b *netns.NS, bMAC net.HardwareAddr) {
	a = testutil.NewNetNS(t, "nga")
	b = testutil.NewNetNS(t, "ngb")
	steps := []struct {
		ns   *netns.NS
		args []string
	}{
		{a, []string{"link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b.Name}},
		{a, []string{"addr", "add", "198.18.0.1/24", "dev", "eth0"}},
		{a, []string{"addr", "add", "fd00:18::1/64", "dev", "eth0", "nodad"}},
		{a, []string{"link", "set", "eth0", "up"}},
		{b, []string{"addr", "add", "198.18.0.2/24", "dev", "eth0"}},
		{b, []string{"addr", "add", "fd00:18::2/64", "dev", "eth0", "nodad"}},
		{b, []string{"addr", "add", "192.0.2.10/32", "dev", "lo"}},
		{b, []string{"link", "set", "eth0", "up"}},
		{a, []string{"route", "add", "192.0.2.0/24", "via", "198.18.0.2"}},
	}
	for _, s := range steps {
		if err := s.ns.Run("ip", s.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Do(func() error {
		l, err := net.InterfaceByName("eth0")
		if err == nil {
			bMAC = l.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return a, b, bMAC
}

// handleIn is a netlink handle in ns, the library's view the tests
// compare with.
func handleIn(t testing.TB, ns *netns.NS) *netlink.Handle {
	nsh, err := vnetns.GetFromPath("/run/netns/" + ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsh.Close() })
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func TestResolve(t *testing.T) {
	a, _, bMAC := twoHosts(t)
	r := New(a)
	tests := []struct {
		name    string
		backend string
		gateway string
	}{
		{"on-link ipv4", "198.18.0.2", ""},
		{"routed ipv4 via gateway", "192.0.2.10", "198.18.0.2"},
		{"on-link ipv6", "fd00:18::2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			nh, err := r.Resolve(ctx, netip.MustParseAddr(tt.backend))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(nh.DstMAC, bMAC) {
				t.Errorf("DstMAC = %v, want %v", nh.DstMAC, bMAC)
			}
			if tt.gateway == "" && !nh.OnLink() {
				t.Errorf("want on-link, got gateway %v", nh.Gateway)
			}
			if tt.gateway != "" && nh.Gateway != netip.MustParseAddr(tt.gateway) {
				t.Errorf("Gateway = %v, want %s", nh.Gateway, tt.gateway)
			}
			if nh.MTU != 1500 || len(nh.SrcMAC) != 6 || nh.Ifindex == 0 {
				t.Errorf("next hop incomplete: %+v", nh)
			}
		})
	}
}

func TestResolveUnreachable(t *testing.T) {
	a, _, _ := twoHosts(t)
	r := New(a)
	// On the link, but nobody owns it: ARP never answers.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := r.Resolve(ctx, netip.MustParseAddr("198.18.0.99"))
	if !errors.Is(err, ErrUnresolved) {
		t.Fatalf("err = %v, want ErrUnresolved", err)
	}
	if _, err := r.Route(netip.MustParseAddr("203.0.113.1")); err == nil {
		t.Error("route to an address with no route succeeded")
	}
}

// TestPassSharesNeighbours: backends behind one gateway resolve within a
// pass with one neighbour lookup between them, each with the gateway's
// MAC; an on-link backend is a neighbour of its own; a new pass looks
// again.
func TestPassSharesNeighbours(t *testing.T) {
	a, _, bMAC := twoHosts(t)
	p := New(a).NewPass(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, addr := range []string{"192.0.2.10", "192.0.2.11", "192.0.2.200", "198.18.0.2"} {
		nh, err := p.Resolve(ctx, netip.MustParseAddr(addr))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(nh.DstMAC, bMAC) || nh.Backend != netip.MustParseAddr(addr) {
			t.Errorf("%s: next hop %+v, want MAC %v", addr, nh, bMAC)
		}
	}
	if len(p.macs) != 1 || len(p.links) != 1 {
		t.Errorf("%d neighbours and %d links looked up, want 1 and 1 (the gateway 198.18.0.2 is the on-link backend too)", len(p.macs), len(p.links))
	}
	if _, err := p.Resolve(ctx, netip.MustParseAddr("fd00:18::2")); err != nil {
		t.Fatal(err)
	}
	if len(p.macs) != 2 {
		t.Errorf("%d neighbours after an IPv6 one, want 2", len(p.macs))
	}
}

// TestPassInCallersNamespace: a Resolver over the caller's namespace
// (New(nil)) resolves through the sockets its pass opens there.
func TestPassInCallersNamespace(t *testing.T) {
	a, _, bMAC := twoHosts(t)
	if err := a.Do(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p := New(nil).NewPass(0)
		defer p.Close()
		for _, addr := range []string{"192.0.2.10", "192.0.2.11"} {
			nh, err := p.Resolve(ctx, netip.MustParseAddr(addr))
			if err != nil {
				return err
			}
			if !bytes.Equal(nh.DstMAC, bMAC) {
				return fmt.Errorf("%s: DstMAC %v, want %v", addr, nh.DstMAC, bMAC)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
