package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	"github.com/gaissmai/bart"
	"github.com/google/gopacket/layers"

	"github.com/xlbnet/xlb/pkg/benchutil"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

// admitsNaive is the definition Admits must agree with: a is in one of ps.
func admitsNaive(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func TestSourceSetCases(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []string
		in, out  []string
	}{
		{"one IPv4 /24", []string{"198.51.100.0/24"}, []string{"198.51.100.0", "198.51.100.255"}, []string{"198.51.101.0", "198.51.99.255", "2001:db8::1", "::ffff:198.51.101.1"}},
		{"IPv4 /0 admits every IPv4 source only", []string{"0.0.0.0/0"}, []string{"1.2.3.4", "255.255.255.255"}, []string{"2001:db8::1", "::1"}},
		{"IPv6 /0 admits every IPv6 source only", []string{"::/0"}, []string{"2001:db8::1", "fd00::1"}, []string{"192.0.2.1"}},
		{"host prefixes", []string{"192.0.2.7/32", "2001:db8::7/128"}, []string{"192.0.2.7", "2001:db8::7"}, []string{"192.0.2.6", "192.0.2.8", "2001:db8::6", "2001:db8::8"}},
		{"prefix ending inside a byte", []string{"203.0.113.64/27", "2001:db8:ab00::/40"}, []string{"203.0.113.64", "203.0.113.95", "2001:db8:ab00::1", "2001:db8:abff:ffff::"}, []string{"203.0.113.63", "203.0.113.96", "2001:db8:ac00::", "2001:db8:aaff::"}},
		{"nested and overlapping", []string{"198.18.0.0/15", "198.18.5.0/24", "198.19.0.0/16"}, []string{"198.18.5.9", "198.19.200.1", "198.18.0.0"}, []string{"198.20.0.0", "198.17.255.255"}},
		{"longer prefix first, then its cover", []string{"198.51.100.128/25", "198.51.100.0/24"}, []string{"198.51.100.1", "198.51.100.200"}, []string{"198.51.101.1"}},
		{"a shorter prefix ending in the same byte after a longer one", []string{"0.0.0.0/3", "0.0.0.0/1", "::/3", "::/1"}, []string{"100.1.1.1", "31.0.0.1", "7000::1"}, []string{"128.0.0.1", "8000::1"}},
		{"IPv4-mapped IPv6 prefix is taken as IPv4", []string{"::ffff:198.51.100.0/120"}, []string{"198.51.100.9"}, []string{"198.51.101.9"}},
		{"IPv6 the size of the mapped space does not admit IPv4", []string{"2001:db8::/32"}, []string{"2001:db8:1::1"}, []string{"198.51.100.1", "2001:db9::1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSources(t, tc.prefixes...)
			for _, a := range tc.in {
				if b := addr16(a); !s.Admits(&b) {
					t.Errorf("%s not admitted", a)
				}
			}
			for _, a := range tc.out {
				if b := addr16(a); s.Admits(&b) {
					t.Errorf("%s admitted", a)
				}
			}
		})
	}
}

func TestSourceSetNilAdmitsEverySource(t *testing.T) {
	s, err := NewSourceSet(nil)
	if err != nil || s != nil {
		t.Fatalf("NewSourceSet(nil) = %v, %v; want nil, nil", s, err)
	}
	for _, a := range []string{"192.0.2.1", "2001:db8::1", "::"} {
		if b := addr16(a); !s.Admits(&b) {
			t.Errorf("the nil set does not admit %s", a)
		}
	}
	if _, err := NewSourceSet([]netip.Prefix{{}}); err == nil {
		t.Error("an invalid prefix was accepted")
	}
}

// randomPrefixes returns n prefixes of both families, most of them of the
// lengths operators list (/8 to /32, /32 to /64), with anyLength a tenth
// of any length (/0 included).
func randomPrefixes(rng *rand.Rand, n int, v6Share float64, anyLength bool) []netip.Prefix {
	var out []netip.Prefix
	for range n {
		var p netip.Prefix
		if rng.Float64() < v6Share {
			var a [16]byte
			a[0], a[1], a[2], a[3] = 0x20, 0x01, 0x0d, 0xb8
			for i := 4; i < 16; i++ {
				a[i] = byte(rng.IntN(256))
			}
			bits := 32 + rng.IntN(33)
			if anyLength && rng.IntN(10) == 0 {
				bits = rng.IntN(129)
			}
			p = netip.PrefixFrom(netip.AddrFrom16(a), bits).Masked()
		} else {
			a := [4]byte{198, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))}
			bits := 8 + rng.IntN(25)
			if !anyLength {
				// What a list of thousands holds: customer /16 to /32.
				a[0], bits = byte(1+rng.IntN(223)), 16+rng.IntN(17)
			}
			if anyLength && rng.IntN(10) == 0 {
				bits = rng.IntN(33)
			}
			p = netip.PrefixFrom(netip.AddrFrom4(a), bits).Masked()
		}
		out = append(out, p)
	}
	return out
}

