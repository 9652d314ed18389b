package lab_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/packet"
)

// packetForwarder is a toy xlb for tests of the lab: it reads the
// appliance's frames from a packet socket, parses them with pkg/packet,
// picks a backend by the client's address and port, rewrites with
// pkg/encap and sends the result out of the same interface. It has no
// AF_XDP, no conntrack and no Maglev; it proves that the lab carries what
// a userspace forwarder built from the project's parts sends, TCP included.
type packetForwarder struct {
	fd   int
	stop chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	forwarded int
	refused   map[string]int
}

func startPacketForwarder(t *testing.T, l *lab.Lab, kind encap.Kind) *packetForwarder {
	t.Helper()
	f := &packetForwarder{stop: make(chan struct{}), refused: map[string]int{}}
	var ifindex int
	err := l.XLB.Do(func() error {
		ifi, err := net.InterfaceByName(lab.XLBInterface)
		if err != nil {
			return err
		}
		ifindex = ifi.Index
		f.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		if err := unix.Bind(f.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(f.fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return err
		}
		return unix.SetsockoptTimeval(f.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 50_000})
	})
	if err != nil {
		t.Fatal(err)
	}
	var xlbMAC, gwMAC [6]byte
	copy(xlbMAC[:], l.XLBMAC)
	copy(gwMAC[:], l.GatewayMAC)
	var t4, t6 []*encap.Template
	for _, b := range l.Backends {
		for _, six := range []bool{false, true} {
			s := encap.Spec{Kind: kind, SrcMAC: xlbMAC, DstMAC: gwMAC, Src: l.XLBAddr4, Dst: b.Tunnel4, Inner: packet.IPv4, MTU: l.Opts.FabricMTU}
			if six {
				s.Src, s.Dst, s.Inner = l.XLBAddr6, b.Tunnel6, packet.IPv6
			}
			if kind == encap.Direct {
				copy(s.DstMAC[:], b.MAC)
				s.Src, s.Dst = netip.Addr{}, netip.Addr{}
			}
			tm, err := encap.NewTemplate(s)
			if err != nil {
				unix.Close(f.fd)
				t.Fatal(err)
			}
			if six {
				t6 = append(t6, tm)
			} else {
				t4 = append(t4, tm)
			}
		}
	}
	// packet.Tuple maps IPv4 into ::ffff:0:0/96; As16 does the same.
	vip4mapped, vip6 := l.Opts.VIP4.As16(), l.Opts.VIP6.As16()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer unix.Close(f.fd)
		const headroom = 128
		buf := make([]byte, headroom+65536)
		sa := &unix.SockaddrLinklayer{Ifindex: ifindex}
		var id uint16
		for {
			select {
			case <-f.stop:
				return
			default:
			}
			n, _, err := unix.Recvfrom(f.fd, buf[headroom:], 0)
			if err != nil {
				continue // timeout: look at stop again
			}
			frame := buf[headroom : headroom+n]
			m, r := packet.Parse(frame)
			if r != packet.OK {
				continue
			}
			var tms []*encap.Template
			switch m.Dst {
			case vip4mapped:
				tms = t4
			case vip6:
				tms = t6
			default:
				continue // not for a VIP: the kernel's
			}
			h := uint64(binary.BigEndian.Uint32(m.Src[12:16]))*31 + uint64(m.SrcPort)
			id++
			off, ln, res := tms[h%uint64(len(tms))].Encap(buf, headroom, n, &m, h*0x9e3779b97f4a7c15, id)
			if res != encap.OK {
				f.mu.Lock()
				f.refused[res.String()]++
				f.mu.Unlock()
				continue
			}
			out := buf[off : off+ln]
			sa.Protocol = htons(binary.BigEndian.Uint16(out[12:14]))
			if unix.Sendto(f.fd, out, 0, sa) == nil {
				f.mu.Lock()
				f.forwarded++
				f.mu.Unlock()
			}
		}
	}()
	t.Cleanup(f.Close)
	return f
}

func (f *packetForwarder) Close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.wg.Wait()
}

// TestLabHTTPThroughEncapForwarder drives HTTP (GET, and a POST with a
// body of many full-size segments) through the toy forwarder for every
// encapsulation: every request answered, by the backend the forwarder
// chose, which saw the client's address and the VIP.
func TestLabHTTPThroughEncapForwarder(t *testing.T) {
	l := up(t, lab.Options{Backends: 3, ClientAddrs: 30})
	body := make([]byte, 256<<10)
	for _, kind := range []encap.Kind{encap.IPIP, encap.GUE, encap.GRE, encap.Direct} {
		t.Run(kind.String(), func(t *testing.T) {
			f := startPacketForwarder(t, l, kind)
			defer f.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := l.Drive(ctx, lab.DriveOptions{Requests: 120, Concurrency: 8})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() {
				t.Fatalf("drive: %d errors (first %v), %d mismatched; forwarder refused %v", res.Errors, res.FirstError, res.Mismatched, f.refused)
			}
			for i, n := range res.PerBackend {
				if n == 0 {
					t.Errorf("backend %d got no request out of 120 (per backend %v)", i, res.PerBackend)
				}
			}
			for _, src := range []netip.Addr{l.ClientAddrs4[0], l.ClientAddrs6[0]} {
				vip := l.Opts.VIP4
				if src.Is6() {
					vip = l.Opts.VIP6
				}
				rep, err := l.HTTPPost(ctx, src, l.VIPURL(vip), body)
				if err != nil {
					t.Fatalf("post %d bytes: %v (forwarder refused %v)", len(body), err, f.refused)
				}
				if rep.Size != len(body) || rep.Remote.Addr() != src || rep.Local.Addr() != vip {
					t.Errorf("post: %+v, want size %d from %v to %v", rep, len(body), src, vip)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.forwarded == 0 || len(f.refused) != 0 {
				t.Errorf("forwarded %d, refused %v", f.forwarded, f.refused)
			}
		})
	}
}

// TestKeepOffloadsBreaksRawForwarder shows why the lab turns offloads off
// towards the appliance: with them on, the frames a raw-frame forwarder
// relays carry only the pseudo-header checksum (CHECKSUM_PARTIAL over
// veth), and the backend drops them. If a kernel ever fixes that up by
// itself, this test fails and KeepOffloads can become the default.
func TestKeepOffloadsBreaksRawForwarder(t *testing.T) {
	l := up(t, lab.Options{Backends: 1, ClientAddrs: 2, KeepOffloads: true, NoDecap: true})
	f := startPacketForwarder(t, l, encap.Direct)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if rep, err := l.HTTPGet(ctx, l.ClientAddrs4[0], l.VIPURL(l.Opts.VIP4)); err == nil {
		t.Fatalf("HTTP through a raw-frame forwarder worked with checksum offload on (%+v)", rep)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.forwarded == 0 {
		t.Fatal("the forwarder saw nothing: the failure proves nothing")
	}
}
