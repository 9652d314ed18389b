//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// DefaultPinRoot is where the daemon pins each interface's objects, in a
// directory per interface (PinDir).
const DefaultPinRoot = "/sys/fs/bpf/xlb"

// Pin file names inside an interface's directory: the link and every map.
const pinLink = "link"

var pinnedMaps = []string{"xlb_vips", "xlb_vip_addrs", "xlb_xsks", "xlb_ctl", "xlb_nosock"}

// bpffsMagic is BPF_FS_MAGIC, the f_type of a bpf filesystem.
const bpffsMagic = 0xcafe4a11

// Reuse says what OpenPinned found in the pin directory.
type Reuse struct {
	// Link: a pinned link attached to this interface; the program swaps
	// itself into it instead of attaching (no moment without a program).
	Link bool
	// Maps: its maps were reused as they are (same layout), so the VIP
	// set and the sockets registered by the previous owner stay in force.
	Maps bool
	// Reason explains a cold start over existing pins (stale pins removed)
	// or new maps beside a pinned link (a changed layout); empty otherwise.
	Reason string
}

// PinDir is the directory of the interface ifname under root: root/ifname
// in the network namespace of PID 1, and root/netns-<cookie>/ifname in
// any other (the calling thread's), because one bpf filesystem serves
// every namespace and interface names repeat across them. A namespace
// cookie is never reused while the system runs; pins do not outlive it.
func PinDir(root, ifname string) (string, error) {
	if ifname == "" || strings.ContainsAny(ifname, "/") || ifname == "." || ifname == ".." {
		return "", fmt.Errorf("pin directory: bad interface name %q", ifname)
	}
	var self, init unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &self); err != nil {
		return "", fmt.Errorf("pin directory: %w", err)
	}
	if err := unix.Stat("/proc/1/ns/net", &init); err == nil && self.Dev == init.Dev && self.Ino == init.Ino {
		return filepath.Join(root, ifname), nil
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("pin directory: %w", err)
	}
	defer unix.Close(fd)
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return "", fmt.Errorf("pin directory: network namespace cookie: %w", err)
	}
	return filepath.Join(root, fmt.Sprintf("netns-%d", cookie), ifname), nil
}

