package xsk

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/packettest"
	"github.com/xlbnet/xlb/pkg/testutil"
	"github.com/xlbnet/xlb/ring"
)

func TestVIPKeyEncoding(t *testing.T) {
	tests := []struct {
		vip     VIP
		addr    string // want, as 16-byte IPv6 text
		memPort [2]byte
		wantErr string
	}{
		{VIP{Addr: netip.MustParseAddr("203.0.113.10"), Proto: 6, Port: 80}, "::ffff:203.0.113.10", [2]byte{0, 80}, ""},
		{VIP{Addr: netip.MustParseAddr("::ffff:203.0.113.10"), Proto: 17}, "::ffff:203.0.113.10", [2]byte{0, 0}, ""},
		{VIP{Addr: netip.MustParseAddr("fd00::10"), Proto: 6, Port: 0x1bb}, "fd00::10", [2]byte{0x01, 0xbb}, ""},
		{VIP{Addr: netip.MustParseAddr("fd00::10")}, "fd00::10", [2]byte{}, ""},
		{VIP{}, "", [2]byte{}, "no address"},
		{VIP{Addr: netip.MustParseAddr("fd00::10"), Port: 80}, "", [2]byte{}, "needs a protocol"},
	}
	for _, tt := range tests {
		t.Run(tt.vip.String(), func(t *testing.T) {
			k, err := tt.vip.key()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("key() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := netip.AddrFrom16(k.Addr).String(); got != tt.addr {
				t.Errorf("addr = %s, want %s", got, tt.addr)
			}
			var mem [2]byte
			binary.LittleEndian.PutUint16(mem[:], k.Port) // bpfel memory layout
			if mem != tt.memPort {
				t.Errorf("port bytes in memory = %x, want %x (network order)", mem, tt.memPort)
			}
			if k.Proto != tt.vip.Proto || k.Pad != 0 {
				t.Errorf("proto %d pad %d, want %d 0", k.Proto, k.Pad, tt.vip.Proto)
			}
		})
	}
}

// TestSpecLayout checks the committed object without loading it: the map
// key and value sizes the Go side encodes must be the C side's.
func TestSpecLayout(t *testing.T) {
	spec, err := loadXsk()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]uint32{
		"xlb_vips":      {20, 4},
		"xlb_vip_addrs": {16, 4},
		"xlb_xsks":      {4, 4},
		"xlb_ctl":       {4, 4},
		"xlb_nosock":    {4, 16},
	} {
		m, ok := spec.Maps[name]
		if !ok {
			t.Errorf("map %s missing", name)
			continue
		}
		if m.KeySize != want[0] || m.ValueSize != want[1] {
			t.Errorf("map %s: key %d value %d, want %d %d", name, m.KeySize, m.ValueSize, want[0], want[1])
		}
	}
	if _, ok := spec.Programs["xlb_redirect"]; !ok {
		t.Error("program xlb_redirect missing")
	}
}

const (
	xdpPass     = 2
	xdpRedirect = 4
)

const (
	v4   = 0x0800
	v6   = 0x86dd
	arp  = 0x0806
	q    = 0x8100
	qinq = 0x88a8

	// VLAN 100 tags (TPID and TCI) for packettest.Eth.
	vlan100 = q<<16 | 100
	qinq100 = qinq<<16 | 100

	client4 = "198.51.100.7" // the source of the IPv4 frames
)

type matchCase struct {
	name string
	pkt  []byte
	want uint32
}

