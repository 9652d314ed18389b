package lab_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/decap/decaptest"
	"github.com/xlbnet/xlb/pkg/lab"
)

// TestLabDecapEveryBackend plays the appliance by hand: from the xlb
// namespace it sends test-built IPIP, GRE and GUE packets to each
// backend's tunnel address (through the router), carrying a UDP datagram
// from a client address to the VIP. The backend's decap delivers it to the
// echo server on the VIP, and the reply goes straight to the client (DSR):
// the client's socket must receive it from the VIP.
func TestLabDecapEveryBackend(t *testing.T) {
	l := up(t, lab.Options{Backends: 2, ClientAddrs: 8})
	type encap struct {
		name  string
		proto func(inner []byte) int // outer protocol; 0 = UDP (GUE)
		wrap  func(inner []byte) []byte
		port  uint16
	}
	ipipProto := func(inner []byte) int {
		if inner[0]>>4 == 6 {
			return decaptest.ProtoIPv6
		}
		return decaptest.ProtoIPIP
	}
	encaps := []encap{
		{"ipip", ipipProto, nil, 0},
		{"gre", func([]byte) int { return decaptest.ProtoGRE }, func(b []byte) []byte { return decaptest.GRE(b, decaptest.GREOptions{}) }, 0},
		{"gue", func([]byte) int { return 0 }, nil, l.Opts.GUEPort},
	}
	seq := 0
	for _, b := range l.Backends {
		for _, e := range encaps {
			for _, outer6 := range []bool{false, true} {
				for _, inner6 := range []bool{false, true} {
					for _, size := range []int{100, 8000} {
						seq++
						name := fmt.Sprintf("%s/%s/outer-v%d/inner-v%d/%d", b.Name, e.name, ver(outer6), ver(inner6), size)
						t.Run(name, func(t *testing.T) {
							client, vip := l.ClientAddrs4[seq%len(l.ClientAddrs4)], l.Opts.VIP4
							if inner6 {
								client, vip = l.ClientAddrs6[seq%len(l.ClientAddrs6)], l.Opts.VIP6
							}
							dst := netip.AddrPortFrom(b.Tunnel4, e.port)
							if outer6 {
								dst = netip.AddrPortFrom(b.Tunnel6, e.port)
							}
							c, err := l.ListenUDP(netip.AddrPortFrom(client, 0))
							if err != nil {
								t.Fatal(err)
							}
							defer c.Close()
							src := netip.MustParseAddrPort(c.LocalAddr().String())
							// A big datagram asks WHO? instead of an echo: an
							// 8000-byte echo could not reach the client over its
							// 1500-byte link, because the router's ICMP "too big"
							// about a reply from the VIP goes to the appliance,
							// which is xlb's job to route to the backend.
							payload := bytes.Repeat([]byte{byte(seq)}, size)
							copy(payload, name)
							if size > 1400 {
								copy(payload, lab.WhoPrefix)
							}
							pkt := decaptest.UDP(src, netip.AddrPortFrom(vip, l.Opts.UDPPort), uint16(seq), payload)
							proto := e.proto(pkt)
							if e.wrap != nil {
								pkt = e.wrap(pkt)
							}
							before := b.Stats()
							got := exchange(t, c, func() error { return decaptest.Send(l.XLB, proto, dst, pkt) })
							if got.from.Addr().Unmap() != vip || got.from.Port() != l.Opts.UDPPort {
								t.Fatalf("reply from %v, want the VIP %v:%d", got.from, vip, l.Opts.UDPPort)
							}
							if size > 1400 {
								var rep lab.Reply
								if err := json.Unmarshal(got.data, &rep); err != nil {
									t.Fatalf("who reply %q: %v", got.data, err)
								}
								if rep.Size != size || rep.Index != b.Index || rep.Remote != src {
									t.Fatalf("who reply %+v, want size %d at %s from %v", rep, size, b.Name, src)
								}
							} else if !bytes.Equal(got.data, payload) {
								t.Fatalf("echo differs: %d bytes, want %d", len(got.data), len(payload))
							}
							if after := b.Stats(); after.UDPDatagrams <= before.UDPDatagrams || after.DecapCounters.Received <= before.DecapCounters.Received {
								t.Fatalf("%s did not count it: before %+v after %+v", b.Name, before, after)
							}
						})
					}
				}
			}
		}
	}
	for _, b := range l.Backends {
		// Delivered is counted after the write to the TUN returns, which
		// may lag the reply a little.
		c := b.Stats().DecapCounters
		for deadline := time.Now().Add(2 * time.Second); c.Delivered != c.Received && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			c = b.Stats().DecapCounters
		}
		if c.Dropped() != 0 || c.Delivered != c.Received {
			t.Errorf("%s decap dropped packets: %v", b.Name, c)
		}
	}
}

func ver(six bool) int {
	if six {
		return 6
	}
	return 4
}

type datagram struct {
	data []byte
	from netip.AddrPort
}

// exchange calls send and waits for one datagram on c, resending a few
// times: the first packet on a fresh lab may wait for neighbour discovery.
func exchange(t *testing.T, c *net.UDPConn, send func() error) datagram {
	t.Helper()
	buf := make([]byte, 65536)
	for attempt := 0; ; attempt++ {
		if err := send(); err != nil {
			t.Fatalf("send: %v", err)
		}
		c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err == nil {
			return datagram{append([]byte(nil), buf[:n]...), from}
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || attempt == 4 {
			t.Fatalf("no reply: %v", err)
		}
	}
}
