package main

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/xlbnet/xlb/pkg/netns"
)

// sink is a tiny XDP program on every sink's eth0: an IPv4 TCP or UDP
// packet to port vipPort (IHL 5, which every generated packet has) is
// counted in a per-CPU counter and dropped; everything else (ARP, pings)
// passes. Written with cilium/ebpf's assembler, so no C toolchain is
// needed.
type sink struct {
	prog  *ebpf.Program
	count *ebpf.Map
	links []link.Link
}

func newSink() (*sink, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "bench_sink", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("sink counter map: %w", err)
	}
	const (
		xdpDrop = 1
		xdpPass = 2
	)
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 4, asm.Word), // data_end
		asm.LoadMem(asm.R6, asm.R1, 0, asm.Word), // data
		asm.Mov.Reg(asm.R3, asm.R6),
		asm.Add.Imm(asm.R3, 38), // Ethernet 14 + IPv4 20 + ports 4
		asm.JGT.Reg(asm.R3, asm.R2, "pass"),
		asm.LoadMem(asm.R4, asm.R6, 12, asm.Half),
		asm.JNE.Imm(asm.R4, 0x0008, "pass"), // EtherType 0x0800, read little-endian
		asm.LoadMem(asm.R4, asm.R6, 14, asm.Byte),
		asm.JNE.Imm(asm.R4, 0x45, "pass"), // IPv4, no options
		asm.LoadMem(asm.R4, asm.R6, 23, asm.Byte),
		asm.JEq.Imm(asm.R4, 6, "port"),
		asm.JNE.Imm(asm.R4, 17, "pass"),
		asm.LoadMem(asm.R4, asm.R6, 36, asm.Half).WithSymbol("port"),
		asm.JNE.Imm(asm.R4, int32(vipPort>>8|(vipPort&0xff)<<8), "pass"),
		asm.StoreImm(asm.R10, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, xdpDrop).WithSymbol("drop"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bench_sink", Type: ebpf.XDP, License: "Apache-2.0", Instructions: insns})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("load sink program: %w", err)
	}
	return &sink{prog: prog, count: m}, nil
}

// attach puts the program on eth0 of namespace ns, in native mode.
func (s *sink) attach(ns string) error {
	n, err := netns.Open(ns)
	if err != nil {
		return err
	}
	return n.Do(func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: s.prog, Interface: ifi.Index, Flags: link.XDPDriverMode})
		if err != nil {
			return fmt.Errorf("attach sink program in %s: %w", ns, err)
		}
		s.links = append(s.links, l)
		return nil
	})
}

// packets is the number of packets counted and dropped so far.
func (s *sink) packets() (uint64, error) {
	var per []uint64
	if err := s.count.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("read sink counter: %w", err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

func (s *sink) Close() {
	for _, l := range s.links {
		l.Close()
	}
	s.links = nil
	s.prog.Close()
	s.count.Close()
}
