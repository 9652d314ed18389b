//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// AttachMode selects how the program is attached to an interface.
type AttachMode uint8

const (
	// AttachAuto tries native (driver) mode and falls back to generic.
	AttachAuto AttachMode = iota
	// AttachNative requires driver mode (XDP_FLAGS_DRV_MODE).
	AttachNative
	// AttachGeneric uses the kernel's generic (SKB) mode, which works on
	// every interface but runs after the skb is built.
	AttachGeneric
)

func (m AttachMode) String() string {
	switch m {
	case AttachAuto:
		return "auto"
	case AttachNative:
		return "native"
	case AttachGeneric:
		return "generic"
	}
	return fmt.Sprintf("AttachMode(%d)", uint8(m))
}

// VIP is one entry of the VIP set: packets to Addr with IP protocol Proto
// and destination port Port are redirected. Proto 0 means every protocol
// (an L3_DEFAULT rule); Port 0 means every port (ports = "ALL", and the
// only entries non-first fragments can match).
type VIP struct {
	Addr  netip.Addr
	Proto uint8
	Port  uint16
}

func (v VIP) String() string {
	return fmt.Sprintf("%s proto %d port %d", v.Addr, v.Proto, v.Port)
}

// key encodes v as the program's struct vip_key.
func (v VIP) key() (xskVipKey, error) {
	if !v.Addr.IsValid() {
		return xskVipKey{}, fmt.Errorf("vip %v: no address", v)
	}
	if v.Proto == 0 && v.Port != 0 {
		return xskVipKey{}, fmt.Errorf("vip %v: a port needs a protocol", v)
	}
	return xskVipKey{
		Addr:  v.Addr.Unmap().As16(), // IPv4 as ::ffff:a.b.c.d
		Port:  htons(v.Port),
		Proto: v.Proto,
	}, nil
}

// htons puts port in network byte order in the in-memory layout of a
// uint16 on this (little-endian: the generated objects are bpfel only)
// host.
func htons(port uint16) uint16 { return bits.ReverseBytes16(port) }

// Program is the loaded xlb_redirect program and its maps. Its methods
// may be called from any goroutine (they take an internal lock); they are
// control-plane operations and make syscalls.
type Program struct {
	mu      sync.Mutex
	objs    xskObjects
	link    link.Link
	ifindex int
	mode    AttachMode
	// nativeErr is why AttachAuto fell back to generic mode (nil when it
	// did not).
	nativeErr error
	addrRefs  map[[16]byte]uint32 // entries per address in xlb_vips, mirrored in xlb_vip_addrs
	vips      map[VIP]struct{}

	// Pinning (pin.go); all zero for a program from Load.
	dir   string      // the interface's pin directory
	swap  bool        // link is a pinned link still running another program
	stale []*ebpf.Map // pinned maps of an older layout, unpinned at the swap
	reuse Reuse       // what OpenPinned found
}

func newProgram() *Program {
	return &Program{addrRefs: map[[16]byte]uint32{}, vips: map[VIP]struct{}{}}
}

// Load loads the program and creates its maps (empty VIP set, empty XSKMAP).
func Load() (*Program, error) {
	if err := liftMemlock(); err != nil {
		return nil, fmt.Errorf("load xdp program: %w", err)
	}
	p := newProgram()
	if err := loadXskObjects(&p.objs, nil); err != nil {
		return nil, loadError(err)
	}
	return p, nil
}

func loadError(err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("load xdp program: %+v", ve)
	}
	return fmt.Errorf("load xdp program: %w", err)
}

// Attach attaches the program to the interface ifindex (in the calling
// thread's network namespace) and returns the mode it got: with
// AttachAuto, native when the driver supports XDP, generic otherwise.
// A program from OpenPinned that found a pinned link swaps itself into
// that link instead (atomically; the mode is the link's) and pins maps of
// a new layout; one that found none attaches and pins the link and maps.
func (p *Program) Attach(ifindex int, mode AttachMode) (AttachMode, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.swap {
		return p.swapIn(ifindex)
	}
	if p.link != nil {
		return 0, fmt.Errorf("attach xdp to ifindex %d: already attached to ifindex %d", ifindex, p.ifindex)
	}
	attach := func(flags link.XDPAttachFlags) (link.Link, error) {
		return link.AttachXDP(link.XDPOptions{Program: p.objs.XlbRedirect, Interface: ifindex, Flags: flags})
	}
	var err error
	switch mode {
	case AttachNative:
		p.link, err = attach(link.XDPDriverMode)
	case AttachGeneric:
		p.link, err = attach(link.XDPGenericMode)
	case AttachAuto:
		var nativeErr error
		if p.link, nativeErr = attach(link.XDPDriverMode); nativeErr == nil {
			mode = AttachNative
		} else if p.link, err = attach(link.XDPGenericMode); err == nil {
			mode, p.nativeErr = AttachGeneric, nativeErr
		} else {
			err = fmt.Errorf("native: %v; generic: %w", nativeErr, err)
		}
	default:
		return 0, fmt.Errorf("attach xdp to ifindex %d: unknown mode %d", ifindex, mode)
	}
	if err != nil {
		p.link = nil
		return 0, fmt.Errorf("attach xdp to ifindex %d in %s mode: %w", ifindex, mode, err)
	}
	p.ifindex, p.mode = ifindex, mode
	if p.dir != "" {
		if err := p.pinAll(); err != nil {
			p.link.Close()
			p.link = nil
			return 0, err
		}
	}
	return mode, nil
}