// matchingTable is the golden table of frames and the verdicts the
// program must give with fuzzVIPs installed.
func matchingTable() []matchCase {
	return []matchCase{
		{"v4 tcp vip port", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6}.Build(packettest.TCP(40000, 80, 0))), xdpRedirect},
		{"v4 tcp other port", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6}.Build(packettest.TCP(40000, 81, 0))), xdpPass},
		{"v4 udp to tcp rule", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 17}.Build(packettest.UDP(40000, 80))), xdpPass},
		{"v4 udp all ports", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.11", Proto: 17}.Build(packettest.UDP(40000, 9))), xdpRedirect},
		{"v4 tcp to udp all-ports vip", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.11", Proto: 6}.Build(packettest.TCP(40000, 9, 0))), xdpPass},
		{"v4 l3 default gre", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.12", Proto: 47}.Build(make([]byte, 8))), xdpRedirect},
		{"v4 l3 default tcp", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.12", Proto: 6}.Build(packettest.TCP(40000, 22, 0))), xdpRedirect},
		{"v4 not a vip", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "198.18.0.1", Proto: 6}.Build(packettest.TCP(40000, 22, 0))), xdpPass},
		{"v4 ip options", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6, Options: make([]byte, 4)}.Build(packettest.TCP(40000, 80, 0))), xdpRedirect},
		{"vlan v4", packettest.Cat(packettest.Eth(v4, vlan100), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6}.Build(packettest.TCP(40000, 80, 0))), xdpRedirect},
		{"802.1ad v4", packettest.Cat(packettest.Eth(v4, qinq100), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6}.Build(packettest.TCP(40000, 80, 0))), xdpRedirect},
		{"v4 first fragment has ports", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6, Frag: 0x2000}.Build(packettest.TCP(40000, 80, 0))), xdpRedirect},
		{"v4 non-first fragment, port rule", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6, Frag: 185}.Build(packettest.TCP(40000, 80, 0))), xdpPass},
		{"v4 non-first fragment, all-ports rule", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.11", Proto: 17, Frag: 0x2000 | 185}.Build(packettest.UDP(40000, 80))), xdpRedirect},
		{"arp", packettest.Cat(packettest.Eth(arp), make([]byte, 28)), xdpPass},
		{"v4 echo request to vip", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 1}.Build(packettest.ICMP(8, 0, 0))), xdpRedirect},
		{"v4 echo request to host", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "198.18.0.1", Proto: 1}.Build(packettest.ICMP(8, 0, 0))), xdpPass},
		{"v4 echo reply to vip", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 1}.Build(packettest.ICMP(0, 0, 0))), xdpPass},
		{"v4 frag needed quoting vip", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 1}.Build(packettest.ICMP(3, 4, 0, quoted4("203.0.113.10")...))), xdpRedirect},
		{"v4 time exceeded quoting other", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "198.18.0.1", Proto: 1}.Build(packettest.ICMP(11, 0, 0, quoted4("198.51.100.9")...))), xdpPass},
		{"v4 truncated ip", packettest.Cat(packettest.Eth(v4), []byte{0x45, 0}), xdpPass},
		{"v4 truncated tcp", packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6}.Build([]byte{0x9c})), xdpPass},
		{"ethernet header only", packettest.Eth(v4), xdpPass},
		{"vlan tag truncated", packettest.Cat(packettest.Eth(v4)[:12], []byte{0x81, 0, 0, 100}), xdpPass},
		{"v6 tcp vip port", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 6}.Build(packettest.TCP(40000, 443, 0))), xdpRedirect},
		{"v6 tcp other port", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 6}.Build(packettest.TCP(40000, 444, 0))), xdpPass},
		{"v6 hbh+dstopts tcp", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 0}.Build(packettest.Cat(packettest.Ext6(60, 0), packettest.Cat(packettest.Ext6(6, 0), packettest.TCP(40000, 443, 0))))), xdpRedirect},
		{"v6 first fragment", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 44}.Build(packettest.Cat(packettest.Frag6(6, 0, true, 42), packettest.TCP(40000, 443, 0)))), xdpRedirect},
		{"v6 non-first fragment, port rule", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 44}.Build(packettest.Cat(packettest.Frag6(6, 800, false, 42), packettest.TCP(40000, 443, 0)))), xdpPass},
		{"v6 non-first fragment, all-ports rule", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::11", Next: 44}.Build(packettest.Cat(packettest.Frag6(17, 800, true, 42), packettest.UDP(40000, 443)))), xdpRedirect},
		{"v6 echo request to vip", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 58}.Build(packettest.ICMP(128, 0, 0))), xdpRedirect},
		{"v6 neighbour solicitation to vip", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 58}.Build(packettest.ICMP(135, 0, 0, make([]byte, 16)...))), xdpPass},
		{"v6 neighbour solicitation multicast", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "ff02::1:ff00:10", Next: 58}.Build(packettest.ICMP(135, 0, 0, make([]byte, 16)...))), xdpPass},
		{"v6 packet too big quoting vip", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::99", Dst: "fd00::10", Next: 58}.Build(packettest.ICMP(2, 0, 0, packettest.IPv6{Src: "fd00::10", Dst: "fd00::7", Next: 6}.Build(packettest.TCP(40000, 40000, 0))...))), xdpRedirect},
		{"v6 packet too big quoting other", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::99", Dst: "fd00::10", Next: 58}.Build(packettest.ICMP(2, 0, 0, packettest.IPv6{Src: "fd00::12", Dst: "fd00::7", Next: 6}.Build(packettest.TCP(40000, 40000, 0))...))), xdpPass},
		{"vlan v6", packettest.Cat(packettest.Eth(v6, vlan100), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 6}.Build(packettest.TCP(40000, 443, 0))), xdpRedirect},
		{"v6 truncated ext header", packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 0}.Build([]byte{6, 0})), xdpPass},
	}
}

// quoted4 is the start of a packet a VIP sent (src = VIP), as an ICMP error
// quotes it: IPv4 header and 8 bytes of UDP.
func quoted4(src string) []byte {
	return packettest.IPv4{Src: src, Dst: client4, Proto: 17}.Build(packettest.UDP(40000, 40000))
}

