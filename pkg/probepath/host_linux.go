package probepath

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Names and numbers the path takes on the host. A slot is one daemon's:
// the running one and its successor during a hand-over hold two, two
// appliances on one host two more.
const (
	// TUNPrefix names the TUN of slot i: "xlbprobe0", "xlbprobe1", …
	TUNPrefix = "xlbprobe"
	// Slots is how many paths may exist on one host (network namespace).
	Slots = 16
	// MarkBase is the SO_MARK of slot 0's probe sockets ("xlb" and a slot
	// byte); slot i uses MarkBase + i, as mark and as routing table.
	MarkBase = 0x786c6200
	// RulePriority is the priority of the policy rules "fwmark M lookup M":
	// before the main table (32766), after local (0).
	RulePriority = 1000
	// MaxOverhead is the largest encapsulation overhead (GUE over IPv6):
	// the TUN's MTU is the interface's minus this, so that a probe packet
	// fits every encapsulation of an interface-sized path.
	MaxOverhead = 48
	// minTUNMTU keeps the TUN usable on a small interface MTU (IPv4's
	// minimum datagram; IPv6 needs 1280 and is off on a TUN below it).
	minTUNMTU = 576
	// minIPv6MTU is IPv6's minimum link MTU: below it the kernel turns IPv6
	// off on a device.
	minIPv6MTU = 1280
)

// setupLock serialises setting up and removing probe paths on the host:
// an exclusive flock on /dev/net/tun (one inode for every namespace), so
// that the TUN of a slot and its rules appear and go together as seen by
// another daemon's removeLeftovers.
func setupLock() (unlock func(), err error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock /dev/net/tun: %w", err)
	}
	return func() { unix.Close(fd) }, nil
}

// removeLeftovers removes the policy rules of every other slot whose TUN
// is gone: what daemons that crashed left (their TUNs and routes went with
// them). A slot whose TUN exists belongs to a running daemon.
func (p *Path) removeLeftovers() {
	for slot := 0; slot < Slots; slot++ {
		if slot == p.slot {
			continue // route() replaces our own
		}
		if _, err := netlink.LinkByName(TUNPrefix + strconv.Itoa(slot)); err == nil {
			continue
		}
		other := &Path{mark: MarkBase + uint32(slot)}
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			if err := other.deleteRules(fam); err != nil {
				p.log.Warn("remove a crashed daemon's probe rules", "mark", fmt.Sprintf("%#x", other.mark), "err", err)
			}
		}
	}
}

// setUp runs in the path's namespace, holding the host's setup lock.
func (p *Path) setUp() error {
	unlock, err := setupLock()
	if err != nil {
		return err
	}
	defer unlock()
	link, err := netlink.LinkByName(p.o.Interface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", p.o.Interface, err)
	}
	p.ifidx = link.Attrs().Index
	p.mtu = max(link.Attrs().MTU-MaxOverhead, minTUNMTU)
	for slot := 0; slot < Slots; slot++ {
		name := TUNPrefix + strconv.Itoa(slot)
		f, err := openTUN(name)
		if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EINVAL) {
			continue // held by another daemon (EBUSY), or not a TUN (EINVAL)
		}
		if err != nil {
			return err
		}
		p.slot, p.tun, p.tunFile, p.mark = slot, name, f, MarkBase+uint32(slot)
		break
	}
	if p.tunFile == nil {
		return fmt.Errorf("every probe TUN %s0..%d is held by another process", TUNPrefix, Slots-1)
	}
	p.removeLeftovers()
	// No IPv6 link-local address on the TUN: the kernel would send router
	// solicitations and MLD reports into it.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+p.tun+"/addr_gen_mode", []byte("1"), 0)
	tl, err := netlink.LinkByName(p.tun)
	if err != nil {
		return fmt.Errorf("tun %s: %w", p.tun, err)
	}
	if err := netlink.LinkSetMTU(tl, p.mtu); err != nil {
		return fmt.Errorf("set mtu %d on %s: %w", p.mtu, p.tun, err)
	}
	if err := netlink.LinkSetUp(tl); err != nil {
		return fmt.Errorf("bring %s up: %w", p.tun, err)
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		if fam == netlink.FAMILY_V6 && (ipv6Off() || p.mtu < minIPv6MTU) {
			// IPv6 is off on the host, or on a TUN below 1280: IPv6 VIPs
			// cannot be probed (Dial says why).
			p.noV6 = fmt.Errorf("no IPv6 probes: %s", map[bool]string{true: "IPv6 is off on this host", false: fmt.Sprintf("the TUN's MTU %d (the interface's %d minus %d) is below IPv6's 1280", p.mtu, p.mtu+MaxOverhead, MaxOverhead)}[ipv6Off()])
			p.deleteRules(fam)
			continue
		}
		if err := p.route(tl, fam); err != nil {
			return err
		}
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	// Protocol 0: the socket sends and never receives.
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: p.ifidx}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("bind packet socket to %s: %w", p.o.Interface, err)
	}
	p.tx = os.NewFile(uintptr(fd), "packet:"+p.o.Interface)
	return nil
}