// randomSource returns an address inside one of ps half of the time, else
// a random one of either family.
func randomSource(rng *rand.Rand, ps []netip.Prefix) netip.Addr {
	if rng.IntN(2) == 0 {
		p := ps[rng.IntN(len(ps))]
		a := p.Addr().AsSlice()
		for i := p.Bits(); i < len(a)*8; i++ {
			if rng.IntN(2) == 0 {
				a[i/8] ^= 0x80 >> (i % 8)
			}
		}
		out, _ := netip.AddrFromSlice(a)
		return out
	}
	if rng.IntN(2) == 0 {
		return netip.AddrFrom4([4]byte{byte(1 + rng.IntN(223)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
	}
	var a [16]byte
	a[0], a[1], a[2], a[3] = 0x20, 0x01, 0x0d, 0xb8
	for i := 4; i < 16; i++ {
		a[i] = byte(rng.IntN(256))
	}
	return netip.AddrFrom16(a)
}

// The trie agrees with the definition on random sets of 1 to 5000
// prefixes and addresses in and around them.
func TestSourceSetAgainstDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	for _, n := range []int{1, 2, 7, 100, 5000} {
		ps := randomPrefixes(rng, n, 0.4, true)
		s, err := NewSourceSet(ps)
		if err != nil {
			t.Fatal(err)
		}
		in := 0
		for range 20000 {
			a := randomSource(rng, ps)
			want := admitsNaive(ps, a)
			b := a.As16()
			if got := s.Admits(&b); got != want {
				t.Fatalf("%d prefixes: Admits(%s) = %v, want %v", n, a, got, want)
			}
			if want {
				in++
			}
		}
		if in < 5000 {
			t.Fatalf("%d prefixes: only %d of 20000 addresses inside: the test does not test", n, in)
		}
	}
}

func TestSourceSetAllocatesNothing(t *testing.T) {
	s := mustSources(t, "198.51.100.0/24", "2001:db8::/32")
	a, b := addr16("198.51.100.9"), addr16("2001:db8::9")
	if n := testing.AllocsPerRun(1000, func() { s.Admits(&a); s.Admits(&b) }); n != 0 {
		t.Fatalf("Admits allocates %v times", n)
	}
}

// Source ranges on Decide (docs/design.md#source-ranges): sources outside
// are dropped before the tables are touched, inside are placed as without
// ranges, for TCP and UDP of both families.
func TestSourceRangesDecide(t *testing.T) {
	ranges := []string{"198.51.100.0/24", "2001:db8::/32"}
	tests := []struct {
		name string
		p    pkt
		want string // "tx" or the drop
	}{
		{"TCP SYN inside", tcp("198.51.100.7", 4000, syn), "tx"},
		{"TCP SYN outside", tcp("198.51.101.7", 4000, syn), "drop:source-range"},
		{"TCP established outside", tcp("203.0.113.99", 4000, ack), "drop:source-range"},
		{"UDP inside", udp("198.51.100.200", 5000), "tx"},
		{"UDP outside", udp("192.0.2.200", 5000), "drop:source-range"},
		{"IPv6 source inside, wrong family for this VIP", pkt{src: "2001:db8::7", sport: 4000, dport: 80, proto: packet.ProtoTCP, flags: syn, family6: true}, "tx"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, ruleSpec{protocol: RuleTCP, backends: names(3), sources: ranges, affinity: 1})
			if tc.p.proto == packet.ProtoUDP {
				w = newWorld(t, ruleSpec{protocol: RuleUDP, backends: names(3), sources: ranges, affinity: 1})
			}
			d := w.snap.Decide(tc.p.meta(), w.q, w.now)
			got := d.Verdict.String()
			if d.Verdict != Tx {
				got += ":" + d.Reason.String()
			}
			if got != tc.want {
				t.Fatalf("decision %s, want %s", got, tc.want)
			}
			if d.Verdict == Drop && (!d.Denied || d.Rule != 0) {
				t.Errorf("source-range drop without its rule: %+v", d)
			}
			if n := w.q.Conntrack.Len(); (d.Verdict == Tx) != (n == 1) {
				t.Errorf("%d conntrack entries after a %s", n, got)
			}
		})
	}
}