// ensureBPFFS creates dir on a bpf filesystem, mounting one on
// /sys/fs/bpf when nothing is mounted there (as systemd does at boot).
func ensureBPFFS(dir string) error {
	p := dir
	for {
		if _, err := os.Stat(p); err == nil {
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", p, err)
	}
	if st.Type != bpffsMagic {
		if p != "/sys/fs/bpf" {
			return fmt.Errorf("%s is not on a bpf filesystem", dir)
		}
		if err := unix.Mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
			return fmt.Errorf("mount bpf filesystem on /sys/fs/bpf: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create pin directory: %w", err)
	}
	return nil
}

// OpenPinned loads the program for the interface ifindex whose objects are
// pinned in dir (PinDir), mounting the bpf filesystem and creating dir
// when absent. What it finds is in Reused:
//
//   - No pins (or stale ones: a link of another interface, or defunct,
//     removed): fresh maps; Attach attaches and pins link and maps.
//   - A pinned link and maps of this layout: the maps are shared with the
//     previous owner (its VIP set, sockets and counters stay live); Attach
//     swaps this program into the link.
//   - A pinned link and maps of another layout (an upgrade that changed a
//     map): fresh maps holding the old VIP set and no-socket actions, not
//     in force until Attach registers the sockets' swap (the caller
//     registers the sockets first), swaps the program and re-pins.
//
// Until Attach nothing in force changes, so a previous owner keeps
// serving while this one prepares.
func OpenPinned(dir string, ifindex int) (_ *Program, err error) {
	if err := liftMemlock(); err != nil {
		return nil, fmt.Errorf("load xdp program: %w", err)
	}
	if err := ensureBPFFS(dir); err != nil {
		return nil, fmt.Errorf("pin xdp objects in %s: %w", dir, err)
	}
	p := newProgram()
	p.dir, p.ifindex = dir, ifindex
	l, why, err := loadPinnedLink(dir, ifindex)
	if err != nil {
		return nil, err
	}
	if l == nil {
		if why != "" {
			p.reuse.Reason = why
			if err := RemovePins(dir); err != nil {
				return nil, err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("create pin directory: %w", err)
			}
		}
		if err := loadXskObjects(&p.objs, nil); err != nil {
			return nil, loadError(err)
		}
		return p, nil
	}
	defer func() {
		if err != nil {
			l.Close()
			p.closeObjects()
		}
	}()
	p.link, p.swap = l, true
	p.reuse.Link = true
	old, err := loadPinnedMaps(dir)
	if err != nil {
		return nil, err
	}
	spec, err := loadXsk()
	if err != nil {
		return nil, loadError(err)
	}
	err = spec.LoadAndAssign(&p.objs, &ebpf.CollectionOptions{MapReplacements: old})
	switch {
	case err == nil:
		// Maps missing from the pins (none, unless a crash interrupted
		// pinning) are new and pinned at the swap.
		p.reuse.Maps = len(old) == len(pinnedMaps)
		if !p.reuse.Maps {
			p.reuse.Reason = fmt.Sprintf("%d of %d maps were pinned: the others are new", len(old), len(pinnedMaps))
		}
		for _, m := range old {
			m.Close() // the collection holds clones
		}
	case errors.Is(err, ebpf.ErrMapIncompatible):
		p.reuse.Reason = fmt.Sprintf("map layout changed (%v): new maps, VIP set copied", err)
		for _, m := range old {
			p.stale = append(p.stale, m)
		}
		if err := loadXskObjects(&p.objs, nil); err != nil {
			return nil, loadError(err)
		}
		if err := p.copyFrom(old); err != nil {
			return nil, err
		}
	default:
		for _, m := range old {
			m.Close()
		}
		return nil, loadError(err)
	}
	if err := p.readVIPs(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reused reports what OpenPinned found.
func (p *Program) Reused() Reuse { return p.reuse }

// loadPinnedLink opens dir's pinned link if it is an XDP link attached to
// ifindex. A link that is not (its interface is gone, or it belongs to
// another one) is closed and reported with the reason.
func loadPinnedLink(dir string, ifindex int) (link.Link, string, error) {
	path := filepath.Join(dir, pinLink)
	l, err := link.LoadPinnedLink(path, nil)
	if errors.Is(err, fs.ErrNotExist) {
		entries, _ := os.ReadDir(dir)
		if len(entries) > 0 {
			return nil, fmt.Sprintf("%d pins without a link", len(entries)), nil
		}
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("open pinned xdp link %s: %w", path, err)
	}
	info, err := l.Info()
	if err != nil {
		l.Close()
		return nil, "", fmt.Errorf("pinned xdp link %s: %w", path, err)
	}
	x := info.XDP()
	if x == nil {
		l.Close()
		return nil, fmt.Sprintf("pinned link is not an xdp link (type %d)", info.Type), nil
	}
	if int(x.Ifindex) != ifindex {
		l.Close()
		return nil, fmt.Sprintf("pinned link is attached to ifindex %d, not %d", x.Ifindex, ifindex), nil
	}
	return l, "", nil
}

// loadPinnedMaps opens the maps pinned in dir; a missing one is left out.
func loadPinnedMaps(dir string) (map[string]*ebpf.Map, error) {
	out := map[string]*ebpf.Map{}
	for _, name := range pinnedMaps {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			for _, m := range out {
				m.Close()
			}
			return nil, fmt.Errorf("open pinned map %s: %w", name, err)
		}
		out[name] = m
	}
	return out, nil
}

// copyFrom fills fresh maps from an older layout's: the VIP set and the
// no-socket actions, entry by entry with the types this build knows;
// entries it cannot read are skipped (the daemon publishes its VIP set
// again before the swap in any case). Sockets cannot be read from an
// XSKMAP: the caller registers them.
func (p *Program) copyFrom(old map[string]*ebpf.Map) error {
	if m := old["xlb_vips"]; m != nil && m.KeySize() == 20 && m.ValueSize() == 4 {
		var (
			k xskVipKey
			v uint32
		)
		for it := m.Iterate(); it.Next(&k, &v); {
			if err := p.objs.XlbVips.Put(k, v); err != nil {
				return fmt.Errorf("copy vip: %w", err)
			}
		}
	}
	if m := old["xlb_ctl"]; m != nil && m.KeySize() == 4 && m.ValueSize() == 4 {
		var k, v uint32
		for it := m.Iterate(); it.Next(&k, &v); {
			if v != 0 {
				if err := p.objs.XlbCtl.Put(k, v); err != nil {
					return fmt.Errorf("copy no-socket action: %w", err)
				}
			}
		}
	}
	return nil
}

// readVIPs takes the VIP set from xlb_vips (a reused or copied map) and
// makes xlb_vip_addrs agree with it, so ReplaceVIPs removes what the new
// configuration drops and a crash between the two maps' updates leaves
// nothing behind.
func (p *Program) readVIPs() error {
	var (
		k   xskVipKey
		val uint32
	)
	it := p.objs.XlbVips.Iterate()
	for it.Next(&k, &val) {
		v := VIP{Addr: netip.AddrFrom16(k.Addr).Unmap(), Proto: k.Proto, Port: htons(k.Port)}
		p.vips[v] = struct{}{}
		p.addrRefs[k.Addr]++
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read pinned vips: %w", err)
	}
	var (
		a     [16]byte
		n     uint32
		extra [][16]byte
	)
	for it := p.objs.XlbVipAddrs.Iterate(); it.Next(&a, &n); {
		if p.addrRefs[a] != n {
			extra = append(extra, a)
		}
	}
	for _, a := range extra {
		if p.addrRefs[a] == 0 {
			if err := p.objs.XlbVipAddrs.Delete(a); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("repair vip addresses: %w", err)
			}
		}
	}
	for a, n := range p.addrRefs {
		if err := p.objs.XlbVipAddrs.Put(a, n); err != nil {
			return fmt.Errorf("repair vip addresses: %w", err)
		}
	}
	return nil
}

// swapIn puts this program into the pinned link (the hook's swap is
// atomic: every packet sees the old program or the new one) and re-pins
// maps of a new layout. The caller holds p.mu.
func (p *Program) swapIn(ifindex int) (AttachMode, error) {
	if ifindex != p.ifindex {
		return 0, fmt.Errorf("attach xdp to ifindex %d: the pinned link is attached to ifindex %d", ifindex, p.ifindex)
	}
	// A link that already runs this very program (a restart of the same
	// build: the kernel's tag hashes the instructions, map references
	// masked) keeps it; an update would only cost time (milliseconds:
	// generic XDP waits for an RCU grace period), in a hand-over's pause.
	if same, err := p.linkRunsOurs(); err != nil || !same {
		if err := p.link.Update(p.objs.XlbRedirect); err != nil {
			return 0, fmt.Errorf("swap xdp program into the pinned link: %w", err)
		}
	}
	p.swap = false
	if p.stale != nil {
		for _, m := range p.stale {
			_ = m.Unpin()
		}
		if err := p.pinMaps(); err != nil {
			return 0, err
		}
	}
	mode := AttachNative
	if l, err := netlink.LinkByIndex(ifindex); err == nil && l.Attrs().Xdp != nil && l.Attrs().Xdp.AttachMode == nl.XDP_ATTACHED_SKB {
		mode = AttachGeneric
	}
	p.mode = mode
	return mode, nil
}

// linkRunsOurs reports whether the pinned link runs a program with the
// same tag as this one.
func (p *Program) linkRunsOurs() (bool, error) {
	info, err := p.link.Info()
	if err != nil {
		return false, err
	}
	running, err := ebpf.NewProgramFromID(info.Program)
	if err != nil {
		return false, err
	}
	defer running.Close()
	ri, err := running.Info()
	if err != nil {
		return false, err
	}
	oi, err := p.objs.XlbRedirect.Info()
	if err != nil {
		return false, err
	}
	return ri.Tag == oi.Tag && p.stale == nil, nil
}

// pinAll pins a freshly attached link and the maps. The caller holds p.mu.
func (p *Program) pinAll() error {
	if err := p.pinMaps(); err != nil {
		return err
	}
	if err := p.link.Pin(filepath.Join(p.dir, pinLink)); err != nil {
		return fmt.Errorf("pin xdp link: %w", err)
	}
	return nil
}

func (p *Program) pinMaps() error {
	for name, m := range p.mapsByName() {
		path := filepath.Join(p.dir, name)
		if _, err := os.Stat(path); err == nil {
			continue // a reused map, pinned by the previous owner
		}
		if err := m.Pin(path); err != nil {
			return fmt.Errorf("pin map %s: %w", name, err)
		}
	}
	return nil
}

func (p *Program) mapsByName() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		"xlb_vips": p.objs.XlbVips, "xlb_vip_addrs": p.objs.XlbVipAddrs, "xlb_xsks": p.objs.XlbXsks,
		"xlb_ctl": p.objs.XlbCtl, "xlb_nosock": p.objs.XlbNosock,
	}
}

