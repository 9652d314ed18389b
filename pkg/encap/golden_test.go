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
	"github.com/xlbnet/xlb/pkg/packettest"
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
	tcp4    = packettest.IPv4{Src: client4, Dst: vip4, Proto: 6, TOS: efECT1, TTL: 57, ID: 0x4242, Frag: df}.Build(packettest.L4Checksum(client4, vip4, 6, packettest.TCP(40000, 80, synFlag, packettest.Pattern(16, 3, 7)...)))
	udp4    = packettest.IPv4{Src: client4, Dst: vip4, Proto: 17, TOS: af11CE, TTL: 50, ID: 0x777}.Build(packettest.L4Checksum(client4, vip4, 17, packettest.UDP(41000, 9000, packettest.Pattern(30, 3, 7)...)))
	udp4Raw = packettest.IPv4{Src: client4, Dst: vip4, Proto: 17, TTL: 50, ID: 0x778}.Build(packettest.UDP(41000, 9000, packettest.Pattern(31, 3, 7)...))
	tcp6    = packettest.IPv6{Src: client6, Dst: vip6, Next: 6, TC: efECT1, Flow: 0x12345, Hop: 60}.Build(packettest.L4Checksum(client6, vip6, 6, packettest.TCP(40000, 443, ackPsh, packettest.Pattern(100, 3, 7)...)))
	udp6    = packettest.IPv6{Src: client6, Dst: vip6, Next: 17, TC: af11CE, Hop: 60}.Build(packettest.L4Checksum(client6, vip6, 17, packettest.UDP(41000, 9000, packettest.Pattern(41, 3, 7)...)))
	echo6   = packettest.IPv6{Src: client6, Dst: vip6, Next: 58, Hop: 60}.Build(packettest.L4Checksum(client6, vip6, 58, packettest.ICMP(128, 0, 0x00070001, packettest.Pattern(56, 3, 7)...)))
	small4  = packettest.IPv4{Src: client4, Dst: vip4, Proto: 17, ID: 9}.Build(packettest.L4Checksum(client4, vip4, 17, packettest.UDP(1000, 2000, []byte{1, 2, 3, 4}...)))

	// 1500-byte packets: too big for any tunnel at MTU 1500.
	big4DF   = packettest.IPv4{Src: client4, Dst: vip4, Proto: 6, TOS: efECT1, ID: 0x5151, Frag: df}.Build(packettest.L4Checksum(client4, vip4, 6, packettest.TCP(40000, 80, ackPsh, packettest.Pattern(1460, 3, 7)...)))
	big4     = packettest.IPv4{Src: client4, Dst: vip4, Proto: 17, TOS: af11CE, ID: 0x5252}.Build(packettest.L4Checksum(client4, vip4, 17, packettest.UDP(41000, 9000, packettest.Pattern(1472, 3, 7)...)))
	big6     = packettest.IPv6{Src: client6, Dst: vip6, Next: 6, TC: efECT1, Hop: 60}.Build(packettest.L4Checksum(client6, vip6, 6, packettest.TCP(40000, 443, ackPsh, packettest.Pattern(1440, 3, 7)...)))
	bigErr4  = packettest.IPv4{Src: client4, Dst: vip4, Proto: 1, Frag: df}.Build(packettest.L4Checksum("", "", 1, packettest.ICMP(3, 3, 0, packettest.IPv4{Src: vip4, Dst: client4, Proto: 17}.Build(packettest.L4Checksum(vip4, client4, 17, packettest.UDP(9000, 41000, packettest.Pattern(1444, 3, 7)...)))...)))
	bigFrag6 = packettest.IPv6{Src: client6, Dst: vip6, Next: 44, Hop: 60}.Build(packettest.Cat([]byte{6, 0}, packettest.BE16(1448|1), packettest.BE32(0xabcd), packettest.Pattern(1452, 3, 7)))
)

func ipipHdr4(inner []byte, tos uint8, ff uint16) []byte {
	return packettest.IPv4{Src: self4, Dst: back4, Proto: 4, TOS: tos, ID: testIPID, Frag: ff}.Build(inner)
}

func gueHdr(inner []byte) []byte {
	return packettest.Cat(packettest.BE16(testPort), packettest.BE16(6080), packettest.BE16(uint16(8+len(inner))), packettest.BE16(0), inner)
}

func greHdr(et uint16, inner []byte) []byte {
	return packettest.Cat(packettest.BE16(0), packettest.BE16(et), inner)
}

func frame(vlan int, et uint16, l3 []byte) []byte {
	return packettest.Cat(packettest.EthFrom(ourMAC, routerMAC, et, vlanTags(vlan)...), l3)
}

func out4(vlan int, l3 []byte) []byte {
	return packettest.Cat(packettest.EthFrom(nextHop, ourMAC, 0x0800, vlanTags(vlan)...), l3)
}
func out6(vlan int, l3 []byte) []byte {
	return packettest.Cat(packettest.EthFrom(nextHop, ourMAC, 0x86dd, vlanTags(vlan)...), l3)
}