// A change of the ranges applies from the next snapshot on: a flow whose
// source stays admitted keeps its backend (its entry decides), one whose
// source is no longer admitted gets nothing, and one newly admitted is
// placed.
func TestSourceRangesReload(t *testing.T) {
	w := newWorld(t, ruleSpec{protocol: RuleTCP, backends: names(4), sources: []string{"198.51.100.0/24", "203.0.113.0/24"}})
	kept, cut, added := tcp("198.51.100.7", 4000, syn), tcp("203.0.113.7", 4000, syn), tcp("192.0.2.99", 4000, syn)
	b1 := w.send(kept)
	if w.send(cut) == "drop:source-range" {
		t.Fatal("203.0.113.7 refused before the reload")
	}
	if got := w.send(added); got != "drop:source-range" {
		t.Fatalf("192.0.2.99 before the reload: %s", got)
	}
	// The reload: other ranges, and a table in which kept would land
	// elsewhere, so only its entry can keep it.
	w.rule.Sources = mustSources(t, "198.51.100.0/24", "192.0.2.0/24")
	others := names(4)
	for i, n := range others {
		if n == b1 {
			others = append(others[:i], others[i+1:]...)
			break
		}
	}
	w.setEligible(others, nil)
	kept.flags, cut.flags, added.flags = ack, ack, syn
	if got := w.send(kept); got != b1 {
		t.Errorf("the admitted flow moved from %s to %s", b1, got)
	}
	if got := w.send(cut); got != "drop:source-range" {
		t.Errorf("a flow from a range the reload removed: %s", got)
	}
	if got := w.send(added); got == "drop:source-range" {
		t.Errorf("a source the reload added is refused")
	}
}

// ICMP errors and echo requests (docs/design.md#source-ranges): an error
// follows the admission of the client of the flow it quotes; an echo
// request is answered when some rule of the VIP admits its source.
func TestSourceRangesICMP(t *testing.T) {
	w := newWorld(t, ruleSpec{protocol: RuleTCP, backends: names(3), sources: []string{"198.51.100.0/24"}})
	quote := func(client string) *packet.Tuple {
		return &packet.Tuple{Src: testVIP, Dst: addr16(client), SrcPort: 80, DstPort: 4000, Proto: packet.ProtoTCP}
	}
	router := "192.0.2.254"
	if got := w.send(pkt{src: router, proto: packet.ProtoICMP, icmp: 3, inner: quote("198.51.100.7")}); len(got) > 15 {
		t.Errorf("an error about an admitted client's flow: %s", got)
	}
	if got := w.send(pkt{src: router, proto: packet.ProtoICMP, icmp: 3, inner: quote("203.0.113.7")}); got != "drop:source-range" {
		t.Errorf("an error about a refused client's flow: %s", got)
	}
	if got := w.send(pkt{src: "198.51.100.7", proto: packet.ProtoICMP, icmp: 8}); got != "reply:ok" {
		t.Errorf("an echo from an admitted source: %s", got)
	}
	echo := pkt{src: "203.0.113.7", proto: packet.ProtoICMP, icmp: 8}
	d := w.snap.Decide(echo.meta(), w.q, w.now)
	if d.Verdict != Drop || d.Reason != ReasonSourceRange || d.Denied {
		t.Errorf("an echo from a refused source: %+v, want a source-range drop without a rule", d)
	}

	// A second rule of the VIP without ranges: everybody gets an answer.
	open := w.rule
	open.Name, open.Sources = "open", nil
	open.Match = RuleMatch{VIP: testVIP, Protocol: RuleUDP, Ports: []PortRange{{53, 53}}}
	s, err := NewSnapshot(testSeed, []*Rule{&w.rule, &open})
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Decide(echo.meta(), w.q, w.now); d.Verdict != Reply {
		t.Errorf("an echo with an open rule on the VIP: %v %v", d.Verdict, d.Reason)
	}
	// The other rule is still restricted for its own packets.
	if d := s.Decide(tcp("203.0.113.7", 4000, syn).meta(), w.q, w.now); d.Reason != ReasonSourceRange {
		t.Errorf("TCP from a refused source beside an open UDP rule: %v %v", d.Verdict, d.Reason)
	}
}