// NativeRefused returns why AttachAuto attached in generic mode: the
// kernel's answer to the native attach. It is nil when the program runs
// natively, was asked for a mode, or took over a pinned link.
func (p *Program) NativeRefused() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nativeErr
}

// Mode returns the mode the program is attached in, and whether it is.
func (p *Program) Mode() (AttachMode, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.link != nil
}

// Detach removes the program from its interface, and its pins. Traffic
// then goes to the kernel stack again. Detaching a detached program does
// nothing.
func (p *Program) Detach() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.link == nil {
		return nil
	}
	if p.swap {
		// The link still runs the previous owner's program: this one
		// never took over, so it only lets go of its file descriptor.
		err := p.link.Close()
		p.link, p.swap = nil, false
		return err
	}
	var errs []error
	if p.dir != "" {
		errs = append(errs, p.unpinAll())
	}
	// Close detaches a link that is no longer pinned.
	if err := p.link.Close(); err != nil {
		errs = append(errs, fmt.Errorf("detach xdp from ifindex %d: %w", p.ifindex, err))
	}
	p.link, p.swap = nil, false
	return errors.Join(errs...)
}

// Close detaches the program, removes its pins and releases the program
// and its maps. Release is the variant that leaves it all in place.
func (p *Program) Close() error {
	errD := p.Detach()
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(errD, p.closeObjects())
}

func (p *Program) closeObjects() error {
	errs := []error{p.objs.Close()}
	for _, m := range p.stale {
		errs = append(errs, m.Close())
	}
	p.stale = nil
	return errors.Join(errs...)
}

// Register puts the AF_XDP socket fd in the XSKMAP slot of queue, so the
// program redirects that queue's VIP packets to it.
func (p *Program) Register(queue, fd int) error {
	if err := p.objs.XlbXsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("register xdp socket for queue %d: %w", queue, err)
	}
	return nil
}

// Unregister empties the XSKMAP slot of queue; its VIP packets then get
// the queue's no-socket action (SetNoSocketDrop): dropped and counted on
// served queues, passed to the kernel stack on the others.
func (p *Program) Unregister(queue int) error {
	if err := p.objs.XlbXsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unregister xdp socket for queue %d: %w", queue, err)
	}
	return nil
}

// AddVIP adds v to the VIP set. Adding a present VIP does nothing.
func (p *Program) AddVIP(v VIP) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.add(v)
}

// RemoveVIP removes v from the VIP set. Removing an absent VIP does nothing.
func (p *Program) RemoveVIP(v VIP) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.remove(v)
}

// ReplaceVIPs makes the VIP set exactly vs. New entries are added before
// old ones are removed, so a VIP present in both sets never stops matching.
// On error the set holds the old entries, some of the new, or both.
func (p *Program) ReplaceVIPs(vs []VIP) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := make(map[VIP]struct{}, len(vs))
	for _, v := range vs {
		v.Addr = v.Addr.Unmap()
		want[v] = struct{}{}
		if err := p.add(v); err != nil {
			return fmt.Errorf("replace vips: %w", err)
		}
	}
	for v := range p.vips {
		if _, ok := want[v]; !ok {
			if err := p.remove(v); err != nil {
				return fmt.Errorf("replace vips: %w", err)
			}
		}
	}
	return nil
}

// VIPs returns the VIP set as the kernel map holds it.
func (p *Program) VIPs() ([]VIP, error) {
	var (
		k   xskVipKey
		val uint32
		out []VIP
	)
	it := p.objs.XlbVips.Iterate()
	for it.Next(&k, &val) {
		out = append(out, VIP{
			Addr:  netip.AddrFrom16(k.Addr).Unmap(),
			Proto: k.Proto,
			Port:  htons(k.Port),
		})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list vips: %w", err)
	}
	return out, nil
}

func (p *Program) add(v VIP) error {
	v.Addr = v.Addr.Unmap()
	if _, ok := p.vips[v]; ok {
		return nil
	}
	k, err := v.key()
	if err != nil {
		return fmt.Errorf("add vip: %w", err)
	}
	refs := p.addrRefs[k.Addr] + 1
	// The address entry first: an ICMP error may be checked against it as
	// soon as the rule entry exists.
	if err := p.objs.XlbVipAddrs.Put(k.Addr, refs); err != nil {
		return fmt.Errorf("add vip %v: address entry: %w", v, err)
	}
	if err := p.objs.XlbVips.Put(k, uint32(1)); err != nil {
		return fmt.Errorf("add vip %v: %w", v, err)
	}
	p.addrRefs[k.Addr] = refs
	p.vips[v] = struct{}{}
	return nil
}

func (p *Program) remove(v VIP) error {
	v.Addr = v.Addr.Unmap()
	if _, ok := p.vips[v]; !ok {
		return nil
	}
	k, err := v.key()
	if err != nil {
		return fmt.Errorf("remove vip: %w", err)
	}
	if err := p.objs.XlbVips.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove vip %v: %w", v, err)
	}
	delete(p.vips, v)
	refs := p.addrRefs[k.Addr] - 1
	if refs == 0 {
		delete(p.addrRefs, k.Addr)
		err = p.objs.XlbVipAddrs.Delete(k.Addr)
	} else {
		p.addrRefs[k.Addr] = refs
		err = p.objs.XlbVipAddrs.Put(k.Addr, refs)
	}
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove vip %v: address entry: %w", v, err)
	}
	return nil
}

// test runs the program once over pkt (BPF_PROG_TEST_RUN) and returns the
// XDP action. For tests of the matching logic.
func (p *Program) test(pkt []byte) (uint32, error) {
	return p.objs.XlbRedirect.Run(&ebpf.RunOptions{Data: pkt})
}
