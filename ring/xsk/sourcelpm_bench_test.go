package xsk

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/packettest"
)

// BenchmarkXDPSourceLPM measures what source ranges would cost in the XDP
// program (docs/design.md#source-ranges: the XDP program or the worker,
// decided by measurement): ns per packet of BPF_PROG_TEST_RUN, in the
// kernel, for
//
//   - redirect: xlb_redirect itself on a VIP packet (what every VIP packet
//     already costs in XDP; its redirect fails without a socket);
//   - parse: a program that reads the source address into a key and
//     returns, without a lookup (the floor of the next two);
//   - lpm/N: the same with a lookup of (rule id, source) in an LPM trie
//     map of N prefixes, the layout an XDP implementation would use (one
//     map for every rule, the rule id as the key's first 32 bits), for an
//     admitted and a refused source.
//
// lpm minus parse is the price of the lookup on every packet of a rule
// with ranges. Root only; bench/README.md has the figures.
func BenchmarkXDPSourceLPM(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root (BPF_PROG_TEST_RUN)")
	}
	admitted6 := netip.MustParseAddr("2001:db8:5::7")
	frame := func(src netip.Addr) []byte {
		return packettest.Cat(packettest.Eth(v6), packettest.IPv6{Src: src.String(), Dst: "fd00::10", Next: 6}.Build(packettest.TCP(40000, 443, 0)))
	}
	const repeat = 200000
	run := func(b *testing.B, prog *ebpf.Program, pkt []byte, want uint32) {
		var total float64
		for b.Loop() {
			ret, d, err := prog.Benchmark(pkt, repeat, nil)
			if err != nil {
				b.Fatal(err)
			}
			if ret != want {
				b.Fatalf("returned %d, want %d", ret, want)
			}
			total += float64(d.Nanoseconds())
		}
		b.ReportMetric(total/float64(b.N), "ns/pkt")
	}

	b.Run("redirect", func(b *testing.B) {
		p, err := Load()
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		if err := p.AddVIP(VIP{Addr: netip.MustParseAddr("fd00::10"), Proto: 6, Port: 443}); err != nil {
			b.Fatal(err)
		}
		// No socket in the queue's slot, the no-socket action passes.
		run(b, p.objs.XlbRedirect, frame(admitted6), xdpPass)
	})

	parse, err := sourceProgram(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer parse.Close()
	b.Run("parse", func(b *testing.B) { run(b, parse, frame(admitted6), xdpPass) })

	for _, n := range []int{1, 1000, 10000} {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.LPMTrie, KeySize: 24, ValueSize: 4, MaxEntries: uint32(n) + 1, Flags: unix.BPF_F_NO_PREALLOC})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		rng := rand.New(rand.NewPCG(uint64(n), 3))
		put := func(p netip.Prefix) {
			var k [24]byte
			binary.LittleEndian.PutUint32(k[0:], uint32(32+p.Bits()))
			binary.BigEndian.PutUint32(k[4:], 1) // the rule id
			a := p.Addr().As16()
			copy(k[8:], a[:])
			if err := m.Put(k, uint32(1)); err != nil {
				b.Fatal(err)
			}
		}
		put(netip.PrefixFrom(admitted6, 48).Masked())
		for range n - 1 {
			// /48s and mapped IPv4 /24s elsewhere (mapped: 96 + 24 bits).
			if rng.IntN(2) == 0 {
				put(netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(rng.IntN(255)), byte(1 + rng.IntN(255))}), 48))
			} else {
				put(netip.PrefixFrom(netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: byte(1 + rng.IntN(223)), 13: byte(rng.IntN(256)), 14: byte(rng.IntN(256))}), 120))
			}
		}
		prog, err := sourceProgram(m)
		if err != nil {
			b.Fatal(err)
		}
		defer prog.Close()
		b.Run(fmt.Sprintf("lpm/%d/admitted", n), func(b *testing.B) { run(b, prog, frame(admitted6), xdpPass) })
		b.Run(fmt.Sprintf("lpm/%d/refused", n), func(b *testing.B) { run(b, prog, frame(netip.MustParseAddr("2001:db8:ff00::7")), 1) })
	}
}

// sourceProgram builds an XDP program that checks that an IPv6 frame is
// long enough, copies its source address into a 24-byte LPM key {prefix
// length 160, rule id 1, address} on the stack and, with lpm, looks it up:
// XDP_PASS when found (or without lpm), XDP_DROP when not.
func sourceProgram(lpm *ebpf.Map) (*ebpf.Program, error) {
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // data
		asm.LoadMem(asm.R3, asm.R1, 4, asm.Word), // data_end
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 14+40),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.StoreImm(asm.RFP, -24, 160, asm.Word),
		asm.StoreImm(asm.RFP, -20, 0x01000000, asm.Word), // rule id 1, big-endian
	}
	for i := int16(0); i < 4; i++ {
		insns = append(insns,
			asm.LoadMem(asm.R5, asm.R2, 14+8+4*i, asm.Word),
			asm.StoreMem(asm.RFP, -16+4*i, asm.R5, asm.Word))
	}
	if lpm != nil {
		insns = append(insns,
			asm.LoadMapPtr(asm.R1, lpm.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -24),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "drop"))
	}
	insns = append(insns,
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return())
	if lpm != nil { // the verifier refuses unreachable code
		insns = append(insns,
			asm.Mov.Imm(asm.R0, 1).WithSymbol("drop"), // XDP_DROP
			asm.Return())
	}
	return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, Instructions: insns, License: "Dual BSD/GPL"})
}