// Fragments carry their source: a non-first fragment of a refused client
// is dropped like its first, with and without fragment tracking.
func TestSourceRangesFragments(t *testing.T) {
	for _, trk := range []bool{false, true} {
		w := newWorld(t, ruleSpec{protocol: RuleUDP, allPorts: true, fragTrk: trk, backends: names(3), sources: []string{"198.51.100.0/24"}})
		for _, src := range []string{"198.51.100.7", "203.0.113.7"} {
			for _, fs := range []packet.FragState{packet.FragFirst, packet.FragNonFirst} {
				p := udp(src, 4000)
				p.frag, p.fragID = fs, 9
				got := w.send(p)
				if refused := got == "drop:source-range"; refused != (src == "203.0.113.7") {
					t.Errorf("tracking %v, %s, fragment %v: %s", trk, src, fs, got)
				}
			}
		}
	}
}

// Explain (xlb lookup) reports the refusal with the rule.
func TestSourceRangesExplain(t *testing.T) {
	w := newWorld(t, ruleSpec{protocol: RuleTCP, backends: names(3), sources: []string{"198.51.100.0/24"}})
	x := w.snap.Explain(tcp("203.0.113.7", 4000, ack).meta(), w.now, nil)
	if !x.Matched || x.Rule != 0 || x.Decision.Reason != ReasonSourceRange {
		t.Fatalf("Explain of a refused source: %+v", x)
	}
	x = w.snap.Explain(tcp("198.51.100.7", 4000, ack).meta(), w.now, nil)
	if x.Decision.Verdict != Tx {
		t.Fatalf("Explain of an admitted source: %+v", x.Decision)
	}
}

func TestSourceRangesDecideAllocatesNothing(t *testing.T) {
	w := newWorld(t, ruleSpec{protocol: RuleTCP, backends: names(3), sources: sourceBenchPrefixes(1000)})
	for _, p := range []pkt{tcp("198.18.3.7", 4000, syn), tcp("203.0.113.7", 4000, syn)} {
		m := p.meta()
		if a := testing.AllocsPerRun(200, func() { w.snap.Decide(m, w.q, w.now) }); a != 0 {
			t.Errorf("Decide from %s allocates %v times", p.src, a)
		}
	}
}

// sourceBenchPrefixes is n prefixes an operator might list: every /24 of
// 198.18.0.0/15 (where the benchmarks' clients are), the rest /24s and
// /48s elsewhere.
func sourceBenchPrefixes(n int) []string {
	rng := rand.New(rand.NewPCG(5, 6))
	var out []string
	for i := range min(n, 512) {
		out = append(out, fmt.Sprintf("198.%d.%d.0/24", 18+i/256, i%256))
	}
	for len(out) < n {
		if len(out)%2 == 0 {
			out = append(out, fmt.Sprintf("%d.%d.%d.0/24", 1+rng.IntN(190), rng.IntN(256), rng.IntN(256)))
		} else {
			out = append(out, fmt.Sprintf("2001:db8:%x:%x::/64", rng.IntN(65536), rng.IntN(65536)))
		}
	}
	return out
}

// sourceSink keeps the benchmarks' lookups from being optimized away.
var sourceSink int

// BenchmarkSourceSet measures one admission test of this package's trie
// against bart.Lite (github.com/gaissmai/bart, a popcount-compressed
// multibit trie) over the same prefixes and addresses, half of them
// admitted: ns per lookup and allocations, at 1 to 10 000 prefixes.
func BenchmarkSourceSet(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		ps := randomPrefixes(rng, n, 0.3, false)
		addrs := make([]netip.Addr, 4096)
		keys := make([][16]byte, len(addrs))
		in := 0
		for i := range addrs {
			addrs[i] = randomSource(rng, ps)
			keys[i] = addrs[i].As16()
			if admitsNaive(ps, addrs[i]) {
				in++
			}
		}
		if in < len(addrs)/4 {
			b.Fatalf("%d prefixes: only %d of %d addresses admitted", n, in, len(addrs))
		}
		b.Run(fmt.Sprintf("trie/%d", n), func(b *testing.B) {
			s, err := NewSourceSet(ps)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			hits, i := 0, 0
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu := benchutil.Thread()
			for b.Loop() {
				if s.Admits(&keys[i&4095]) {
					hits++
				}
				i++
			}
			cpu.Report(b, "cpu-ns/lookup")
			b.ReportMetric(float64(s.Len()*72)/1024, "KiB")
			sourceSink += hits
		})
		b.Run(fmt.Sprintf("bart/%d", n), func(b *testing.B) {
			var l bart.Lite
			for _, p := range ps {
				l.Insert(p)
			}
			b.ReportAllocs()
			hits, i := 0, 0
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu := benchutil.Thread()
			for b.Loop() {
				// The packet path holds the 16-byte form: converting it
				// is part of the cost.
				if l.Contains(netip.AddrFrom16(keys[i&4095]).Unmap()) {
					hits++
				}
				i++
			}
			cpu.Report(b, "cpu-ns/lookup")
			sourceSink += hits
		})
	}
}

