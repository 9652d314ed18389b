package decap

import (
	"bytes"
	"io"
	"net/netip"
	"testing"

	"github.com/xlbnet/xlb/pkg/decap/decaptest"
)

var (
	client4 = netip.MustParseAddrPort("198.51.100.7:40000")
	vip4    = netip.MustParseAddrPort("203.0.113.10:7")
	client6 = netip.MustParseAddrPort("[fd00:51::7]:40000")
	vip6    = netip.MustParseAddrPort("[fd00:203:113::10]:7")
	lb4     = netip.MustParseAddr("198.18.0.2")
	be4     = netip.MustParseAddr("198.18.1.100")
)

func u32(v uint32) *uint32 { return &v }

func TestDecode(t *testing.T) {
	in4 := decaptest.UDP(client4, vip4, 1, []byte("hello"))
	in6 := decaptest.UDP(client6, vip6, 0, []byte("hello6"))
	padded := append(append([]byte{}, in4...), 0, 0, 0, 0) // L2-style trailing padding

	greBadSum := decaptest.GRE(in4, decaptest.GREOptions{Checksum: true})
	greBadSum[len(greBadSum)-1] ^= 0xff
	greV1 := decaptest.GRE(in4, decaptest.GREOptions{})
	greV1[1] |= 1
	greRouting := decaptest.GRE(in4, decaptest.GREOptions{})
	greRouting[0] |= 0x40
	greTEB := decaptest.GRE(in4, decaptest.GREOptions{})
	greTEB[2], greTEB[3] = 0x65, 0x58
	gueCtl := decaptest.GUE0(in4)
	gueCtl[0] |= 0x20
	gueOpt := append([]byte{0x01, protoIPIP, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd}, in4...) // Hlen=1: one option word
	gueProto := decaptest.GUE0(in4)
	gueProto[1] = 17
	short4 := append([]byte{}, in4...)
	short4[3] += 10 // total length beyond the data
	badIHL := append([]byte{}, in4...)
	badIHL[0] = 0x44
	outerBadIHL := decaptest.IPv4(lb4, be4, protoIPIP, 9, in4)
	outerBadIHL[0] = 0x4f // IHL 60 > what is there? no: len is 48, 60 > 48
	jumbo := append([]byte{}, in6...)
	jumbo[4], jumbo[5], jumbo[6] = 0, 0, 0

	tests := []struct {
		name  string
		kind  kind
		proto uint8
		in    []byte
		want  []byte
		why   DropReason
	}{
		{"ipip 4in4", kindRaw4, 0, decaptest.IPv4(lb4, be4, protoIPIP, 9, in4), in4, DropNone},
		{"ipip 6in4", kindRaw4, 0, decaptest.IPv4(lb4, be4, protoIPv6, 9, in6), in6, DropNone},
		{"ipip 4in4 trailing padding trimmed", kindRaw4, 0, decaptest.IPv4(lb4, be4, protoIPIP, 9, padded), in4, DropNone},
		{"ipip 4in4 says 6", kindRaw4, 0, decaptest.IPv4(lb4, be4, protoIPv6, 9, in4), nil, DropInnerVersion},
		{"ipip 4in6", kindRaw6IPIP, protoIPIP, in4, in4, DropNone},
		{"ipip 6in6", kindRaw6IPIP, protoIPv6, in6, in6, DropNone},
		{"ipip 6in6 carries 4", kindRaw6IPIP, protoIPv6, in4, nil, DropInnerVersion},
		{"ipip empty", kindRaw6IPIP, protoIPIP, nil, nil, DropInnerTruncated},
		{"outer truncated", kindRaw4, 0, in4[:19], nil, DropOuterTruncated},
		{"outer not v4", kindRaw4, 0, in6, nil, DropOuterMalformed},
		{"outer ihl beyond data", kindRaw4, 0, outerBadIHL, nil, DropOuterMalformed},
		{"outer udp", kindRaw4, 0, in4, nil, DropOuterProtocol},
		{"inner total length beyond data", kindRaw6IPIP, protoIPIP, short4, nil, DropInnerTruncated},
		{"inner ihl < 5", kindRaw6IPIP, protoIPIP, badIHL, nil, DropInnerMalformed},
		{"inner truncated v4", kindRaw6IPIP, protoIPIP, in4[:10], nil, DropInnerTruncated},
		{"inner truncated v6", kindRaw6IPIP, protoIPv6, in6[:39], nil, DropInnerTruncated},
		{"inner v6 payload beyond data", kindRaw6IPIP, protoIPv6, in6[:len(in6)-1], nil, DropInnerTruncated},
		{"inner v6 jumbogram", kindRaw6IPIP, protoIPv6, jumbo, nil, DropInnerMalformed},
		{"gre over v4", kindRaw4, 0, decaptest.IPv4(lb4, be4, protoGRE, 9, decaptest.GRE(in4, decaptest.GREOptions{})), in4, DropNone},
		{"gre over v6 inner 6", kindRaw6GRE, 0, decaptest.GRE(in6, decaptest.GREOptions{}), in6, DropNone},
		{"gre key+seq", kindRaw6GRE, 0, decaptest.GRE(in4, decaptest.GREOptions{Key: u32(7), Seq: u32(9)}), in4, DropNone},
		{"gre checksum+key+seq", kindRaw6GRE, 0, decaptest.GRE(in6, decaptest.GREOptions{Checksum: true, Key: u32(7), Seq: u32(9)}), in6, DropNone},
		{"gre bad checksum", kindRaw6GRE, 0, greBadSum, nil, DropGREChecksum},
		{"gre version 1", kindRaw6GRE, 0, greV1, nil, DropGREVersion},
		{"gre routing", kindRaw6GRE, 0, greRouting, nil, DropGREFlags},
		{"gre ethernet", kindRaw6GRE, 0, greTEB, nil, DropGREProtocol},
		{"gre truncated base", kindRaw6GRE, 0, []byte{0, 0, 8}, nil, DropGRETruncated},
		{"gre truncated options", kindRaw6GRE, 0, []byte{0xb0, 0, 8, 0, 0, 0, 0, 0}, nil, DropGRETruncated},
		{"gre type says 6 carries 4", kindRaw6GRE, 0, append([]byte{0, 0, 0x86, 0xdd}, in4...), nil, DropInnerVersion},
		{"gue variant 1 v4", kindGUE, 0, in4, in4, DropNone},
		{"gue variant 1 v6", kindGUE, 0, in6, in6, DropNone},
		{"gue variant 1 bad nibble", kindGUE, 0, append([]byte{0x50}, in4[1:]...), nil, DropGUEVersion},
		{"gue variant 2", kindGUE, 0, append([]byte{0x80}, in4[1:]...), nil, DropGUEVersion},
		{"gue variant 0", kindGUE, 0, decaptest.GUE0(in4), in4, DropNone},
		{"gue variant 0 v6", kindGUE, 0, decaptest.GUE0(in6), in6, DropNone},
		{"gue variant 0 options skipped", kindGUE, 0, gueOpt, in4, DropNone},
		{"gue variant 0 control", kindGUE, 0, gueCtl, nil, DropGUEControl},
		{"gue variant 0 udp inside", kindGUE, 0, gueProto, nil, DropGUEProtocol},
		{"gue variant 0 options truncated", kindGUE, 0, []byte{0x02, 4, 0, 0, 1}, nil, DropGUETruncated},
		{"gue empty", kindGUE, 0, nil, nil, DropGUETruncated},
		{"gue short header", kindGUE, 0, []byte{0, 4}, nil, DropGUETruncated},
		{"unknown kind", 0, 0, in4, nil, DropUnknownKind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := decode(tt.kind, tt.proto, tt.in)
			if why != tt.why {
				t.Fatalf("drop reason = %v, want %v", why, tt.why)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("inner = %x\nwant    %x", got, tt.want)
			}
		})
	}
}