// route replaces the slot's policy rule of one family (any left by a
// daemon that crashed holding the slot goes first) and routes everything
// in the slot's table into the TUN.
func (p *Path) route(tun netlink.Link, fam int) error {
	if err := p.deleteRules(fam); err != nil {
		return err
	}
	mask := uint32(0xffffffff)
	rule := netlink.NewRule()
	rule.Family, rule.Priority, rule.Mark, rule.Mask, rule.Table = fam, RulePriority, p.mark, &mask, int(p.mark)
	if err := netlink.RuleAdd(rule); err != nil {
		return fmt.Errorf("policy rule fwmark %#x lookup %d: %w", p.mark, p.mark, err)
	}
	dst := &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
	if fam == netlink.FAMILY_V6 {
		dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	r := &netlink.Route{LinkIndex: tun.Attrs().Index, Dst: dst, Table: int(p.mark), Scope: netlink.SCOPE_LINK, Family: fam}
	if err := netlink.RouteReplace(r); err != nil {
		return fmt.Errorf("route %s dev %s table %d: %w", dst, p.tun, p.mark, err)
	}
	return nil
}

// deleteRules removes every policy rule of one family with the slot's mark.
func (p *Path) deleteRules(fam int) error {
	rules, err := netlink.RuleListFiltered(fam, &netlink.Rule{Mark: p.mark}, netlink.RT_FILTER_MARK)
	if err != nil {
		if fam == netlink.FAMILY_V6 && ipv6Off() {
			return nil
		}
		return fmt.Errorf("list policy rules: %w", err)
	}
	for i := range rules {
		if err := netlink.RuleDel(&rules[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove policy rule fwmark %#x: %w", p.mark, err)
		}
	}
	return nil
}

// tearDown undoes setUp (whatever part of it was done); it runs in the
// path's namespace. The TUN is not persistent: closing its only queue
// deletes it, and its routes with it.
func (p *Path) tearDown() error {
	if unlock, err := setupLock(); err == nil {
		defer unlock()
	} // without the lock still: the TUN must close, or Close would wait forever
	var errs []error
	if p.tunFile != nil {
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			if err := p.deleteRules(fam); err != nil {
				errs = append(errs, err)
			}
		}
		if err := p.tunFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", p.tun, err))
		}
	} else {
		close(p.done) // no reader ever started
	}
	if p.tx != nil {
		p.tx.Close()
	}
	return errors.Join(errs...)
}

func ipv6Off() bool {
	_, err := os.Stat("/proc/sys/net/ipv6")
	return err != nil
}

// openTUN creates the TUN name (IFF_TUN_EXCL: EBUSY when it exists, so a
// slot's TUN is its lock) as one non-blocking queue on the Go poller, so
// that Close unblocks a pending Read.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_TUN_EXCL)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("create tun %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "tun:"+name), nil
}

// addrCache holds the interface's address of each family, for probes whose
// template's outer address is of the other family; read again after
// addrTTL.
type addrCache struct {
	mu   sync.Mutex
	at   [2]time.Time
	addr [2]netip.Addr
}

const addrTTL = 10 * time.Second

func (c *addrCache) get(p *Path, v4 bool) (netip.Addr, error) {
	i := 0
	if !v4 {
		i = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addr[i].IsValid() && time.Since(c.at[i]) < addrTTL {
		return c.addr[i], nil
	}
	fam := netlink.FAMILY_V4
	if !v4 {
		fam = netlink.FAMILY_V6
	}
	var addrs []netlink.Addr
	err := p.in(func() error {
		link, err := netlink.LinkByIndex(p.ifidx)
		if err != nil {
			return err
		}
		addrs, err = netlink.AddrList(link, fam)
		return err
	})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %s: %w", p.o.Interface, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().IsGlobalUnicast() {
			c.addr[i], c.at[i] = ip.Unmap(), time.Now()
			return c.addr[i], nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%s has no global %s address to send probes from", p.o.Interface, map[bool]string{true: "IPv4", false: "IPv6"}[v4])
}
