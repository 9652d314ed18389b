package main

// L3_DEFAULT rules and ICMP on real packets: session affinity for ESP, GRE
// and ICMP, echo requests, and an L3_DEFAULT rule sharing its VIP with a
// TCP rule.

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// l3Seen records which backend received which client's packets of an IP
// protocol, from raw sockets in every backend namespace.
type l3Seen struct {
	mu   sync.Mutex
	seen map[l3Key]map[int]int // backend index → packets
}

type l3Key struct {
	proto uint8
	src   netip.Addr
}

// captureL3 opens a raw socket per backend and protocol ("ip4:50",
// "ip6:ipv6-icmp"…) and records the source of every packet it receives;
// ICMP sockets record only echo requests.
func captureL3(t *testing.T, l *lab.Lab, nets ...string) *l3Seen {
	t.Helper()
	s := &l3Seen{seen: map[l3Key]map[int]int{}}
	for _, b := range l.Backends {
		for _, network := range nets {
			var c net.PacketConn
			if err := b.NS.Do(func() (err error) {
				c, err = net.ListenPacket(network, "")
				return err
			}); err != nil {
				t.Fatalf("%s: listen %s: %v", b.Name, network, err)
			}
			t.Cleanup(func() { c.Close() })
			proto := map[string]uint8{"ip4:50": packet.ProtoESP, "ip4:47": packet.ProtoGRE, "ip4:icmp": packet.ProtoICMP, "ip6:ipv6-icmp": packet.ProtoICMPv6}[network]
			go func() {
				buf := make([]byte, 65536)
				for {
					n, from, err := c.ReadFrom(buf)
					if err != nil {
						return
					}
					payload := buf[:n] // Go strips the IPv4 header of raw sockets
					if n == 0 || (proto == packet.ProtoICMP && payload[0] != 8) || (proto == packet.ProtoICMPv6 && payload[0] != 128) {
						continue
					}
					src, _ := netip.ParseAddr(from.String())
					s.mu.Lock()
					k := l3Key{proto, src.Unmap()}
					if s.seen[k] == nil {
						s.seen[k] = map[int]int{}
					}
					s.seen[k][b.Index]++
					s.mu.Unlock()
				}
			}()
		}
	}
	return s
}

// where returns the backends that received proto from src.
func (s *l3Seen) where(proto uint8, src netip.Addr) map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int{}
	for b, n := range s.seen[l3Key{proto, src}] {
		out[b] = n
	}
	return out
}

// sendRaw sends n packets of IPv4 protocol proto from src to dst, each
// payload made by body(i).
func sendRaw(l *lab.Lab, proto uint8, src, dst netip.Addr, n int, body func(i int) []byte) error {
	return l.Client.Do(func() error {
		c, err := net.ListenPacket(fmt.Sprintf("ip4:%d", proto), src.String())
		if err != nil {
			return err
		}
		defer c.Close()
		for i := range n {
			if _, err := c.WriteTo(body(i), &net.IPAddr{IP: dst.AsSlice()}); err != nil {
				return err
			}
		}
		return nil
	})
}

// esp is an ESP packet with SPI spi (the rest is opaque to everyone).
func esp(spi int) []byte {
	b := make([]byte, 32)
	binary.BigEndian.PutUint32(b, uint32(spi))
	binary.BigEndian.PutUint32(b[4:], 1)
	return b
}

// gre is a GRE packet carrying Ethernet (0x6558): neither a backend's
// kernel nor pkg/decap takes it for a tunnel it serves.
func gre(int) []byte {
	b := make([]byte, 32)
	binary.BigEndian.PutUint16(b[2:], 0x6558)
	return b
}