// Source ranges on frames through a worker: a refused TCP or UDP frame
// leaves nothing on TX and is counted once as source-range; an admitted one
// is encapsulated; an echo request from a refused source gets no reply.
func TestSourceRangesWorker(t *testing.T) {
	fw := newFakeWorker(t, ruleSpec{protocol: RuleTCP, backends: names(2), sources: []string{"198.51.100.0/24"}}, encap.IPIP, 1500)
	vip := netip.AddrFrom16(testVIP).Unmap()
	frame := func(src string, proto layers.IPProtocol, icmp uint8) []byte {
		return packettest.Frame(packettest.Spec{Src: netip.MustParseAddr(src), Dst: vip, Proto: proto, SrcPort: 4000, DstPort: 80, SYN: true, ICMPType: icmp, ICMPID: 1, Payload: []byte("x")})
	}
	for _, tc := range []struct {
		name   string
		frame  []byte
		sent   int
		reason Reason
	}{
		{"admitted TCP", frame("198.51.100.7", layers.IPProtocolTCP, 0), 1, ReasonNone},
		{"refused TCP", frame("203.0.113.7", layers.IPProtocolTCP, 0), 0, ReasonSourceRange},
		{"admitted echo", frame("198.51.100.7", layers.IPProtocolICMPv4, 8), 1, ReasonNone},
		{"refused echo", frame("203.0.113.7", layers.IPProtocolICMPv4, 8), 0, ReasonSourceRange},
	} {
		before := fw.wk.Counters.Reasons[tc.reason].Load()
		if out := fw.run(tc.frame); len(out) != tc.sent {
			t.Errorf("%s: %d frames sent, want %d", tc.name, len(out), tc.sent)
		}
		if tc.reason != ReasonNone {
			if got := fw.wk.Counters.Reasons[tc.reason].Load() - before; got != 1 {
				t.Errorf("%s: %s counted %d times, want once", tc.name, tc.reason, got)
			}
		}
	}
}

// FuzzSourceSet holds the trie to the definition under any list: the
// input is read as 18-byte records {family and a length, 16 address
// bytes}, all but the last one prefixes, the last the source looked up.
func FuzzSourceSet(f *testing.F) {
	rec := func(v4 bool, bits byte, a string) []byte {
		b := []byte{0, bits}
		if v4 {
			b[0] = 1
		}
		addr := netip.MustParseAddr(a).As16()
		return append(b, addr[:]...)
	}
	cat := func(rs ...[]byte) []byte {
		var out []byte
		for _, r := range rs {
			out = append(out, r...)
		}
		return out
	}
	f.Add(cat(rec(true, 24, "198.51.100.0"), rec(false, 32, "2001:db8::"), rec(true, 32, "198.51.100.7")))
	f.Add(cat(rec(true, 0, "0.0.0.0"), rec(false, 128, "2001:db8::1")))
	f.Add(cat(rec(true, 27, "203.0.113.64"), rec(true, 25, "203.0.113.0"), rec(true, 32, "203.0.113.95")))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ps []netip.Prefix
		var src netip.Addr
		for len(data) >= 18 {
			r := data[:18]
			data = data[18:]
			a := netip.AddrFrom16([16]byte(r[2:18]))
			bits := int(r[1]) % 129
			if r[0]&1 == 1 {
				a, bits = netip.AddrFrom4([4]byte(r[14:18])), int(r[1])%33
			}
			if len(data) < 18 {
				src = a
				break
			}
			ps = append(ps, netip.PrefixFrom(a, bits).Masked())
		}
		if !src.IsValid() {
			return
		}
		s, err := NewSourceSet(ps)
		if err != nil {
			t.Fatal(err)
		}
		b := src.As16()
		want := len(ps) == 0 || admitsNaive(s.Prefixes(), src)
		if got := s.Admits(&b); got != want {
			t.Fatalf("prefixes %v: Admits(%s) = %v, want %v", ps, src, got, want)
		}
	})
}
