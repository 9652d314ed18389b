package xsk

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"
)

// fuzzVIPs is the VIP set FuzzRedirect runs against.
var fuzzVIPs = []VIP{
	{Addr: netip.MustParseAddr("203.0.113.10"), Proto: 6, Port: 80},
	{Addr: netip.MustParseAddr("203.0.113.11"), Proto: 17},
	{Addr: netip.MustParseAddr("203.0.113.12")},
	{Addr: netip.MustParseAddr("fd00::10"), Proto: 6, Port: 443},
	{Addr: netip.MustParseAddr("fd00::11"), Proto: 17},
}

// FuzzRedirect runs the XDP program (BPF_PROG_TEST_RUN) on arbitrary
// frames and compares its verdict with modelVerdict, an independent Go
// reading of the matching rules in doc.go. Seeds are the matching table's
// packets. Needs root; without it only the model runs on the seeds.
func FuzzRedirect(f *testing.F) {
	for _, pkt := range seedPackets() {
		f.Add(pkt)
	}
	var p *Program
	if os.Geteuid() == 0 {
		p = loadForTest(f)
		if err := p.ReplaceVIPs(fuzzVIPs); err != nil {
			f.Fatal(err)
		}
	} else {
		f.Log("not root: checking the model only, not the program")
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		want := modelVerdict(pkt, fuzzVIPs)
		if p == nil || len(pkt) < 14 {
			return // test-run rejects frames shorter than Ethernet
		}
		got, err := p.test(pkt)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("program %d, model %d for % x", got, want, pkt)
		}
	})
}

// modelVerdict is what xlb_redirect should return for pkt.
func modelVerdict(pkt []byte, vips []VIP) uint32 {
	set := map[VIP]bool{}
	addrs := map[netip.Addr]bool{}
	for _, v := range vips {
		set[v] = true
		addrs[v.Addr] = true
	}
	match := func(dst netip.Addr, proto uint8, port uint16, hasPort bool) bool {
		dst = dst.Unmap()
		if hasPort && port != 0 && set[VIP{dst, proto, port}] {
			return true
		}
		return set[VIP{dst, proto, 0}] || set[VIP{Addr: dst}]
	}
	hasPorts := func(p uint8) bool { return p == 6 || p == 17 || p == 132 }
	verdict := func(ok bool) uint32 {
		if ok {
			return xdpRedirect
		}
		return xdpPass
	}
	if len(pkt) < 14 {
		return xdpPass
	}
	etype, l3 := binary.BigEndian.Uint16(pkt[12:]), pkt[14:]
	if etype == 0x8100 || etype == 0x88a8 {
		if len(l3) < 4 {
			return xdpPass
		}
		etype, l3 = binary.BigEndian.Uint16(l3[2:]), l3[4:]
	}
	switch etype {
	case 0x0800:
		if len(l3) < 20 || l3[0]&0x0f < 5 {
			return xdpPass
		}
		ihl := int(l3[0]&0x0f) * 4
		proto := l3[9]
		dst := netip.AddrFrom4([4]byte(l3[16:20]))
		first := binary.BigEndian.Uint16(l3[6:])&0x1fff == 0
		var l4 []byte
		if ihl <= len(l3) {
			l4 = l3[ihl:]
		}
		if first && proto == 1 && len(l4) >= 8 {
			switch l4[0] {
			case 8:
				if addrs[dst] {
					return xdpRedirect
				}
			case 3, 11, 12:
				if len(l4) >= 28 && addrs[netip.AddrFrom4([4]byte(l4[8+12:8+16]))] {
					return xdpRedirect
				}
			}
		}
		var port uint16
		has := false
		if first && hasPorts(proto) && len(l4) >= 4 {
			port, has = binary.BigEndian.Uint16(l4[2:]), true
		}
		return verdict(match(dst, proto, port, has))
	case 0x86dd:
		if len(l3) < 40 {
			return xdpPass
		}
		dst := netip.AddrFrom16([16]byte(l3[24:40]))
		next, off := l3[6], 40
		first := true
	walk:
		for range 8 {
			h := l3[min(off, len(l3)):]
			switch next {
			case 0, 43, 60:
				if len(h) < 8 {
					return xdpPass
				}
				next, off = h[0], off+(int(h[1])+1)*8
			case 51:
				if len(h) < 8 {
					return xdpPass
				}
				next, off = h[0], off+(int(h[1])+2)*4
			case 44:
				if len(h) < 8 {
					return xdpPass
				}
				next, off = h[0], off+8
				if binary.BigEndian.Uint16(h[2:])&0xfff8 != 0 {
					first = false
					break walk
				}
			default:
				break walk
			}
		}
		var l4 []byte
		if off <= len(l3) {
			l4 = l3[off:]
		}
		if first && next == 58 && len(l4) >= 8 {
			switch l4[0] {
			case 128:
				if addrs[dst] {
					return xdpRedirect
				}
			case 1, 2, 3, 4:
				if len(l4) >= 48 && addrs[netip.AddrFrom16([16]byte(l4[8+8:8+24])).Unmap()] {
					return xdpRedirect
				}
			}
		}
		var port uint16
		has := false
		if first && hasPorts(next) && len(l4) >= 4 {
			port, has = binary.BigEndian.Uint16(l4[2:]), true
		}
		return verdict(match(dst, next, port, has))
	}
	return xdpPass
}

// TestModelAgreesWithTable keeps the model honest without root: it must
// give the matching table's expected verdicts.
func TestModelAgreesWithTable(t *testing.T) {
	for _, tt := range matchingTable() {
		if got := modelVerdict(tt.pkt, fuzzVIPs); got != tt.want {
			t.Errorf("%s: model %d, want %d", tt.name, got, tt.want)
		}
	}
}

func seedPackets() [][]byte {
	var out [][]byte
	for _, tt := range matchingTable() {
		out = append(out, tt.pkt)
	}
	return out
}