// unpinAll removes every pin of the directory and the directory. The
// caller holds p.mu and closes the link afterwards, which detaches it.
func (p *Program) unpinAll() error {
	var errs []error
	if p.link != nil {
		errs = append(errs, p.link.Unpin())
	}
	errs = append(errs, removePinFiles(p.dir))
	return errors.Join(errs...)
}

// Release closes the program's file descriptors and leaves the pinned
// link and maps in place, attached: for a process that hands the
// interface to a successor or exits to be restarted. A program without
// pins is detached by the kernel when its link closes.
func (p *Program) Release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	if p.link != nil {
		errs = append(errs, p.link.Close())
		p.link = nil
	}
	errs = append(errs, p.closeObjects())
	return errors.Join(errs...)
}

// RemovePins detaches the program pinned in dir and removes every pin and
// the directory (for `xlb stop` when no daemon runs). A link that another
// process still holds open stays attached until that process closes it.
func RemovePins(dir string) error {
	var errs []error
	l, err := link.LoadPinnedLink(filepath.Join(dir, pinLink), nil)
	switch {
	case err == nil:
		errs = append(errs, l.Unpin(), l.Close())
	case !errors.Is(err, fs.ErrNotExist):
		errs = append(errs, fmt.Errorf("open pinned xdp link: %w", err))
	}
	errs = append(errs, removePinFiles(dir))
	return errors.Join(errs...)
}

