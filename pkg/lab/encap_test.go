package lab_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/decap/decaptest"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/packet"
)

// TestLabEncapToBackend is the forwarder's second half without AF_XDP: the
// frame a client's packet arrives as on the appliance is parsed with
// pkg/packet, rewritten with pkg/encap for every kind, and sent on the
// appliance's interface through a packet socket. The backend (its decap
// for IPIP/GUE/GRE, its kernel for DIRECT) must hand it to the echo
// server on the VIP, whose reply reaches the client straight from the VIP.
func TestLabEncapToBackend(t *testing.T) {
	l := up(t, lab.Options{Backends: 2, ClientAddrs: 8})
	var ifindex int
	var fd int
	err := l.XLB.Do(func() error {
		ifi, err := net.InterfaceByName(lab.XLBInterface)
		if err != nil {
			return err
		}
		ifindex = ifi.Index
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var xlbMAC, gwMAC [6]byte
	copy(xlbMAC[:], l.XLBMAC)
	copy(gwMAC[:], l.GatewayMAC)

	type tc struct {
		kind           encap.Kind
		inner6, outer6 bool
	}
	var cases []tc
	for _, k := range []encap.Kind{encap.IPIP, encap.GUE, encap.GRE} {
		cases = append(cases, tc{k, false, false}, tc{k, true, true}, tc{k, false, true})
	}
	cases = append(cases, tc{encap.Direct, false, false}, tc{encap.Direct, true, true})

	seq := 0
	for _, b := range l.Backends {
		for _, c := range cases {
			seq++
			name := fmt.Sprintf("%s/%v/inner-v%d/outer-v%d", b.Name, c.kind, ver(c.inner6), ver(c.outer6))
			t.Run(name, func(t *testing.T) {
				client, vip, et, fam := l.ClientAddrs4[seq%8], l.Opts.VIP4, uint16(0x0800), packet.IPv4
				if c.inner6 {
					client, vip, et, fam = l.ClientAddrs6[seq%8], l.Opts.VIP6, 0x86DD, packet.IPv6
				}
				spec := encap.Spec{Kind: c.kind, SrcMAC: xlbMAC, DstMAC: gwMAC, Src: l.XLBAddr4, Dst: b.Tunnel4, Inner: fam, MTU: l.Opts.FabricMTU}
				if c.outer6 {
					spec.Src, spec.Dst = l.XLBAddr6, b.Tunnel6
				}
				if c.kind == encap.Direct {
					copy(spec.DstMAC[:], b.MAC)
					spec.Src, spec.Dst = netip.Addr{}, netip.Addr{}
				}
				tmpl, err := encap.NewTemplate(spec)
				if err != nil {
					t.Fatal(err)
				}
				conn, err := l.ListenUDP(netip.AddrPortFrom(client, 0))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				src := netip.MustParseAddrPort(conn.LocalAddr().String())
				payload := []byte("through pkg/encap: " + name)
				ip := decaptest.UDP(src, netip.AddrPortFrom(vip, l.Opts.UDPPort), uint16(seq), payload)

				// The frame as the router delivers it to the appliance.
				const headroom = 128
				buf := make([]byte, headroom+14+len(ip))
				frame := buf[headroom:]
				copy(frame[0:6], xlbMAC[:])
				copy(frame[6:12], gwMAC[:])
				binary.BigEndian.PutUint16(frame[12:14], et)
				copy(frame[14:], ip)
				m, r := packet.Parse(frame)
				if r != packet.OK {
					t.Fatalf("parse: %v", r)
				}
				off, n, res := tmpl.Encap(buf, headroom, len(frame), &m, uint64(seq)*0x9e3779b97f4a7c15, uint16(seq))
				if res != encap.OK {
					t.Fatalf("encap: %v", res)
				}
				out := buf[off : off+n]
				sa := &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(binary.BigEndian.Uint16(out[12:14]))}
				before := b.Stats().UDPDatagrams
				got := exchange(t, conn, func() error { return unix.Sendto(fd, out, 0, sa) })
				if got.from.Addr().Unmap() != vip || got.from.Port() != l.Opts.UDPPort {
					t.Fatalf("reply from %v, want the VIP", got.from)
				}
				if !bytes.Equal(got.data, payload) {
					t.Fatalf("echo %q, want %q", got.data, payload)
				}
				if b.Stats().UDPDatagrams == before {
					t.Fatalf("%s did not serve it", b.Name)
				}
			})
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
