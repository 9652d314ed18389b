package encap_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.hex from the outputs")

const (
	testHash = 0x9e3779b97f4a7c15
	// The GUE source port and IPv6 flow label that testHash folds to
	// (doc.go gives the folds; worked out by hand, not by the code).
	testPort  = 0xe4d1
	testFlow  = 0xfdc91
	testIPID  = 0x1234
	testID6   = 0x9e370000 | testIPID // IPv6 fragment ID: hash bits 48..63 over ipID
	synFlag   = 0x02
	ackPsh    = 0x18
	efECT1    = 0xb9 // DSCP EF (46) with ECN ECT(1)
	af11CE    = 0x2b // DSCP AF11 (10) with ECN CE
	df        = 0x4000
	mf        = 0x2000
	frameVLAN = 0x2064 // PCP 1, VID 100
)

func spec(k encap.Kind, v6 bool) encap.Spec {
	s := encap.Spec{Kind: k, SrcMAC: ourMAC, DstMAC: nextHop, Src: netip.MustParseAddr(self4), Dst: netip.MustParseAddr(back4)}
	if v6 {
		s.Src, s.Dst = netip.MustParseAddr(self6), netip.MustParseAddr(back6)
	}
	return s
}

func withMTU(s encap.Spec, mtu int) encap.Spec { s.MTU = mtu; return s }

// Inner packets as a client sends them to a VIP.
var (
	tcp4    = v4h{src: client4, dst: vip4, proto: 6, tos: efECT1, ttl: 57, id: 0x4242, ff: df}.build(tcpSeg(client4, vip4, 40000, 80, synFlag, bytesN(16)))
	udp4    = v4h{src: client4, dst: vip4, proto: 17, tos: af11CE, ttl: 50, id: 0x777}.build(udpDgram(client4, vip4, 41000, 9000, bytesN(30), false))
	udp4Raw = v4h{src: client4, dst: vip4, proto: 17, ttl: 50, id: 0x778}.build(udpDgram(client4, vip4, 41000, 9000, bytesN(31), true))
	tcp6    = v6h{src: client6, dst: vip6, nh: 6, tc: efECT1, flow: 0x12345, hop: 60}.build(tcpSeg(client6, vip6, 40000, 443, ackPsh, bytesN(100)))
	udp6    = v6h{src: client6, dst: vip6, nh: 17, tc: af11CE, hop: 60}.build(udpDgram(client6, vip6, 41000, 9000, bytesN(41), false))
	echo6   = v6h{src: client6, dst: vip6, nh: 58, hop: 60}.build(icmpMsg(128, 0, 0x00070001, bytesN(56), client6, vip6))
	small4  = v4h{src: client4, dst: vip4, proto: 17, id: 9}.build(udpDgram(client4, vip4, 1000, 2000, []byte{1, 2, 3, 4}, false))

	// 1500-byte packets: too big for any tunnel at MTU 1500.
	big4DF   = v4h{src: client4, dst: vip4, proto: 6, tos: efECT1, id: 0x5151, ff: df}.build(tcpSeg(client4, vip4, 40000, 80, ackPsh, bytesN(1460)))
	big4     = v4h{src: client4, dst: vip4, proto: 17, tos: af11CE, id: 0x5252}.build(udpDgram(client4, vip4, 41000, 9000, bytesN(1472), false))
	big6     = v6h{src: client6, dst: vip6, nh: 6, tc: efECT1, hop: 60}.build(tcpSeg(client6, vip6, 40000, 443, ackPsh, bytesN(1440)))
	bigErr4  = v4h{src: client4, dst: vip4, proto: 1, ff: df}.build(icmpMsg(3, 3, 0, v4h{src: vip4, dst: client4, proto: 17}.build(udpDgram(vip4, client4, 9000, 41000, bytesN(1444), false)), "", ""))
	bigFrag6 = v6h{src: client6, dst: vip6, nh: 44, hop: 60}.build(cat([]byte{6, 0}, be16(1448|1), be32(0xabcd), bytesN(1452)))
)

func ipipHdr4(inner []byte, tos uint8, ff uint16) []byte {
	return v4h{src: self4, dst: back4, proto: 4, tos: tos, id: testIPID, ff: ff}.build(inner)
}

func gueHdr(inner []byte) []byte {
	return cat(be16(testPort), be16(6080), be16(uint16(8+len(inner))), be16(0), inner)
}

