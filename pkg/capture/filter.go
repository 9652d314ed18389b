package capture

import (
	"encoding/binary"
	"net/netip"

	"github.com/xlbnet/xlb/pkg/packet"
)

// Filter says which packets a capture takes. The zero Filter takes
// everything at both points; each field set narrows it. Addresses and
// ports are those of the packet as received (the client's flow), at
// either point.
type Filter struct {
	Points Point // RX, TX or Both; 0 means Both

	ByRule  bool
	Rule    uint16 // rule slot
	Backend netip.Addr

	// Verdicts is a set of dataplane verdicts, bit 1<<v for verdict v;
	// 0 takes every verdict.
	Verdicts uint8
	ByReason bool
	Reason   uint8 // dataplane.Reason

	Src, Dst         netip.Prefix // the packet's source and destination; invalid = any
	SrcPort, DstPort uint16       // 0 = any
	Port             uint16       // either port; 0 = any
	Proto            uint8        // IP protocol; 0 = any

	// compiled by compile
	points   Point
	backend  [16]byte
	src, dst prefix
}

// prefix is a netip.Prefix over the IPv4-mapped 128-bit form the parser
// uses, as two masked words.
type prefix struct {
	hi, lo, mhi, mlo uint64
	set              bool
}

func compilePrefix(p netip.Prefix) prefix {
	if !p.IsValid() {
		return prefix{}
	}
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	a := p.Addr().As16()
	var q prefix
	q.set = true
	q.mhi, q.mlo = maskWords(bits)
	q.hi = binary.BigEndian.Uint64(a[:8]) & q.mhi
	q.lo = binary.BigEndian.Uint64(a[8:]) & q.mlo
	return q
}

func maskWords(bits int) (hi, lo uint64) {
	switch {
	case bits <= 0:
		return 0, 0
	case bits <= 64:
		return ^uint64(0) << (64 - bits), 0
	case bits < 128:
		return ^uint64(0), ^uint64(0) << (128 - bits)
	}
	return ^uint64(0), ^uint64(0)
}

func (q *prefix) match(a *[16]byte) bool {
	return !q.set || binary.BigEndian.Uint64(a[:8])&q.mhi == q.hi && binary.BigEndian.Uint64(a[8:])&q.mlo == q.lo
}

func (f *Filter) compile() {
	f.points = f.Points
	if f.points == 0 {
		f.points = Both
	}
	if f.Backend.IsValid() {
		f.backend = f.Backend.As16() // IPv4 mapped, as in the snapshot
	}
	f.src, f.dst = compilePrefix(f.Src), compilePrefix(f.Dst)
}

// matchFlow checks the packet's own headers. A frame that did not parse
// far enough to have them matches only a filter without them.
func (f *Filter) matchFlow(m *packet.Meta) bool {
	if !f.src.set && !f.dst.set && f.SrcPort == 0 && f.DstPort == 0 && f.Port == 0 && f.Proto == 0 {
		return true
	}
	if m.Family == packet.FamilyNone {
		return false
	}
	return f.src.match(&m.Src) && f.dst.match(&m.Dst) &&
		(f.SrcPort == 0 || m.SrcPort == f.SrcPort) &&
		(f.DstPort == 0 || m.DstPort == f.DstPort) &&
		(f.Port == 0 || m.SrcPort == f.Port || m.DstPort == f.Port) &&
		(f.Proto == 0 || m.Proto == f.Proto)
}

// matchSlots checks rule and backend, which are known before the frame
// is rewritten.
func (f *Filter) matchSlots(o *Outcome) bool {
	return (!f.ByRule || o.HasRule && o.Rule == f.Rule) &&
		(!f.Backend.IsValid() || o.HasBackend && o.BackendAddr == f.backend)
}

// matchOutcome checks verdict and reason, final only after the frame was
// handled.
func (f *Filter) matchOutcome(o *Outcome) bool {
	return (f.Verdicts == 0 || f.Verdicts&(1<<o.Verdict) != 0) &&
		(!f.ByReason || o.Reason == f.Reason)
}