// loadForTest loads the program with a bound AF_XDP socket in XSKMAP slot
// 0, which BPF_PROG_TEST_RUN needs to report XDP_REDIRECT for a match.
func loadForTest(t testing.TB) *Program {
	t.Helper()
	ns := testutil.NewNetNS(t, "xskt")
	if err := ns.Run("ip", "link", "add", "x0", "type", "veth", "peer", "name", "x1"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Run("ip", "link", "set", "x0", "up"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Run("ip", "link", "set", "x1", "up"); err != nil {
		t.Fatal(err)
	}
	p, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	s := vethSocket(t, ns)
	if err := p.Register(0, s.FD()); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRedirectMatching(t *testing.T) {
	testutil.RequireRoot(t)
	p := loadForTest(t)
	vips := fuzzVIPs
	if err := p.ReplaceVIPs(vips); err != nil {
		t.Fatal(err)
	}
	tests := matchingTable()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.test(tt.pkt)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("action = %d, want %d (2 pass, 4 redirect)", got, tt.want)
			}
		})
	}

	// Removing the TCP rule of 203.0.113.10 removes its address too: echo
	// requests and ICMP errors for it go to the kernel again.
	if err := p.RemoveVIP(vips[0]); err != nil {
		t.Fatal(err)
	}
	for _, pkt := range [][]byte{
		packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6}.Build(packettest.TCP(40000, 80, 0))),
		packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 1}.Build(packettest.ICMP(8, 0, 0))),
		packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 1}.Build(packettest.ICMP(3, 4, 0, quoted4("203.0.113.10")...))),
	} {
		if got, err := p.test(pkt); err != nil || got != xdpPass {
			t.Errorf("after RemoveVIP: action = %d, %v; want pass", got, err)
		}
	}
	got, err := p.VIPs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(vips)-1 {
		t.Errorf("VIPs() = %v, want %d entries", got, len(vips)-1)
	}
	// Replace with a set sharing one entry: the rest disappear.
	if err := p.ReplaceVIPs(vips[3:4]); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.VIPs(); len(got) != 1 || got[0] != vips[3] {
		t.Errorf("VIPs() after replace = %v, want [%v]", got, vips[3])
	}
	var k [16]byte
	var n uint32
	addrs := 0
	for it := p.objs.XlbVipAddrs.Iterate(); it.Next(&k, &n); {
		addrs++
	}
	if addrs != 1 {
		t.Errorf("address entries after replace = %d, want 1", addrs)
	}
	// An empty XSKMAP slot falls back to pass.
	if err := p.Unregister(0); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.test(packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: "fd00::7", Dst: "fd00::10", Next: 6}.Build(packettest.TCP(40000, 443, 0)))); got != xdpPass {
		t.Errorf("match with no socket: action %d, want pass", got)
	}
}

func TestAttachModes(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t, "xska")
	if err := ns.Run("ip", "link", "add", "x0", "type", "veth", "peer", "name", "x1"); err != nil {
		t.Fatal(err)
	}
	p, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tc := range []struct{ ask, want AttachMode }{
		{AttachAuto, AttachNative}, // veth has native XDP
		{AttachGeneric, AttachGeneric},
		{AttachNative, AttachNative},
	} {
		err := ns.Do(func() error {
			ifi, err := net.InterfaceByName("x0")
			if err != nil {
				return err
			}
			got, err := p.Attach(ifi.Index, tc.ask)
			if err != nil {
				return err
			}
			if got != tc.want {
				t.Errorf("Attach(%s) = %s, want %s", tc.ask, got, tc.want)
			}
			if _, err := p.Attach(ifi.Index, tc.ask); err == nil {
				t.Error("second Attach succeeded")
			}
			out, err := ns.Output("ip", "link", "show", "x0")
			if err != nil {
				return err
			}
			mark := map[AttachMode]string{AttachNative: "xdp ", AttachGeneric: "xdpgeneric"}[tc.want]
			if !strings.Contains(out, mark) {
				t.Errorf("after Attach(%s): ip link shows %q, want %q", tc.ask, out, mark)
			}
			if err := p.Detach(); err != nil {
				return err
			}
			out, _ = ns.Output("ip", "link", "show", "x0")
			if strings.Contains(out, "xdp") {
				t.Errorf("after Detach: ip link shows %q", out)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestAttachAutoFallsBackToGeneric uses the loopback device, which has no
// native XDP: AttachAuto must fall back to generic mode and say so, and
// AttachNative must fail.
func TestAttachAutoFallsBackToGeneric(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t, "xskg")
	p, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = ns.Do(func() error {
		lo, err := net.InterfaceByName("lo")
		if err != nil {
			return err
		}
		if _, err := p.Attach(lo.Index, AttachNative); err == nil {
			p.Detach()
			return fmt.Errorf("native attach to lo succeeded")
		}
		got, err := p.Attach(lo.Index, AttachAuto)
		if err != nil {
			return err
		}
		if got != AttachGeneric {
			t.Errorf("Attach(auto) on lo = %s, want generic", got)
		}
		if mode, ok := p.Mode(); !ok || mode != AttachGeneric {
			t.Errorf("Mode() = %s, %v; want generic, true", mode, ok)
		}
		return p.Detach()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Mode(); ok {
		t.Error("Mode() reports attached after Detach")
	}
}

// vethSocket binds a small AF_XDP socket to queue 0 of x0 in ns, closed at
// the end of the test.
func vethSocket(t testing.TB, ns *netns.NS) *ring.Socket {
	t.Helper()
	var s *ring.Socket
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName("x0")
		if err != nil {
			return err
		}
		s, err = ring.Open(ring.Options{Ifindex: ifi.Index, NumFrames: 64, RingSize: 64})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