func greHdr(et uint16, inner []byte) []byte { return cat(be16(0), be16(et), inner) }

func frame(vlan int, et uint16, l3 []byte) []byte { return cat(eth(ourMAC, routerMAC, et, vlan), l3) }

func out4(vlan int, l3 []byte) []byte { return cat(eth(nextHop, ourMAC, 0x0800, vlan), l3) }
func out6(vlan int, l3 []byte) []byte { return cat(eth(nextHop, ourMAC, 0x86dd, vlan), l3) }

// fragNeeded is the reply to inner at the client, from the VIP.
func fragNeeded(vlan int, inner []byte, mtu uint32) []byte {
	q := inner[:min(len(inner), 576-28)]
	return cat(eth(routerMAC, ourMAC, 0x0800, vlan), v4h{src: vip4, dst: client4, proto: 1, tos: 0xc0, id: testIPID}.build(icmpMsg(3, 4, mtu, q, "", "")))
}

func packetTooBig(vlan int, inner []byte, mtu uint32) []byte {
	q := inner[:min(len(inner), 1280-48)]
	return cat(eth(routerMAC, ourMAC, 0x86dd, vlan), v6h{src: vip6, dst: client6, nh: 58, tc: 0xc0}.build(icmpMsg(2, 0, mtu, q, vip6, client6)))
}

func frag6(nh uint8, off int, more bool) []byte {
	w := uint16(off)
	if more {
		w |= 1
	}
	return cat([]byte{nh, 0}, be16(w), be32(testID6))
}

type fixture struct {
	name      string
	spec      encap.Spec
	in        []byte
	want      encap.Result
	out       []byte   // nil: the frame must come back unchanged
	extra     [][]byte // fragments after the first (want NeedFragments, then Fragment)
	innerFrom int      // offset of the inner packet in out (0: no inner check)
}