// L3_DEFAULT on the wire (docs/design.md#rules-and-vips,
// docs/design.md#session-affinity, docs/design.md#icmp): TCP to the port of a
// TCP rule on the same VIP goes by that rule (the specific rule wins),
// everything else to the VIP by the L3_DEFAULT rule: TCP to other ports, UDP,
// ESP and GRE (3-tuple selection under NONE: one backend per client and
// protocol), and ICMP echo requests, which the backends answer. An echo to a
// VIP without an L3_DEFAULT rule is answered by the appliance and reaches no
// backend.
func TestWireL3DefaultAndICMP(t *testing.T) {
	wireTest(t)
	l := labWith(t, lab.Options{Backends: 3})
	const otherPort = 8081
	listenOnVIP(t, l, l.Opts.VIP4, otherPort, func(b int, c net.Conn) {
		fmt.Fprintf(c, "%d\n", b)
		c.Close()
	})
	seen := captureL3(t, l, "ip4:50", "ip4:47", "ip4:icmp", "ip6:ipv6-icmp")
	gw := lab.Rule{Name: "gw4", VIP: l.Opts.VIP4, Protocol: "L3_DEFAULT", Ports: `"ALL"`, Encap: "IPIP", Extra: "fragment_tracking = true\n",
		Groups: []lab.Group{group("gw", "", 1, 2)}}
	web := rule(l, "web4", "", group("web", "", 0))
	x := xlbIn(t, l, []lab.Rule{gw, web, rule(l, "web6", "")})
	waitHealth(t, l, x, "gw4", "HEALTHY", 1, 2)
	waitHealth(t, l, x, "web4", "HEALTHY", 0)
	waitHealth(t, l, x, "web6", "HEALTHY", 0, 1, 2)

	if res := driveFor(t, l, 30, 4, 3*time.Second); !onlyOn(res, 0) {
		t.Errorf("TCP to the TCP rule's port: %s; want be0 only (the specific rule wins)", describe(res))
	}
	other := map[string]int{}
	for _, src := range l.ClientAddrs4[:30] {
		var line string
		err := l.Client.Do(func() error {
			d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 3 * time.Second}
			c, err := d.Dial("tcp", netip.AddrPortFrom(l.Opts.VIP4, otherPort).String())
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(3 * time.Second))
			_, err = fmt.Fscan(c, &line)
			return err
		})
		if err != nil {
			t.Fatalf("TCP to port %d from %s: %v", otherPort, src, err)
		}
		other[line]++
	}
	if len(other) != 2 || other["0"] > 0 {
		t.Errorf("TCP to port %d (no TCP rule): backends %v; want be1 and be2 (the L3_DEFAULT rule)", otherPort, other)
	}
	for _, src := range l.ClientAddrs4[:10] {
		if b := openUDPFlow(t, l, src, netip.AddrPortFrom(l.Opts.VIP4, l.Opts.UDPPort)).who(16); b != 1 && b != 2 {
			t.Errorf("UDP from %s went to %d; want be1 or be2 (the L3_DEFAULT rule)", src, b)
		}
	}

	// ESP and GRE: 3 packets per client (ESP with a new SPI each time), one
	// backend per client and protocol, clients spread.
	clients := l.ClientAddrs4[40:80]
	for _, src := range clients {
		if err := sendRaw(l, packet.ProtoESP, src, l.Opts.VIP4, 3, func(i int) []byte { return esp(0x1000 + i) }); err != nil {
			t.Fatal(err)
		}
		if err := sendRaw(l, packet.ProtoGRE, src, l.Opts.VIP4, 3, gre); err != nil {
			t.Fatal(err)
		}
	}
	var perProto [2]map[int]int
	differ := 0
	testutil.WaitFor(t, 10*time.Second, "every ESP and GRE packet at a backend", func() (bool, string) {
		perProto = [2]map[int]int{{}, {}}
		differ = 0
		for _, src := range clients {
			var one [2]int
			for i, proto := range []uint8{packet.ProtoESP, packet.ProtoGRE} {
				w := seen.where(proto, src)
				if len(w) != 1 {
					return false, fmt.Sprintf("%s: proto %d at %v", src, proto, w)
				}
				for b, n := range w {
					if n != 3 {
						return false, fmt.Sprintf("%s: proto %d: %d of 3 at be%d", src, proto, n, b)
					}
					one[i] = b
					perProto[i][b]++
				}
			}
			if one[0] != one[1] {
				differ++
			}
		}
		return true, ""
	})
	for i, name := range []string{"ESP", "GRE"} {
		if len(perProto[i]) != 2 || perProto[i][0] > 0 {
			t.Errorf("%s of 40 clients reached %v; want be1 and be2", name, perProto[i])
		}
	}
	if differ == 0 {
		t.Errorf("ESP and GRE of each of 40 clients reached the same backend: the protocol is not in the 3-tuple")
	}

	// Echo requests: to the L3_DEFAULT VIP the backends answer; to the
	// VIP of a TCP rule only, the appliance does.
	pingers := l.ClientAddrs4[100:110]
	for _, src := range pingers {
		if err := lab.PingFrom(l.Client, src, l.Opts.VIP4, 2, 4*time.Second); err != nil {
			t.Errorf("ping %s from %s: %v", l.Opts.VIP4, src, err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "every echo request seen at a backend", func() (bool, string) {
		for _, src := range pingers {
			if len(seen.where(packet.ProtoICMP, src)) == 0 {
				return false, src.String()
			}
		}
		return true, ""
	})
	echoes := map[int]int{}
	for _, src := range pingers {
		w := seen.where(packet.ProtoICMP, src)
		if len(w) != 1 {
			t.Errorf("echo requests from %s reached backends %v; want one (3-tuple)", src, w)
		}
		for b := range w {
			echoes[b]++
		}
	}
	if echoes[0] > 0 || len(echoes) == 0 {
		t.Errorf("echo requests to the L3_DEFAULT VIP reached %v; want be1/be2 only", echoes)
	}
	src6 := l.ClientAddrs6[3]
	if err := lab.PingFrom(l.Client, src6, l.Opts.VIP6, 2, 4*time.Second); err != nil {
		t.Errorf("ping %s (a TCP rule only): %v; want the appliance's answer", l.Opts.VIP6, err)
	}
	time.Sleep(500 * time.Millisecond) // as long as the backends' captures could lag
	if w := seen.where(packet.ProtoICMPv6, src6); len(w) > 0 {
		t.Errorf("echo requests to a VIP without an L3_DEFAULT rule reached backends %v", w)
	}
	if st := x.status(t); st.Counters.Drops["icmp-unsupported"] > 0 {
		t.Errorf("ICMP dropped as unsupported: %v", st.Counters.Drops)
	}
}