// fragNeeded is the reply to inner at the client, from the VIP.
func fragNeeded(vlan int, inner []byte, mtu uint32) []byte {
	q := inner[:min(len(inner), 576-28)]
	return packettest.Cat(packettest.EthFrom(routerMAC, ourMAC, 0x0800, vlanTags(vlan)...), packettest.IPv4{Src: vip4, Dst: client4, Proto: 1, TOS: 0xc0, ID: testIPID}.Build(packettest.L4Checksum("", "", 1, packettest.ICMP(3, 4, mtu, q...))))
}

func packetTooBig(vlan int, inner []byte, mtu uint32) []byte {
	q := inner[:min(len(inner), 1280-48)]
	return packettest.Cat(packettest.EthFrom(routerMAC, ourMAC, 0x86dd, vlanTags(vlan)...), packettest.IPv6{Src: vip6, Dst: client6, Next: 58, TC: 0xc0}.Build(packettest.L4Checksum(vip6, client6, 58, packettest.ICMP(2, 0, mtu, q...))))
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
	gue6tcp := packettest.L4Checksum(self6, back6, 17, packettest.UDP(testPort, 6080, tcp6...))
	gue4in6 := packettest.L4Checksum(self6, back6, 17, packettest.UDP(testPort, 6080, udp4...))
	gueBig4in6 := packettest.L4Checksum(self6, back6, 17, packettest.UDP(testPort, 6080, big4...))
	return []fixture{
		{name: "ipip-4in4", spec: spec(encap.IPIP, false), in: frame(-1, 0x0800, tcp4), want: encap.OK,
			out: out4(-1, ipipHdr4(tcp4, efECT1, df)), innerFrom: 34},
		{name: "ipip-6in6", spec: spec(encap.IPIP, true), in: frame(-1, 0x86dd, tcp6), want: encap.OK,
			out: out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 41, TC: efECT1, Flow: testFlow}.Build(tcp6)), innerFrom: 54},
		{name: "ipip-4in6", spec: spec(encap.IPIP, true), in: frame(-1, 0x0800, udp4), want: encap.OK,
			out: out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 4, TC: af11CE, Flow: testFlow}.Build(udp4)), innerFrom: 54},
		{name: "gue-4in4", spec: spec(encap.GUE, false), in: frame(-1, 0x0800, tcp4), want: encap.OK,
			out: out4(-1, packettest.IPv4{Src: self4, Dst: back4, Proto: 17, TOS: efECT1, ID: testIPID, Frag: df}.Build(gueHdr(tcp4))), innerFrom: 42},
		{name: "gue-6in6-tcp", spec: spec(encap.GUE, true), in: frame(-1, 0x86dd, tcp6), want: encap.OK,
			out: out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 17, TC: efECT1, Flow: testFlow}.Build(gue6tcp)), innerFrom: 62},
		{name: "gue-6in6-udp", spec: spec(encap.GUE, true), in: frame(-1, 0x86dd, udp6), want: encap.OK,
			out: out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 17, TC: af11CE, Flow: testFlow}.Build(packettest.L4Checksum(self6, back6, 17, packettest.UDP(testPort, 6080, udp6...)))), innerFrom: 62},
		{name: "gue-6in6-icmp-full-sum", spec: spec(encap.GUE, true), in: frame(-1, 0x86dd, echo6), want: encap.OK,
			out: out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 17, Flow: testFlow}.Build(packettest.L4Checksum(self6, back6, 17, packettest.UDP(testPort, 6080, echo6...)))), innerFrom: 62},
		{name: "gue-4in6-udp", spec: spec(encap.GUE, true), in: frame(-1, 0x0800, udp4), want: encap.OK,
			out: out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 17, TC: af11CE, Flow: testFlow}.Build(gue4in6)), innerFrom: 62},
		{name: "gue-4in6-udp-no-checksum", spec: spec(encap.GUE, true), in: frame(-1, 0x0800, udp4Raw), want: encap.OK,
			out: out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 17, Flow: testFlow}.Build(packettest.L4Checksum(self6, back6, 17, packettest.UDP(testPort, 6080, udp4Raw...)))), innerFrom: 62},
		{name: "gue-port-7000", spec: func() encap.Spec { s := spec(encap.GUE, false); s.GUEPort = 7000; return s }(), in: frame(-1, 0x0800, udp4), want: encap.OK,
			out: out4(-1, packettest.IPv4{Src: self4, Dst: back4, Proto: 17, TOS: af11CE, ID: testIPID}.Build(packettest.Cat(packettest.BE16(testPort), packettest.BE16(7000), packettest.BE16(uint16(8+len(udp4))), packettest.BE16(0), udp4))), innerFrom: 42},
		{name: "gre-4in4", spec: spec(encap.GRE, false), in: frame(-1, 0x0800, tcp4), want: encap.OK,
			out: out4(-1, packettest.IPv4{Src: self4, Dst: back4, Proto: 47, TOS: efECT1, ID: testIPID, Frag: df}.Build(greHdr(0x0800, tcp4))), innerFrom: 38},
		{name: "gre-6in6", spec: spec(encap.GRE, true), in: frame(-1, 0x86dd, tcp6), want: encap.OK,
			out: out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 47, TC: efECT1, Flow: testFlow}.Build(greHdr(0x86dd, tcp6))), innerFrom: 58},
		{name: "gre-4in6", spec: spec(encap.GRE, true), in: frame(-1, 0x0800, udp4), want: encap.OK,
			out: out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 47, TC: af11CE, Flow: testFlow}.Build(greHdr(0x0800, udp4))), innerFrom: 58},
		{name: "direct-v4", spec: spec(encap.Direct, false), in: frame(-1, 0x0800, tcp4), want: encap.OK,
			out: out4(-1, tcp4), innerFrom: 14},
		{name: "direct-v6-vlan", spec: spec(encap.Direct, true), in: frame(frameVLAN, 0x86dd, tcp6), want: encap.OK,
			out: out6(frameVLAN, tcp6), innerFrom: 18},
		{name: "ipip-4in4-vlan-kept", spec: spec(encap.IPIP, false), in: frame(frameVLAN, 0x0800, tcp4), want: encap.OK,
			out: out4(frameVLAN, ipipHdr4(tcp4, efECT1, df)), innerFrom: 38},
		{name: "gue-6in6-vlan-kept", spec: spec(encap.GUE, true), in: frame(frameVLAN, 0x86dd, tcp6), want: encap.OK,
			out: out6(frameVLAN, packettest.IPv6{Src: self6, Dst: back6, Next: 17, TC: efECT1, Flow: testFlow}.Build(gue6tcp)), innerFrom: 66},
		{name: "ipip-4in4-padding-stripped", spec: spec(encap.IPIP, false), in: packettest.Cat(frame(-1, 0x0800, small4), make([]byte, 60-14-len(small4))), want: encap.OK,
			out: out4(-1, ipipHdr4(small4, 0, 0)), innerFrom: 34},
		{name: "direct-padding-stripped", spec: spec(encap.Direct, false), in: packettest.Cat(frame(-1, 0x0800, small4), make([]byte, 60-14-len(small4))), want: encap.OK,
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
			extra: [][]byte{out4(-1, packettest.IPv4{Src: self4, Dst: back4, Proto: 4, TOS: af11CE, ID: testIPID, Frag: 1480 / 8}.Build(big4[1480:]))}},
		{name: "outer-frag-gue4-vlan", spec: spec(encap.GUE, false), in: frame(frameVLAN, 0x0800, big4), want: encap.NeedFragments,
			out:   out4(frameVLAN, packettest.IPv4{Src: self4, Dst: back4, Proto: 17, TOS: af11CE, ID: testIPID, Frag: mf}.Build(gueHdr(big4)[:1480])),
			extra: [][]byte{out4(frameVLAN, packettest.IPv4{Src: self4, Dst: back4, Proto: 17, TOS: af11CE, ID: testIPID, Frag: 1480 / 8}.Build(gueHdr(big4)[1480:]))}},
		{name: "outer-frag-gre4-three", spec: withMTU(spec(encap.GRE, false), 576), in: frame(-1, 0x0800, big4), want: encap.NeedFragments,
			out: out4(-1, packettest.IPv4{Src: self4, Dst: back4, Proto: 47, TOS: af11CE, ID: testIPID, Frag: mf}.Build(greHdr(0x0800, big4)[:552])),
			extra: [][]byte{
				out4(-1, packettest.IPv4{Src: self4, Dst: back4, Proto: 47, TOS: af11CE, ID: testIPID, Frag: mf | 552/8}.Build(greHdr(0x0800, big4)[552:1104])),
				out4(-1, packettest.IPv4{Src: self4, Dst: back4, Proto: 47, TOS: af11CE, ID: testIPID, Frag: 1104 / 8}.Build(greHdr(0x0800, big4)[1104:])),
			}},
		{name: "outer-frag-gue-4in6", spec: spec(encap.GUE, true), in: frame(-1, 0x0800, big4), want: encap.NeedFragments,
			out:   out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 44, TC: af11CE, Flow: testFlow}.Build(packettest.Cat(packettest.Frag6(17, 0, true, testID6), gueBig4in6[:1448]))),
			extra: [][]byte{out6(-1, packettest.IPv6{Src: self6, Dst: back6, Next: 44, TC: af11CE, Flow: testFlow}.Build(packettest.Cat(packettest.Frag6(17, 1448, false, testID6), gueBig4in6[1448:])))}},

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