func fixtures() []fixture {
	gue6tcp := udpDgram(self6, back6, testPort, 6080, tcp6, false)
	gue4in6 := udpDgram(self6, back6, testPort, 6080, udp4, false)
	gueBig4in6 := udpDgram(self6, back6, testPort, 6080, big4, false)
	return []fixture{
		{name: "ipip-4in4", spec: spec(encap.IPIP, false), in: frame(-1, 0x0800, tcp4), want: encap.OK,
			out: out4(-1, ipipHdr4(tcp4, efECT1, df)), innerFrom: 34},
		{name: "ipip-6in6", spec: spec(encap.IPIP, true), in: frame(-1, 0x86dd, tcp6), want: encap.OK,
			out: out6(-1, v6h{src: self6, dst: back6, nh: 41, tc: efECT1, flow: testFlow}.build(tcp6)), innerFrom: 54},
		{name: "ipip-4in6", spec: spec(encap.IPIP, true), in: frame(-1, 0x0800, udp4), want: encap.OK,
			out: out6(-1, v6h{src: self6, dst: back6, nh: 4, tc: af11CE, flow: testFlow}.build(udp4)), innerFrom: 54},
		{name: "gue-4in4", spec: spec(encap.GUE, false), in: frame(-1, 0x0800, tcp4), want: encap.OK,
			out: out4(-1, v4h{src: self4, dst: back4, proto: 17, tos: efECT1, id: testIPID, ff: df}.build(gueHdr(tcp4))), innerFrom: 42},
		{name: "gue-6in6-tcp", spec: spec(encap.GUE, true), in: frame(-1, 0x86dd, tcp6), want: encap.OK,
			out: out6(-1, v6h{src: self6, dst: back6, nh: 17, tc: efECT1, flow: testFlow}.build(gue6tcp)), innerFrom: 62},
		{name: "gue-6in6-udp", spec: spec(encap.GUE, true), in: frame(-1, 0x86dd, udp6), want: encap.OK,
			out: out6(-1, v6h{src: self6, dst: back6, nh: 17, tc: af11CE, flow: testFlow}.build(udpDgram(self6, back6, testPort, 6080, udp6, false))), innerFrom: 62},
		{name: "gue-6in6-icmp-full-sum", spec: spec(encap.GUE, true), in: frame(-1, 0x86dd, echo6), want: encap.OK,
			out: out6(-1, v6h{src: self6, dst: back6, nh: 17, flow: testFlow}.build(udpDgram(self6, back6, testPort, 6080, echo6, false))), innerFrom: 62},
		{name: "gue-4in6-udp", spec: spec(encap.GUE, true), in: frame(-1, 0x0800, udp4), want: encap.OK,
			out: out6(-1, v6h{src: self6, dst: back6, nh: 17, tc: af11CE, flow: testFlow}.build(gue4in6)), innerFrom: 62},
		{name: "gue-4in6-udp-no-checksum", spec: spec(encap.GUE, true), in: frame(-1, 0x0800, udp4Raw), want: encap.OK,
			out: out6(-1, v6h{src: self6, dst: back6, nh: 17, flow: testFlow}.build(udpDgram(self6, back6, testPort, 6080, udp4Raw, false))), innerFrom: 62},
		{name: "gue-port-7000", spec: func() encap.Spec { s := spec(encap.GUE, false); s.GUEPort = 7000; return s }(), in: frame(-1, 0x0800, udp4), want: encap.OK,
			out: out4(-1, v4h{src: self4, dst: back4, proto: 17, tos: af11CE, id: testIPID}.build(cat(be16(testPort), be16(7000), be16(uint16(8+len(udp4))), be16(0), udp4))), innerFrom: 42},
		{name: "gre-4in4", spec: spec(encap.GRE, false), in: frame(-1, 0x0800, tcp4), want: encap.OK,
			out: out4(-1, v4h{src: self4, dst: back4, proto: 47, tos: efECT1, id: testIPID, ff: df}.build(greHdr(0x0800, tcp4))), innerFrom: 38},
		{name: "gre-6in6", spec: spec(encap.GRE, true), in: frame(-1, 0x86dd, tcp6), want: encap.OK,
			out: out6(-1, v6h{src: self6, dst: back6, nh: 47, tc: efECT1, flow: testFlow}.build(greHdr(0x86dd, tcp6))), innerFrom: 58},
		{name: "gre-4in6", spec: spec(encap.GRE, true), in: frame(-1, 0x0800, udp4), want: encap.OK,
			out: out6(-1, v6h{src: self6, dst: back6, nh: 47, tc: af11CE, flow: testFlow}.build(greHdr(0x0800, udp4))), innerFrom: 58},
		{name: "direct-v4", spec: spec(encap.Direct, false), in: frame(-1, 0x0800, tcp4), want: encap.OK,
			out: out4(-1, tcp4), innerFrom: 14},
		{name: "direct-v6-vlan", spec: spec(encap.Direct, true), in: frame(frameVLAN, 0x86dd, tcp6), want: encap.OK,
			out: out6(frameVLAN, tcp6), innerFrom: 18},
		{name: "ipip-4in4-vlan-kept", spec: spec(encap.IPIP, false), in: frame(frameVLAN, 0x0800, tcp4), want: encap.OK,
			out: out4(frameVLAN, ipipHdr4(tcp4, efECT1, df)), innerFrom: 38},
		{name: "gue-6in6-vlan-kept", spec: spec(encap.GUE, true), in: frame(frameVLAN, 0x86dd, tcp6), want: encap.OK,
			out: out6(frameVLAN, v6h{src: self6, dst: back6, nh: 17, tc: efECT1, flow: testFlow}.build(gue6tcp)), innerFrom: 66},
		{name: "ipip-4in4-padding-stripped", spec: spec(encap.IPIP, false), in: cat(frame(-1, 0x0800, small4), make([]byte, 60-14-len(small4))), want: encap.OK,
			out: out4(-1, ipipHdr4(small4, 0, 0)), innerFrom: 34},
		{name: "direct-padding-stripped", spec: spec(encap.Direct, false), in: cat(frame(-1, 0x0800, small4), make([]byte, 60-14-len(small4))), want: encap.OK,
			out: out4(-1, small4), innerFrom: 14},
		{name: "ipip-4in4-df-clear-ecn-ce", spec: spec(encap.IPIP, false), in: frame(-1, 0x0800, udp4), want: encap.OK,
			out: out4(-1, ipipHdr4(udp4, af11CE, 0)), innerFrom: 34},
		{name: "ipip-4in4-exact-mtu", spec: withMTU(spec(encap.IPIP, false), len(big4DF)+20), in: frame(-1, 0x0800, big4DF), want: encap.OK,
			out: out4(-1, ipipHdr4(big4DF, efECT1, df)), innerFrom: 34},

		// Too big, DF or IPv6: ICMP back to the client.
		{name: "frag-needed-ipip", spec: spec(encap.IPIP, false), in: frame(-1, 0x0800, big4DF), want: encap.TooBig,
			out: fragNeeded(-1, big4DF, 1480)},
		{name: "frag-needed-gue", spec: spec(encap.GUE, false), in: frame(-1, 0x0800, big4DF), want: encap.TooBig,
			out: fragNeeded(-1, big4DF, 1472)},
		{name: "frag-needed-gre-vlan", spec: spec(encap.GRE, false), in: frame(frameVLAN, 0x0800, big4DF), want: encap.TooBig,
			out: fragNeeded(frameVLAN, big4DF, 1476)},
		{name: "frag-needed-4in6", spec: spec(encap.IPIP, true), in: frame(-1, 0x0800, big4DF), want: encap.TooBig,
			out: fragNeeded(-1, big4DF, 1460)},
		{name: "packet-too-big-ipip6", spec: spec(encap.IPIP, true), in: frame(-1, 0x86dd, big6), want: encap.TooBig,
			out: packetTooBig(-1, big6, 1460)},
		{name: "packet-too-big-gue6", spec: spec(encap.GUE, true), in: frame(-1, 0x86dd, big6), want: encap.TooBig,
			out: packetTooBig(-1, big6, 1452)},
		{name: "packet-too-big-gre6-vlan", spec: spec(encap.GRE, true), in: frame(frameVLAN, 0x86dd, big6), want: encap.TooBig,
			out: packetTooBig(frameVLAN, big6, 1456)},
		{name: "packet-too-big-direct", spec: withMTU(spec(encap.Direct, true), 1400), in: frame(-1, 0x86dd, big6), want: encap.TooBig,
			out: packetTooBig(-1, big6, 1400)},
		{name: "no-icmp-about-icmp-error", spec: spec(encap.IPIP, false), in: frame(-1, 0x0800, bigErr4), want: encap.DropTooBig},
		{name: "no-icmp-about-non-first-fragment", spec: spec(encap.IPIP, true), in: frame(-1, 0x86dd, bigFrag6), want: encap.DropTooBig},
		{name: "direct-no-df-too-big", spec: withMTU(spec(encap.Direct, false), 1400), in: frame(-1, 0x0800, big4), want: encap.DropTooBig},

		// Too big without DF: the outer packet is fragmented.
		{name: "outer-frag-ipip4", spec: spec(encap.IPIP, false), in: frame(-1, 0x0800, big4), want: encap.NeedFragments,
			out:   out4(-1, ipipHdr4(big4[:1480], af11CE, mf)),
			extra: [][]byte{out4(-1, v4h{src: self4, dst: back4, proto: 4, tos: af11CE, id: testIPID, ff: 1480 / 8}.build(big4[1480:]))}},
		{name: "outer-frag-gue4-vlan", spec: spec(encap.GUE, false), in: frame(frameVLAN, 0x0800, big4), want: encap.NeedFragments,
			out:   out4(frameVLAN, v4h{src: self4, dst: back4, proto: 17, tos: af11CE, id: testIPID, ff: mf}.build(gueHdr(big4)[:1480])),
			extra: [][]byte{out4(frameVLAN, v4h{src: self4, dst: back4, proto: 17, tos: af11CE, id: testIPID, ff: 1480 / 8}.build(gueHdr(big4)[1480:]))}},
		{name: "outer-frag-gre4-three", spec: withMTU(spec(encap.GRE, false), 576), in: frame(-1, 0x0800, big4), want: encap.NeedFragments,
			out: out4(-1, v4h{src: self4, dst: back4, proto: 47, tos: af11CE, id: testIPID, ff: mf}.build(greHdr(0x0800, big4)[:552])),
			extra: [][]byte{
				out4(-1, v4h{src: self4, dst: back4, proto: 47, tos: af11CE, id: testIPID, ff: mf | 552/8}.build(greHdr(0x0800, big4)[552:1104])),
				out4(-1, v4h{src: self4, dst: back4, proto: 47, tos: af11CE, id: testIPID, ff: 1104 / 8}.build(greHdr(0x0800, big4)[1104:])),
			}},
		{name: "outer-frag-gue-4in6", spec: spec(encap.GUE, true), in: frame(-1, 0x0800, big4), want: encap.NeedFragments,
			out:   out6(-1, v6h{src: self6, dst: back6, nh: 44, tc: af11CE, flow: testFlow}.build(cat(frag6(17, 0, true), gueBig4in6[:1448]))),
			extra: [][]byte{out6(-1, v6h{src: self6, dst: back6, nh: 44, tc: af11CE, flow: testFlow}.build(cat(frag6(17, 1448, false), gueBig4in6[1448:])))}},

		// Refusals: the frame comes back unchanged.
		{name: "6in4-unsupported", spec: spec(encap.IPIP, false), in: frame(-1, 0x86dd, tcp6), want: encap.DropFamily},
		{name: "gue-6in4-unsupported", spec: spec(encap.GUE, false), in: frame(-1, 0x86dd, udp6), want: encap.DropFamily},
	}
}

