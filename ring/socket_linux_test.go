package ring_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/netns"
	"github.com/xlbnet/xlb/pkg/testutil"
	"github.com/xlbnet/xlb/ring"
	"github.com/xlbnet/xlb/ring/xsk"
)

// vethPair is the test topology: namespace lb holds x0 (the XDP end, two
// queues), namespace peer holds p0. Both are removed when the test ends.
type vethPair struct {
	lb, peer         *netns.NS
	lbIndex          int
	peerIndex        int
	lbMAC, peerMAC   net.HardwareAddr
	lbAddr, peerAddr netip.Addr
}

func newVethPair(t testing.TB) *vethPair {
	t.Helper()
	v := &vethPair{
		lb:       testutil.NewNetNS(t, "xlbr"),
		peer:     testutil.NewNetNS(t, "xlbp"),
		lbAddr:   netip.MustParseAddr("198.18.0.1"),
		peerAddr: netip.MustParseAddr("198.18.0.2"),
	}
	steps := []struct {
		ns   *netns.NS
		args string
	}{
		{v.lb, "link add x0 numtxqueues 2 numrxqueues 2 type veth peer name p0 numtxqueues 2 numrxqueues 2 netns " + v.peer.Name},
		{v.lb, "addr add 198.18.0.1/24 dev x0"},
		{v.lb, "link set x0 up"},
		{v.peer, "addr add 198.18.0.2/24 dev p0"},
		{v.peer, "link set p0 up"},
	}
	for _, s := range steps {
		if err := s.ns.Run("ip", strings.Fields(s.args)...); err != nil {
			t.Fatal(err)
		}
	}
	must := func(ns *netns.NS, name string, fn func(*net.Interface)) {
		if err := ns.Do(func() error {
			ifi, err := net.InterfaceByName(name)
			if err == nil {
				fn(ifi)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	must(v.lb, "x0", func(i *net.Interface) { v.lbIndex, v.lbMAC = i.Index, i.HardwareAddr })
	must(v.peer, "p0", func(i *net.Interface) { v.peerIndex, v.peerMAC = i.Index, i.HardwareAddr })
	return v
}

// routeVIP makes the peer send to vip through p0 straight to x0's MAC (a
// static neighbour entry, so no ARP for the VIP is needed).
func (v *vethPair) routeVIP(t testing.TB, vip string) {
	t.Helper()
	for _, args := range []string{
		"route add " + vip + "/32 dev p0",
		"neigh add " + vip + " lladdr " + v.lbMAC.String() + " dev p0 nud permanent",
	} {
		if err := v.peer.Run("ip", strings.Fields(args)...); err != nil {
			t.Fatal(err)
		}
	}
}

// udpFrame builds Ethernet+IPv4+UDP (UDP checksum 0, which IPv4 allows).
func udpFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	b := make([]byte, 14+20+8, 14+20+8+len(payload))
	copy(b[0:], dstMAC)
	copy(b[6:], srcMAC)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	ip[8], ip[9] = 64, 17
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:], s4[:])
	copy(ip[16:], d4[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := b[34:42]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	return append(b, payload...)
}

// openQueues attaches the program to x0 and opens sockets on both queues.
func openQueues(t testing.TB, v *vethPair) (*xsk.Program, []*ring.Socket) {
	t.Helper()
	p, err := xsk.Load()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close program: %v", err)
		}
	})
	var socks []*ring.Socket
	err = v.lb.Do(func() error {
		mode, err := p.Attach(v.lbIndex, xsk.AttachAuto)
		if err != nil {
			return err
		}
		t.Logf("xdp program attached to x0 in %s mode", mode)
		for q := range 2 {
			s, err := ring.Open(ring.Options{Ifindex: v.lbIndex, Queue: q, NumFrames: 1024, RingSize: 256})
			if err != nil {
				return err
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close socket: %v", err)
				}
			})
			t.Logf("queue %d: AF_XDP socket bound, zero-copy=%v", q, s.ZeroCopy())
			if err := p.Register(q, s.FD()); err != nil {
				return err
			}
			socks = append(socks, s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, socks
}

// udpVIPQueues is openQueues with the UDP VIP addr:5000 in the program's
// set and routed to x0 from the peer.
func udpVIPQueues(t *testing.T, addr string) (*vethPair, []*ring.Socket, netip.Addr) {
	t.Helper()
	testutil.RequireRoot(t)
	v := newVethPair(t)
	p, socks := openQueues(t, v)
	vip := netip.MustParseAddr(addr)
	if err := p.AddVIP(xsk.VIP{Addr: vip, Proto: 17, Port: 5000}); err != nil {
		t.Fatal(err)
	}
	v.routeVIP(t, vip.String())
	return v, socks, vip
}

func TestSocketVeth(t *testing.T) {
	v, socks, vip := udpVIPQueues(t, "203.0.113.10")

	// The peer sends UDP to the VIP from several source ports (spread
	// over both TX queues of p0), and to a non-VIP port.
	const sent = 40
	var listener *net.UDPConn
	err := v.peer.Do(func() error {
		var err error
		listener, err = net.ListenUDP("udp4", &net.UDPAddr{IP: v.peerAddr.AsSlice(), Port: 6000})
		if err != nil {
			return err
		}
		for i := range sent {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: vip.AsSlice(), Port: 5000})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c, "xlb-%d", i)
			c.Close()
			if err != nil {
				return err
			}
		}
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: vip.AsSlice(), Port: 5001})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("not-a-vip-port"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()

	got := map[string]bool{}
	perQueue := make([]int, len(socks))
	descs := make([]ring.Desc, 64)
	addrs := make([]uint64, 64)
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < sent && time.Now().Before(deadline) {
		for q, s := range socks {
			r := s.Rings()
			n := r.RX.Peek(descs)
			for _, d := range descs[:n] {
				f := r.Frame(d)
				if d.Addr-r.UMEM.ChunkStart(d.Addr) < uint64(r.UMEM.Headroom()) {
					t.Errorf("queue %d: packet at chunk offset %d, less than headroom %d", q, d.Addr-r.UMEM.ChunkStart(d.Addr), r.UMEM.Headroom())
				}
				if len(f) < 42 || binary.BigEndian.Uint16(f[36:]) != 5000 {
					t.Errorf("queue %d: unexpected frame % x", q, f)
					continue
				}
				got[string(f[42:])] = true
				perQueue[q]++
			}
			r.RX.Release(n)
			for i, d := range descs[:n] {
				addrs[i] = d.Addr
			}
			r.Frames.Free(addrs[:n])
			r.Refill()
			r.KickRX()
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("received per queue: %v", perQueue)
	if len(got) != sent {
		t.Fatalf("received %d distinct VIP packets, want %d", len(got), sent)
	}
	if got["not-a-vip-port"] {
		t.Error("packet to a non-VIP port reached the socket")
	}

	// Transmit one frame from queue 0's socket; the peer's UDP server must
	// receive it.
	r := socks[0].Rings()
	var chunk [1]uint64
	if r.Frames.Alloc(chunk[:]) != 1 {
		t.Fatal("no free frame")
	}
	frame := udpFrame(v.peerMAC, v.lbMAC, vip, v.peerAddr, 5000, 6000, []byte("from-xsk"))
	d := ring.Desc{Addr: chunk[0] + uint64(r.UMEM.Headroom()), Len: uint32(len(frame))}
	copy(r.Frame(d), frame)
	if r.TX.Submit([]ring.Desc{d}) != 1 {
		t.Fatal("TX Submit took nothing")
	}
	if err := r.KickTX(); err != nil {
		t.Fatal(err)
	}
	listener.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 100)
	n, from, err := listener.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("peer did not receive the transmitted frame: %v", err)
	}
	if string(buf[:n]) != "from-xsk" || from.Port != 5000 || !from.IP.Equal(vip.AsSlice()) {
		t.Errorf("peer received %q from %v, want \"from-xsk\" from %s:5000", buf[:n], from, vip)
	}
	// The frame comes back on the completion ring.
	deadline = time.Now().Add(2 * time.Second)
	for r.Completion.Peek(addrs[:1]) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := r.Completion.Peek(addrs[:1]); n != 1 || addrs[0] != d.Addr {
		t.Errorf("completion = %d %#x, want 1 %#x", n, addrs[0], d.Addr)
	}
	r.Reclaim()

	st, err := socks[0].Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.TXInvalidDescs != 0 || st.RXInvalidDescs != 0 {
		t.Errorf("kernel stats: %+v", st)
	}
	t.Logf("queue 0 kernel stats: %+v", st)

	// veth has no zero-copy support: requiring it (on p0, which has no
	// socket yet) must fail clearly, and leave nothing behind.
	err = v.peer.Do(func() error {
		s, err := ring.Open(ring.Options{Ifindex: v.peerIndex, Queue: 0, Bind: ring.BindZeroCopy, NumFrames: 64, RingSize: 64})
		if err == nil {
			s.Close()
			return fmt.Errorf("zero-copy bind on veth succeeded")
		}
		if !strings.Contains(err.Error(), "zero-copy") {
			return fmt.Errorf("zero-copy bind error %q does not say zero-copy", err)
		}
		t.Logf("forced zero-copy on veth: %v", err)
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestNonVIPTrafficPasses checks that with the program attached and a VIP
// configured, ordinary traffic to the interface still works: ARP (no
// static neighbour for 198.18.0.1), ICMP echo and a TCP connection.
func TestNonVIPTrafficPasses(t *testing.T) {
	testutil.RequireRoot(t)
	v := newVethPair(t)
	p, _ := openQueues(t, v)
	if err := p.AddVIP(xsk.VIP{Addr: netip.MustParseAddr("203.0.113.10")}); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := v.lb.Do(func() (err error) {
		ln, err = net.Listen("tcp4", "198.18.0.1:2222")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	err := v.peer.Do(func() error {
		c, err := net.DialTimeout("tcp4", "198.18.0.1:2222", 3*time.Second)
		if err != nil {
			return fmt.Errorf("tcp to the interface address: %w", err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b := make([]byte, 5)
		if _, err := c.Read(b); err != nil || string(b) != "hello" {
			return fmt.Errorf("tcp read %q: %v", b, err)
		}
		return ping(v.peerAddr, v.lbAddr)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ping sends one ICMP echo request from src to dst on a raw socket and
// waits for the reply.
func ping(src, dst netip.Addr) error {
	c, err := net.ListenPacket("ip4:icmp", src.String())
	if err != nil {
		return err
	}
	defer c.Close()
	req := []byte{8, 0, 0, 0, 0x12, 0x34, 0, 1, 'x', 'l', 'b', '!'}
	var sum uint32
	for i := 0; i < len(req); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(req[i:]))
	}
	sum = sum&0xffff + sum>>16
	binary.BigEndian.PutUint16(req[2:], ^uint16(sum))
	if _, err := c.WriteTo(req, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	b := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(b)
		if err != nil {
			return fmt.Errorf("ping %s: %w", dst, err)
		}
		if n >= 12 && b[0] == 0 && bytes.Equal(b[4:6], req[4:6]) && from.String() == dst.String() {
			return nil
		}
	}
}

// TestSocketZeroAllocs proves the per-batch operations allocate nothing on
// a real socket too, including the TX kick (a sendto in copy mode).
func TestSocketZeroAllocs(t *testing.T) {
	testutil.RequireRoot(t)
	v := newVethPair(t)
	_, socks := openQueues(t, v)
	r := socks[0].Rings()
	frame := udpFrame(v.peerMAC, v.lbMAC, netip.MustParseAddr("203.0.113.10"), v.peerAddr, 5000, 6000, []byte("alloc-test"))
	descs := make([]ring.Desc, 64)
	one := make([]uint64, 1)
	allocs := testing.AllocsPerRun(200, func() {
		r.Reclaim()
		r.Refill()
		r.KickRX()
		n := r.RX.Peek(descs)
		r.RX.Release(n)
		if r.Frames.Alloc(one) == 1 {
			d := ring.Desc{Addr: one[0] + uint64(r.UMEM.Headroom()), Len: uint32(len(frame))}
			copy(r.Frame(d), frame)
			descs[0] = d
			if r.TX.Submit(descs[:1]) == 0 {
				r.Frames.Free(one)
			}
		}
		if err := r.KickTX(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("allocations per batch on a real socket = %v, want 0", allocs)
	}
	if !r.TX.NeedWakeup() {
		t.Log("TX ring does not ask for wake-ups (zero-copy driver?)")
	}
}

// TestSocketVethIPv6 sends UDP to an IPv6 VIP and checks it reaches the
// sockets, while TCP to the interface's own IPv6 address (which needs
// neighbour discovery to pass the program) still works.
func TestSocketVethIPv6(t *testing.T) {
	testutil.RequireRoot(t)
	v := newVethPair(t)
	for _, s := range []struct {
		ns   *netns.NS
		args string
	}{
		{v.lb, "-6 addr add fd00:18::1/64 dev x0 nodad"},
		{v.peer, "-6 addr add fd00:18::2/64 dev p0 nodad"},
		{v.peer, "-6 route add fd00:113::10/128 dev p0"},
		{v.peer, "-6 neigh add fd00:113::10 lladdr " + v.lbMAC.String() + " dev p0 nud permanent"},
	} {
		if err := s.ns.Run("ip", strings.Fields(s.args)...); err != nil {
			t.Fatal(err)
		}
	}
	p, socks := openQueues(t, v)
	vip := netip.MustParseAddr("fd00:113::10")
	if err := p.AddVIP(xsk.VIP{Addr: vip, Proto: 17, Port: 5000}); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := v.lb.Do(func() (err error) {
		ln, err = net.Listen("tcp6", "[fd00:18::1]:2222")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	const sent = 10
	err := v.peer.Do(func() error {
		c, err := net.DialTimeout("tcp6", "[fd00:18::1]:2222", 3*time.Second)
		if err != nil {
			return fmt.Errorf("tcp over ipv6 to the interface address: %w", err)
		}
		c.Close()
		return sendDatagrams("udp6", vip, "v6-", 0, sent)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	descs := make([]ring.Desc, 64)
	for deadline := time.Now().Add(5 * time.Second); len(got) < sent && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, s := range socks {
			r := s.Rings()
			n := r.RX.Peek(descs)
			for _, d := range descs[:n] {
				f := r.Frame(d)
				// Ethernet 14 + IPv6 40 + UDP 8.
				if len(f) >= 62 && binary.BigEndian.Uint16(f[12:]) == 0x86dd && f[20] == 17 {
					got[string(f[62:])] = true
				}
			}
			r.RX.Release(n)
			r.Frames.FreeDescs(descs[:n])
			r.Refill()
		}
	}
	if len(got) != sent {
		t.Fatalf("received %d distinct IPv6 VIP packets, want %d: %v", len(got), sent, got)
	}
}

// TestSocketStatsCountDrops floods sockets that nobody drains: once the
// fill ring is used up the kernel drops and counts, and Stats reports it.
// One UDP flow lands on one queue (which one depends on the hash), so both
// queues get a socket.
func TestSocketStatsCountDrops(t *testing.T) {
	testutil.RequireRoot(t)
	v := newVethPair(t)
	p, err := xsk.Load()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var socks []*ring.Socket
	if err := v.lb.Do(func() error {
		if _, err := p.Attach(v.lbIndex, xsk.AttachAuto); err != nil {
			return err
		}
		for q := range 2 {
			s, err := ring.Open(ring.Options{Ifindex: v.lbIndex, Queue: q, NumFrames: 64, RingSize: 64})
			if err != nil {
				return err
			}
			socks = append(socks, s)
			if err := p.Register(q, s.FD()); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, s := range socks {
		defer s.Close()
	}
	vip := netip.MustParseAddr("203.0.113.10")
	if err := p.AddVIP(xsk.VIP{Addr: vip, Proto: 17}); err != nil {
		t.Fatal(err)
	}
	v.routeVIP(t, vip.String())
	if err := v.peer.Do(func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: vip.AsSlice(), Port: 9})
		if err != nil {
			return err
		}
		defer c.Close()
		for range 200 {
			if _, err := c.Write([]byte("flood")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	drops := func(st ring.Stats) uint64 { return st.RXDropped + st.RXFillRingEmpty + st.RXRingFull }
	var total ring.Stats
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		total = ring.Stats{}
		for _, s := range socks {
			st, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			total.RXDropped += st.RXDropped
			total.RXFillRingEmpty += st.RXFillRingEmpty
			total.RXRingFull += st.RXRingFull
		}
		if drops(total) > 0 {
			break
		}
	}
	descs := make([]ring.Desc, 128)
	got := 0
	for _, s := range socks {
		got += s.Rings().RX.Peek(descs)
	}
	t.Logf("%d frames on RX, kernel stats summed %+v", got, total)
	if got != 64 {
		t.Errorf("RX rings hold %d frames, want 64 (one socket's whole UMEM)", got)
	}
	if drops(total) == 0 {
		t.Errorf("kernel counted no drops after 200 packets into 64 frames: %+v", total)
	}
}

// TestAdoptBoundSocket hands both bound sockets to new owners the way a
// successor process gets them (duplicated fds of the socket and of the
// UMEM memfd, mapped again while the first owner still has them), closes
// the first owners, and checks that every packet sent before, during and
// after the hand-over arrives exactly once: the kernel buffers what
// arrives while nobody reads, and closing the old fds detaches nothing.
func TestAdoptBoundSocket(t *testing.T) {
	testutil.RequireRoot(t)
	v := newVethPair(t)
	p, socks := openQueues(t, v)
	vip := netip.MustParseAddr("203.0.113.10")
	if err := p.AddVIP(xsk.VIP{Addr: vip, Proto: 17, Port: 5000}); err != nil {
		t.Fatal(err)
	}
	v.routeVIP(t, vip.String())
	for _, s := range socks {
		link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", s.UMEMFD()))
		if err != nil || !strings.HasPrefix(link, "/memfd:xlb-umem-q") {
			t.Fatalf("umem fd %d is %q (%v), want a memfd", s.UMEMFD(), link, err)
		}
	}
	send := func(from, to int) {
		t.Helper()
		if err := v.peer.Do(func() error { return sendDatagrams("udp4", vip, "seq-", from, to) }); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	descs := make([]ring.Desc, 64)
	receive := func(rs []*ring.Rings, want int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); len(got) < want && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			for _, r := range rs {
				r.Reclaim()
				r.Refill()
				r.KickRX()
				n := r.RX.Peek(descs)
				for _, d := range descs[:n] {
					got[string(r.Frame(d)[42:])]++
				}
				r.RX.Release(n)
				r.Frames.FreeDescs(descs[:n])
			}
		}
		if len(got) != want {
			t.Fatalf("received %d distinct packets, want %d", len(got), want)
		}
	}
	send(0, 20)
	receive([]*ring.Rings{socks[0].Rings(), socks[1].Rings()}, 20)

	// The successor maps everything while the first owner could still
	// run; packets sent now wait on the RX rings.
	var adopted []*ring.Socket
	for _, s := range socks {
		xfd, err := unix.Dup(s.FD())
		if err != nil {
			t.Fatal(err)
		}
		ufd, err := unix.Dup(s.UMEMFD())
		if err != nil {
			t.Fatal(err)
		}
		a, err := ring.Adopt(xfd, ufd, s.Options())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		adopted = append(adopted, a)
	}
	send(20, 40)
	var rs []*ring.Rings
	for i, s := range socks {
		free := s.Rings().Frames.FreeList()
		if err := adopted[i].TakeOver(free); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, adopted[i].Rings())
	}
	send(40, 60)
	receive(rs, 60)
	for k, n := range got {
		if n != 1 {
			t.Errorf("%s received %d times", k, n)
		}
	}
	for i, a := range adopted {
		st, err := a.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.RXDropped+st.RXRingFull+st.RXFillRingEmpty+st.RXInvalidDescs != 0 {
			t.Errorf("queue %d: kernel counted drops across the hand-over: %+v", i, st)
		}
	}
}

// sendDatagrams sends the datagrams prefix+"from" .. prefix+"to-1" to
// dst:5000, each from a new socket (a new source port, so the flows
// spread over the receive queues).
func sendDatagrams(network string, dst netip.Addr, prefix string, from, to int) error {
	for i := from; i < to; i++ {
		c, err := net.DialUDP(network, nil, &net.UDPAddr{IP: dst.AsSlice(), Port: 5000})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c, "%s%d", prefix, i)
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// TestSocketBusyPoll turns preferred busy polling on for both queues'
// sockets, checks the kernel took the options, and receives every datagram
// with BusyPoll as the only wake-up; turning it off clears the options.
func TestSocketBusyPoll(t *testing.T) {
	v, socks, vip := udpVIPQueues(t, "203.0.113.11")
	// SO_BUSY_POLL_BUDGET cannot be read back (the kernel has no
	// getsockopt for it); SetBusyPoll fails if setting it fails.
	want := map[int]int{unix.SO_PREFER_BUSY_POLL: 1, unix.SO_BUSY_POLL: 50}
	for q, s := range socks {
		if err := s.SetBusyPoll(ring.BusyPoll{Timeout: 50 * time.Microsecond, Budget: 32}); err != nil {
			t.Fatal(err)
		}
		for opt, val := range want {
			if got, err := unix.GetsockoptInt(s.FD(), unix.SOL_SOCKET, opt); err != nil || got != val {
				t.Errorf("queue %d: socket option %d = %d, %v; want %d", q, opt, got, err, val)
			}
		}
	}

	const sent = 40
	if err := v.peer.Do(func() error { return sendDatagrams("udp4", vip, "busy-", 0, sent) }); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	descs := make([]ring.Desc, 64)
	addrs := make([]uint64, 64)
	for deadline := time.Now().Add(5 * time.Second); len(got) < sent && time.Now().Before(deadline); {
		for _, s := range socks {
			r := s.Rings()
			if err := r.BusyPoll(); err != nil {
				t.Fatalf("busy poll: %v", err)
			}
			n := r.RX.Peek(descs)
			for i, d := range descs[:n] {
				if f := r.Frame(d); len(f) > 42 {
					got[string(f[42:])] = true
				}
				addrs[i] = d.Addr
			}
			r.RX.Release(n)
			r.Frames.Free(addrs[:n])
			r.Refill()
		}
		time.Sleep(time.Millisecond)
	}
	if len(got) != sent {
		t.Fatalf("received %d distinct datagrams with busy polling, want %d", len(got), sent)
	}

	if err := socks[0].SetBusyPoll(ring.BusyPoll{}); err != nil {
		t.Fatal(err)
	}
	if got, err := unix.GetsockoptInt(socks[0].FD(), unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL); err != nil || got != 0 {
		t.Errorf("after turning busy polling off: SO_PREFER_BUSY_POLL = %d, %v", got, err)
	}
	if err := socks[0].SetBusyPoll(ring.BusyPoll{Timeout: 2 * time.Millisecond}); err == nil {
		t.Error("a 2ms busy-poll timeout was accepted")
	}
}
