package xsk

import (
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/packettest"
	"github.com/xlbnet/xlb/pkg/testutil"
)

const xdpDrop = 1

// TestNoSocketAction is the golden table of what a VIP packet gets with
// and without a socket in its queue's XSKMAP slot, per no-socket action,
// and what is counted (BPF_PROG_TEST_RUN runs on queue 0).
func TestNoSocketAction(t *testing.T) {
	testutil.RequireRoot(t)
	p := loadForTest(t) // a socket in slot 0
	if err := p.ReplaceVIPs(fuzzVIPs); err != nil {
		t.Fatal(err)
	}
	fd := registeredFD(t, p)
	vipPkt := packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "203.0.113.10", Proto: 6}.Build(packettest.TCP(40000, 80, 0)))
	otherPkt := packettest.Cat(packettest.Eth(v4), packettest.IPv4{Src: client4, Dst: "198.18.0.1", Proto: 6}.Build(packettest.TCP(40000, 22, 0)))
	tests := []struct {
		name          string
		socket, drop  bool
		pkt           []byte
		want          uint32
		dropped, pass uint64 // counter increments
	}{
		{"socket, pass action", true, false, vipPkt, xdpRedirect, 0, 0},
		{"socket, drop action", true, true, vipPkt, xdpRedirect, 0, 0},
		{"no socket, pass action", false, false, vipPkt, xdpPass, 0, 1},
		{"no socket, drop action", false, true, vipPkt, xdpDrop, 1, 0},
		{"no socket, drop action, not a vip", false, true, otherPkt, xdpPass, 0, 0},
		{"no socket, pass action, not a vip", false, false, otherPkt, xdpPass, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.socket {
				if err := p.Register(0, fd); err != nil {
					t.Fatal(err)
				}
			} else if err := p.Unregister(0); err != nil {
				t.Fatal(err)
			}
			if err := p.SetNoSocketDrop(0, tt.drop); err != nil {
				t.Fatal(err)
			}
			before, err := p.NoSocket(0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.test(tt.pkt)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("action = %d, want %d (1 drop, 2 pass, 4 redirect)", got, tt.want)
			}
			after, _ := p.NoSocket(0)
			if d, ps := after.Dropped-before.Dropped, after.Passed-before.Passed; d != tt.dropped || ps != tt.pass {
				t.Errorf("counted dropped +%d passed +%d, want +%d +%d", d, ps, tt.dropped, tt.pass)
			}
		})
	}
}

// registeredFD returns the fd loadForTest registered in slot 0 (the test
// re-registers it after emptying the slot).
func registeredFD(t *testing.T, p *Program) int {
	t.Helper()
	ns := testutil.NewNetNS(t, "xskf")
	if err := ns.Run("ip", "link", "add", "x0", "type", "veth", "peer", "name", "x1"); err != nil {
		t.Fatal(err)
	}
	return vethSocket(t, ns).FD()
}

// pinRoot returns a fresh pin root on the bpf filesystem, removed at the
// end of the test.
func pinRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join("/sys/fs/bpf", testutil.Unique("xlbt"))
	if err := ensureBPFFS(root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return root
}

// vethNS is a namespace with x0 (XDP side, one queue, 198.18.0.1 and the
// VIP 203.0.113.10 as local addresses) and a peer namespace with p0.
type vethNS struct {
	lb, peer *netns.NS
	ifindex  int
}