func TestGolden(t *testing.T) {
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			tmpl, err := encap.NewTemplate(f.spec)
			if err != nil {
				t.Fatalf("NewTemplate: %v", err)
			}
			m, pr := packet.Parse(f.in)
			if pr != packet.OK {
				t.Fatalf("Parse(in) = %v, want ok", pr)
			}
			buf, off, n := chunk(f.in)
			before := bytes.Clone(buf)
			newOff, newLen, res := tmpl.Encap(buf, off, n, &m, testHash, testIPID)
			if res != f.want {
				t.Fatalf("Encap result = %v, want %v", res, f.want)
			}
			var got []byte
			var extras [][]byte
			switch res {
			case encap.OK, encap.TooBig:
				got = buf[newOff : newOff+newLen]
			case encap.NeedFragments:
				if !bytes.Equal(buf, before) || newOff != off || newLen != n {
					t.Fatalf("NeedFragments changed the frame")
				}
				cnt := tmpl.FragmentCount(&m)
				if cnt != 1+len(f.extra) {
					t.Fatalf("FragmentCount = %d, want %d", cnt, 1+len(f.extra))
				}
				spare := make([][]byte, cnt-1)
				for i := range spare {
					spare[i] = make([]byte, 2048)
				}
				sizes := make([]int, cnt-1)
				o, l, k, r := tmpl.Fragment(buf, off, n, &m, testHash, testIPID, spare, sizes)
				if r != encap.OK || k != cnt-1 {
					t.Fatalf("Fragment = %v with %d extra, want ok with %d", r, k, cnt-1)
				}
				got = buf[o : o+l]
				for i := range k {
					extras = append(extras, spare[i][:sizes[i]])
				}
			default:
				if !bytes.Equal(buf, before) || newOff != off || newLen != n {
					t.Fatalf("%v changed the frame or its bounds", res)
				}
				return
			}
			if !bytes.Equal(got, f.out) {
				t.Errorf("out differs:\n got %x\nwant %x", got, f.out)
			}
			for i := range max(len(extras), len(f.extra)) {
				if i >= len(extras) || i >= len(f.extra) || !bytes.Equal(extras[i], f.extra[i]) {
					t.Errorf("fragment %d differs:\n got %x\nwant %x", i+1, at(extras, i), at(f.extra, i))
				}
			}
			checkGoldenFile(t, f.name, append([][]byte{got}, extras...))
			switch res {
			case encap.OK:
				verifyEncap(t, tmpl, f.in, &m, got, f.innerFrom)
				diffGopacket(t, tmpl, &m, got)
			case encap.TooBig:
				verifyTooBig(t, tmpl, f.in, &m, got)
				diffGopacketReply(t, &m, got, max(tmpl.InnerMTU(), map[packet.Family]int{packet.IPv4: 68, packet.IPv6: 1280}[m.Family]))
			case encap.NeedFragments:
				verifyFragments(t, tmpl, f.in, &m, append([][]byte{got}, extras...))
			}
		})
	}
}

func at(b [][]byte, i int) []byte {
	if i < len(b) {
		return b[i]
	}
	return nil
}

// checkGoldenFile compares the frames with testdata/golden/name.hex (one
// frame per line), or writes the file under -update.
func checkGoldenFile(t *testing.T, name string, frames [][]byte) {
	t.Helper()
	var sb strings.Builder
	for _, f := range frames {
		sb.WriteString(hex.EncodeToString(f))
		sb.WriteByte('\n')
	}
	path := filepath.Join("testdata", "golden", name+".hex")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if string(want) != sb.String() {
		t.Errorf("output differs from %s", path)
	}
}
