package xsk

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/netns"
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

// Packet builders for the matching table. Checksums are left zero: the
// program never looks at them.

func eth(etype uint16, tags ...uint16) []byte {
	b := make([]byte, 12, 64)
	for _, tpid := range tags {
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, 100) // VLAN ID
	}
	return binary.BigEndian.AppendUint16(b, etype)
}

// ipv4 returns a header with ihlWords 32-bit words, fragment offset off
// (8-byte units) and the MF flag, followed by payload.
func ipv4(dst string, proto uint8, off uint16, mf bool, ihlWords int, payload []byte) []byte {
	h := make([]byte, ihlWords*4)
	h[0] = 0x40 | byte(ihlWords)
	binary.BigEndian.PutUint16(h[2:], uint16(len(h)+len(payload)))
	frag := off
	if mf {
		frag |= 0x2000
	}
	binary.BigEndian.PutUint16(h[6:], frag)
	h[8], h[9] = 64, proto
	copy(h[12:], net.ParseIP("198.51.100.7").To4())
	copy(h[16:], net.ParseIP(dst).To4())
	return append(h, payload...)
}

func ipv6(src, dst string, next uint8, payload []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	h[6], h[7] = next, 64
	copy(h[8:], net.ParseIP(src).To16())
	copy(h[24:], net.ParseIP(dst).To16())
	return append(h, payload...)
}

// ext6 is a Hop-by-Hop or Destination Options header of 8 bytes.
func ext6(next uint8, payload []byte) []byte {
	return append([]byte{next, 0, 1, 4, 0, 0, 0, 0}, payload...)
}

func frag6(next uint8, off uint16, mf bool, payload []byte) []byte {
	v := off << 3
	if mf {
		v |= 1
	}
	h := []byte{next, 0, byte(v >> 8), byte(v), 0, 0, 0, 42}
	return append(h, payload...)
}

func ports(dport uint16, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint16(b, 40000)
	binary.BigEndian.PutUint16(b[2:], dport)
	return b
}

func tcp(dport uint16) []byte { return ports(dport, 20) }
func udp(dport uint16) []byte { return ports(dport, 8) }