func newVethNS(t *testing.T) *vethNS {
	t.Helper()
	v := &vethNS{lb: testutil.NewNetNS(t, "xskl"), peer: testutil.NewNetNS(t, "xskp")}
	for _, s := range []struct {
		ns   *netns.NS
		args string
	}{
		{v.lb, "link add x0 type veth peer name p0 netns " + v.peer.Name},
		{v.lb, "addr add 198.18.0.1/24 dev x0"},
		{v.lb, "addr add 203.0.113.10/32 dev x0"},
		{v.lb, "link set x0 up"},
		{v.peer, "addr add 198.18.0.2/24 dev p0"},
		{v.peer, "link set p0 up"},
		{v.peer, "route add 203.0.113.10/32 via 198.18.0.1"},
	} {
		if err := s.ns.Run("ip", strings.Fields(s.args)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.lb.Do(func() error {
		ifi, err := net.InterfaceByName("x0")
		if err == nil {
			v.ifindex = ifi.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// dial connects from the peer to the VIP's port 80, where nothing
// listens: the kernel answers a SYN with a reset ("connection refused");
// a dropped SYN times out.
func (v *vethNS) dial(t *testing.T) error {
	t.Helper()
	var derr error
	if err := v.peer.Do(func() error {
		c, err := net.DialTimeout("tcp4", "203.0.113.10:80", 700*time.Millisecond)
		if err == nil {
			c.Close()
		}
		derr = err
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return derr
}

// refused dials until the kernel refuses, for up to 5 s: the first SYN
// over a fresh veth pair may be lost while its carrier comes up (and a
// loaded machine stretches that), which is no answer either way. It
// returns the last answer when none was a refusal.
func (v *vethNS) refused(t *testing.T) error {
	t.Helper()
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err = v.dial(t); err != nil && strings.Contains(err.Error(), "refused") {
			return nil
		}
	}
	if err == nil {
		err = errors.New("connected")
	}
	return err
}

func (v *vethNS) openPinned(t *testing.T, root string) (*Program, string) {
	t.Helper()
	var (
		p   *Program
		dir string
	)
	if err := v.lb.Do(func() (err error) {
		if dir, err = PinDir(root, "x0"); err != nil {
			return err
		}
		p, err = OpenPinned(dir, v.ifindex)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// pinDir returns x0's pin directory under root, on a bpf filesystem.
func (v *vethNS) pinDir(t *testing.T, root string) string {
	t.Helper()
	var dir string
	if err := v.lb.Do(func() (err error) {
		dir, err = PinDir(root, "x0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := ensureBPFFS(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pinAttached attaches objs' program to x0 and pins the link and maps in
// dir, as a process of another build would have left them.
func (v *vethNS) pinAttached(t *testing.T, dir string, objs *xskObjects) {
	t.Helper()
	var l link.Link
	if err := v.lb.Do(func() (err error) {
		l, err = link.AttachXDP(link.XDPOptions{Program: objs.XlbRedirect, Interface: v.ifindex})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Pin(filepath.Join(dir, pinLink)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for name, m := range map[string]*ebpf.Map{"xlb_vips": objs.XlbVips, "xlb_vip_addrs": objs.XlbVipAddrs, "xlb_xsks": objs.XlbXsks, "xlb_ctl": objs.XlbCtl, "xlb_nosock": objs.XlbNosock} {
		if err := m.Pin(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func (v *vethNS) attach(t *testing.T, p *Program) AttachMode {
	t.Helper()
	var mode AttachMode
	if err := v.lb.Do(func() (err error) {
		mode, err = p.Attach(v.ifindex, AttachAuto)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mode
}

func (v *vethNS) xdpShown(t *testing.T) bool {
	t.Helper()
	out, err := v.lb.Output("ip", "link", "show", "x0")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(out, "xdp")
}

// TestPinnedRestart: a program pinned by one owner stays attached, and
// keeps dropping (not resetting) VIP packets of its served queue, after
// the owner lets go with no socket registered; a second owner finds link
// and maps, keeps the VIP set, swaps itself in; Close removes everything.
func TestPinnedRestart(t *testing.T) {
	testutil.RequireRoot(t)
	root := pinRoot(t)
	v := newVethNS(t)
	if err := v.refused(t); err != nil {
		t.Fatalf("without xlb, a SYN to the VIP's closed port gets %v, want connection refused", err)
	}
	p, dir := v.openPinned(t, root)
	if !strings.Contains(dir, "/netns-") {
		t.Errorf("pin directory %s of a test namespace has no netns component", dir)
	}
	if r := p.Reused(); r.Link || r.Maps || r.Reason != "" {
		t.Errorf("first open reused %+v, want nothing", r)
	}
	if mode := v.attach(t, p); mode != AttachNative {
		t.Errorf("mode %s, want native", mode)
	}
	vip := VIP{Addr: netip.MustParseAddr("203.0.113.10"), Proto: 6, Port: 80}
	if err := p.ReplaceVIPs([]VIP{vip}); err != nil {
		t.Fatal(err)
	}
	if err := p.SetNoSocketDrop(0, true); err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{pinLink}, pinnedMaps...) {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("pin %s: %v", name, err)
		}
	}
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	if !v.xdpShown(t) {
		t.Fatal("the program was detached when its owner let go")
	}
	if err := v.dial(t); err == nil || strings.Contains(err.Error(), "refused") {
		t.Fatalf("with no socket, a SYN to the VIP got %v, want a timeout (dropped, not reset)", err)
	}

	p2, _ := v.openPinned(t, root)
	defer p2.Close()
	if r := p2.Reused(); !r.Link || !r.Maps {
		t.Errorf("second open reused %+v, want link and maps", r)
	}
	if got, err := p2.VIPs(); err != nil || len(got) != 1 || got[0] != vip {
		t.Errorf("VIPs after reopen = %v, %v; want [%v]", got, err, vip)
	}
	if c, err := p2.NoSocket(0); err != nil || c.Dropped == 0 {
		t.Errorf("no-socket counts %+v, %v; want drops counted", c, err)
	}
	before := linkProgram(t, dir)
	if mode := v.attach(t, p2); mode != AttachNative {
		t.Errorf("mode after swap %s, want native", mode)
	}
	// The same build: the link keeps the program it runs (same tag).
	if after := linkProgram(t, dir); after != before {
		t.Errorf("a restart of the same build swapped program %d for %d", before, after)
	}
	// A pass action (queue not served) hands the packet to the kernel,
	// which resets.
	if err := p2.SetNoSocketDrop(0, false); err != nil {
		t.Fatal(err)
	}
	if err := v.refused(t); err != nil {
		t.Errorf("pass action: %v, want connection refused", err)
	}
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	if v.xdpShown(t) {
		t.Error("Close left the program attached")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pin directory after Close: %v, want gone", err)
	}
}

// linkProgram returns the id of the program dir's pinned link runs.
func linkProgram(t *testing.T, dir string) ebpf.ProgramID {
	t.Helper()
	l, err := link.LoadPinnedLink(filepath.Join(dir, pinLink), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	return info.Program
}

// TestPinnedUpgradeSwaps: a successor whose program differs (another
// build) swaps it into the pinned link, keeping the maps.
func TestPinnedUpgradeSwaps(t *testing.T) {
	testutil.RequireRoot(t)
	root := pinRoot(t)
	v := newVethNS(t)
	dir := v.pinDir(t, root)
	// The "old build": one more instruction up front (r0 = 0), so its
	// tag differs; same maps.
	spec, err := loadXsk()
	if err != nil {
		t.Fatal(err)
	}
	ps := spec.Programs["xlb_redirect"]
	first := ps.Instructions[0]
	ps.Instructions = append(asm.Instructions{asm.Mov.Imm(asm.R0, 0).WithMetadata(first.Metadata)}, ps.Instructions...)
	ps.Instructions[1] = ps.Instructions[1].WithMetadata(asm.Metadata{})
	var old xskObjects
	if err := spec.LoadAndAssign(&old, nil); err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	v.pinAttached(t, dir, &old)
	oldID := linkProgram(t, dir)
	p, _ := v.openPinned(t, root)
	defer p.Close()
	if r := p.Reused(); !r.Link || !r.Maps {
		t.Fatalf("reused %+v, want link and maps", r)
	}
	v.attach(t, p)
	pi, _ := p.objs.XlbRedirect.Info()
	id, _ := pi.ID()
	if got := linkProgram(t, dir); got == oldID || got != id {
		t.Errorf("after the upgrade the link runs program %d (old %d, new %d)", got, oldID, id)
	}
}

// TestPinnedStaleAndRemove: pins of another interface are discarded with
// a reason, and RemovePins detaches what nobody holds.
func TestPinnedStaleAndRemove(t *testing.T) {
	testutil.RequireRoot(t)
	root := pinRoot(t)
	v := newVethNS(t)
	p, dir := v.openPinned(t, root)
	v.attach(t, p)
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	var p2 *Program
	if err := v.lb.Do(func() (err error) {
		p2, err = OpenPinned(dir, v.ifindex+100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r := p2.Reused(); r.Link || !strings.Contains(r.Reason, "attached to ifindex") {
		t.Errorf("open for another ifindex reused %+v, want a stale-pin reason", r)
	}
	p2.Close()
	if v.xdpShown(t) {
		t.Error("stale pins removed but the program is still attached")
	}

	p3, _ := v.openPinned(t, root)
	v.attach(t, p3)
	p3.Release()
	if !v.xdpShown(t) {
		t.Fatal("not attached after release")
	}
	if err := RemovePins(dir); err != nil {
		t.Fatal(err)
	}
	if v.xdpShown(t) {
		t.Error("RemovePins left the program attached")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pin directory after RemovePins: %v", err)
	}
}

// TestPinnedLayoutChange: an upgrade whose maps differ (here xlb_vips of
// another size) gets new maps with the VIP set copied; the old maps stay
// in force until Attach swaps the program and re-pins.
func TestPinnedLayoutChange(t *testing.T) {
	testutil.RequireRoot(t)
	root := pinRoot(t)
	v := newVethNS(t)
	dir := v.pinDir(t, root)
	// The "old build": the same program over a smaller xlb_vips.
	spec, err := loadXsk()
	if err != nil {
		t.Fatal(err)
	}
	spec.Maps["xlb_vips"].MaxEntries = 1024
	var old xskObjects
	if err := spec.LoadAndAssign(&old, nil); err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	vip := VIP{Addr: netip.MustParseAddr("203.0.113.10"), Proto: 6, Port: 80}
	k, _ := vip.key()
	if err := old.XlbVips.Put(k, uint32(1)); err != nil {
		t.Fatal(err)
	}
	if err := old.XlbCtl.Put(uint32(0), uint32(1)); err != nil {
		t.Fatal(err)
	}
	v.pinAttached(t, dir, &old)

	p, _ := v.openPinned(t, root)
	defer p.Close()
	r := p.Reused()
	if !r.Link || r.Maps || !strings.Contains(r.Reason, "layout changed") {
		t.Fatalf("reused %+v, want the link, new maps and a layout reason", r)
	}
	if got, _ := p.VIPs(); len(got) != 1 || got[0] != vip {
		t.Errorf("VIPs copied = %v, want [%v]", got, vip)
	}
	pinned, err := ebpf.LoadPinnedMap(filepath.Join(dir, "xlb_vips"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pinned.MaxEntries() != 1024 {
		t.Errorf("before the swap the pinned xlb_vips has %d entries, want the old 1024", pinned.MaxEntries())
	}
	pinned.Close()
	v.attach(t, p)
	pinned, err = ebpf.LoadPinnedMap(filepath.Join(dir, "xlb_vips"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	if pinned.MaxEntries() != 65536 {
		t.Errorf("after the swap the pinned xlb_vips has %d entries, want the new 65536", pinned.MaxEntries())
	}
	if err := v.dial(t); err == nil || strings.Contains(err.Error(), "refused") {
		t.Errorf("after the swap a SYN to the VIP with no socket got %v, want dropped (copied action)", err)
	}
}