func TestChecksum(t *testing.T) {
	// RFC 1071 §3 example: the sum of these words is ddf2, checksum 220d.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := checksum(b); got != 0x220d {
		t.Fatalf("checksum = %#04x, want 0x220d", got)
	}
	if got := checksum([]byte{0xff}); got != 0x00ff {
		t.Fatalf("odd-length checksum = %#04x, want 0x00ff", got)
	}
}

// referenceChecksum is RFC 1071 done the slow, obvious way.
func referenceChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func FuzzChecksum(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7})
	f.Add(bytes.Repeat([]byte{0xff}, 67))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := checksum(b), referenceChecksum(b); got != want {
			t.Fatalf("checksum(%x) = %#04x, reference %#04x", b, got, want)
		}
	})
}

func TestChecksumAllLengths(t *testing.T) {
	b := make([]byte, 200)
	for i := range b {
		b[i] = byte(0xff - i*7)
	}
	for n := range len(b) {
		if got, want := checksum(b[:n]), referenceChecksum(b[:n]); got != want {
			t.Fatalf("len %d: checksum %#04x, reference %#04x", n, got, want)
		}
	}
	ff := bytes.Repeat([]byte{0xff}, 4096) // maximal carries
	if got, want := checksum(ff), referenceChecksum(ff); got != want {
		t.Fatalf("all-ones: checksum %#04x, reference %#04x", got, want)
	}
}

func TestDropReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := DropReason(0); r < NumDropReasons; r++ {
		s := r.String()
		if s == "" || seen[s] {
			t.Fatalf("drop reason %d has empty or duplicate name %q", r, s)
		}
		seen[s] = true
	}
	if s := NumDropReasons.String(); s != "DropReason(19)" {
		t.Fatalf("out-of-range name = %q", s)
	}
}

// fakeTUN records what the reader writes.
type fakeTUN struct {
	pkts [][]byte
	last []byte
	keep bool
	err  error
}

func (f *fakeTUN) Write(b []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	f.last = b
	if f.keep {
		f.pkts = append(f.pkts, append([]byte(nil), b...))
	}
	return len(b), nil
}
func (f *fakeTUN) Close() error { return nil }

func TestReaderHandleCounts(t *testing.T) {
	in4 := decaptest.UDP(client4, vip4, 1, []byte("x"))
	tun := &fakeTUN{keep: true}
	r := &reader{kind: kindGUE, tun: tun, buf: make([]byte, bufSize)}
	for _, p := range [][]byte{in4, {0x50, 1, 2}, in4[:10], decaptest.GUE0(in4)} {
		r.handle(copy(r.buf, p))
	}
	tun.err = io.ErrClosedPipe
	r.handle(copy(r.buf, in4))

	var c Counters
	r.st.addTo(&c)
	want := Counters{Received: 5, Delivered: 2}
	want.Drops[DropGUEVersion] = 1
	want.Drops[DropInnerTruncated] = 1
	want.Drops[DropTUNWrite] = 1
	if c != want {
		t.Fatalf("counters = %v\nwant       %v", c, want)
	}
	if c.Dropped() != 3 {
		t.Fatalf("Dropped() = %d, want 3", c.Dropped())
	}
	if len(tun.pkts) != 2 || !bytes.Equal(tun.pkts[0], in4) || !bytes.Equal(tun.pkts[1], in4) {
		t.Fatalf("tun got %x, want in4 twice", tun.pkts)
	}
}

func TestHandleAllocatesNothing(t *testing.T) {
	in4 := decaptest.UDP(client4, vip4, 1, make([]byte, 1400))
	cases := map[string]struct {
		kind kind
		pkt  []byte
	}{
		"ipip": {kindRaw4, decaptest.IPv4(lb4, be4, protoIPIP, 1, in4)},
		"gre":  {kindRaw4, decaptest.IPv4(lb4, be4, protoGRE, 1, decaptest.GRE(in4, decaptest.GREOptions{Checksum: true, Key: u32(1)}))},
		"gue":  {kindGUE, in4},
		"drop": {kindGUE, []byte{0xf0}},
	}
	for name, c := range cases {
		r := &reader{kind: c.kind, tun: &fakeTUN{}, buf: make([]byte, bufSize)}
		n := copy(r.buf, c.pkt)
		if a := testing.AllocsPerRun(1000, func() { r.handle(n) }); a != 0 {
			t.Errorf("%s: handle allocates %v per packet, want 0", name, a)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	in4 := decaptest.UDP(client4, vip4, 1, make([]byte, 1400))
	cases := []struct {
		name string
		kind kind
		pkt  []byte
	}{
		{"ipip", kindRaw4, decaptest.IPv4(lb4, be4, protoIPIP, 1, in4)},
		{"gre", kindRaw4, decaptest.IPv4(lb4, be4, protoGRE, 1, decaptest.GRE(in4, decaptest.GREOptions{}))},
		{"gre-csum", kindRaw4, decaptest.IPv4(lb4, be4, protoGRE, 1, decaptest.GRE(in4, decaptest.GREOptions{Checksum: true}))},
		{"gue", kindGUE, in4},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := &reader{kind: c.kind, tun: &fakeTUN{}, buf: make([]byte, bufSize)}
			n := copy(r.buf, c.pkt)
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				r.handle(n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
		})
	}
}