func icmp(typ, code uint8, quoted []byte) []byte {
	return append([]byte{typ, code, 0, 0, 0, 0, 0, 0}, quoted...)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
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
		{"v4 tcp vip port", cat(eth(v4), ipv4("203.0.113.10", 6, 0, false, 5, tcp(80))), xdpRedirect},
		{"v4 tcp other port", cat(eth(v4), ipv4("203.0.113.10", 6, 0, false, 5, tcp(81))), xdpPass},
		{"v4 udp to tcp rule", cat(eth(v4), ipv4("203.0.113.10", 17, 0, false, 5, udp(80))), xdpPass},
		{"v4 udp all ports", cat(eth(v4), ipv4("203.0.113.11", 17, 0, false, 5, udp(9))), xdpRedirect},
		{"v4 tcp to udp all-ports vip", cat(eth(v4), ipv4("203.0.113.11", 6, 0, false, 5, tcp(9))), xdpPass},
		{"v4 l3 default gre", cat(eth(v4), ipv4("203.0.113.12", 47, 0, false, 5, make([]byte, 8))), xdpRedirect},
		{"v4 l3 default tcp", cat(eth(v4), ipv4("203.0.113.12", 6, 0, false, 5, tcp(22))), xdpRedirect},
		{"v4 not a vip", cat(eth(v4), ipv4("198.18.0.1", 6, 0, false, 5, tcp(22))), xdpPass},
		{"v4 ip options", cat(eth(v4), ipv4("203.0.113.10", 6, 0, false, 6, tcp(80))), xdpRedirect},
		{"vlan v4", cat(eth(v4, q), ipv4("203.0.113.10", 6, 0, false, 5, tcp(80))), xdpRedirect},
		{"802.1ad v4", cat(eth(v4, qinq), ipv4("203.0.113.10", 6, 0, false, 5, tcp(80))), xdpRedirect},
		{"v4 first fragment has ports", cat(eth(v4), ipv4("203.0.113.10", 6, 0, true, 5, tcp(80))), xdpRedirect},
		{"v4 non-first fragment, port rule", cat(eth(v4), ipv4("203.0.113.10", 6, 185, false, 5, tcp(80))), xdpPass},
		{"v4 non-first fragment, all-ports rule", cat(eth(v4), ipv4("203.0.113.11", 17, 185, true, 5, udp(80))), xdpRedirect},
		{"arp", cat(eth(arp), make([]byte, 28)), xdpPass},
		{"v4 echo request to vip", cat(eth(v4), ipv4("203.0.113.10", 1, 0, false, 5, icmp(8, 0, nil))), xdpRedirect},
		{"v4 echo request to host", cat(eth(v4), ipv4("198.18.0.1", 1, 0, false, 5, icmp(8, 0, nil))), xdpPass},
		{"v4 echo reply to vip", cat(eth(v4), ipv4("203.0.113.10", 1, 0, false, 5, icmp(0, 0, nil))), xdpPass},
		{"v4 frag needed quoting vip", cat(eth(v4), ipv4("203.0.113.10", 1, 0, false, 5, icmp(3, 4, quoted4("203.0.113.10")))), xdpRedirect},
		{"v4 time exceeded quoting other", cat(eth(v4), ipv4("198.18.0.1", 1, 0, false, 5, icmp(11, 0, quoted4("198.51.100.9")))), xdpPass},
		{"v4 truncated ip", cat(eth(v4), []byte{0x45, 0}), xdpPass},
		{"v4 truncated tcp", cat(eth(v4), ipv4("203.0.113.10", 6, 0, false, 5, []byte{0x9c})), xdpPass},
		{"ethernet header only", eth(v4), xdpPass},
		{"vlan tag truncated", cat(eth(q)[:12], []byte{0x81, 0, 0, 100}), xdpPass},
		{"v6 tcp vip port", cat(eth(v6), ipv6("fd00::7", "fd00::10", 6, tcp(443))), xdpRedirect},
		{"v6 tcp other port", cat(eth(v6), ipv6("fd00::7", "fd00::10", 6, tcp(444))), xdpPass},
		{"v6 hbh+dstopts tcp", cat(eth(v6), ipv6("fd00::7", "fd00::10", 0, ext6(60, ext6(6, tcp(443))))), xdpRedirect},
		{"v6 first fragment", cat(eth(v6), ipv6("fd00::7", "fd00::10", 44, frag6(6, 0, true, tcp(443)))), xdpRedirect},
		{"v6 non-first fragment, port rule", cat(eth(v6), ipv6("fd00::7", "fd00::10", 44, frag6(6, 100, false, tcp(443)))), xdpPass},
		{"v6 non-first fragment, all-ports rule", cat(eth(v6), ipv6("fd00::7", "fd00::11", 44, frag6(17, 100, true, udp(443)))), xdpRedirect},
		{"v6 echo request to vip", cat(eth(v6), ipv6("fd00::7", "fd00::10", 58, icmp(128, 0, nil))), xdpRedirect},
		{"v6 neighbour solicitation to vip", cat(eth(v6), ipv6("fd00::7", "fd00::10", 58, icmp(135, 0, make([]byte, 16)))), xdpPass},
		{"v6 neighbour solicitation multicast", cat(eth(v6), ipv6("fd00::7", "ff02::1:ff00:10", 58, icmp(135, 0, make([]byte, 16)))), xdpPass},
		{"v6 packet too big quoting vip", cat(eth(v6), ipv6("fd00::99", "fd00::10", 58, icmp(2, 0, ipv6("fd00::10", "fd00::7", 6, tcp(40000))))), xdpRedirect},
		{"v6 packet too big quoting other", cat(eth(v6), ipv6("fd00::99", "fd00::10", 58, icmp(2, 0, ipv6("fd00::12", "fd00::7", 6, tcp(40000))))), xdpPass},
		{"vlan v6", cat(eth(v6, q), ipv6("fd00::7", "fd00::10", 6, tcp(443))), xdpRedirect},
		{"v6 truncated ext header", cat(eth(v6), ipv6("fd00::7", "fd00::10", 0, []byte{6, 0})), xdpPass},
	}
}

// quoted4 is the start of a packet a VIP sent (src = VIP), as an ICMP error
// quotes it: IPv4 header and 8 bytes of UDP.
func quoted4(src string) []byte {
	q := ipv4("198.51.100.7", 17, 0, false, 5, udp(40000))
	copy(q[12:], net.ParseIP(src).To4())
	return q
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
		cat(eth(v4), ipv4("203.0.113.10", 6, 0, false, 5, tcp(80))),
		cat(eth(v4), ipv4("203.0.113.10", 1, 0, false, 5, icmp(8, 0, nil))),
		cat(eth(v4), ipv4("203.0.113.10", 1, 0, false, 5, icmp(3, 4, quoted4("203.0.113.10")))),
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
	if got, _ := p.test(cat(eth(v6), ipv6("fd00::7", "fd00::10", 6, tcp(443)))); got != xdpPass {
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