// removePinFiles removes the known pins of dir, then dir and, when it is a
// namespace's directory left empty, its parent.
func removePinFiles(dir string) error {
	var errs []error
	for _, name := range append([]string{pinLink}, pinnedMaps...) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove pin: %w", err))
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove pin directory: %w", err))
	}
	if parent := filepath.Dir(dir); strings.HasPrefix(filepath.Base(parent), "netns-") {
		_ = os.Remove(parent) // fails while another interface of the namespace is pinned
	}
	return errors.Join(errs...)
}

// SetNoSocketDrop sets what the program does with a VIP packet of queue
// while its XSKMAP slot is empty: drop it (drop, for a queue the daemon
// serves) or pass it to the kernel (the initial action, for the others).
func (p *Program) SetNoSocketDrop(queue int, drop bool) error {
	v := uint32(0)
	if drop {
		v = 1
	}
	if err := p.objs.XlbCtl.Put(uint32(queue), v); err != nil {
		return fmt.Errorf("set no-socket action of queue %d: %w", queue, err)
	}
	return nil
}

// NoSocketCounts are the VIP packets of one queue that found no socket.
type NoSocketCounts struct {
	Dropped uint64 // on a served queue
	Passed  uint64 // on a queue the daemon does not serve
}

// NoSocket returns the no-socket counts of queue, summed over CPUs.
func (p *Program) NoSocket(queue int) (NoSocketCounts, error) {
	var per []xskNosockCounts
	if err := p.objs.XlbNosock.Lookup(uint32(queue), &per); err != nil {
		return NoSocketCounts{}, fmt.Errorf("read no-socket counts of queue %d: %w", queue, err)
	}
	var c NoSocketCounts
	for _, v := range per {
		c.Dropped += v.Dropped
		c.Passed += v.Passed
	}
	return c, nil
}
