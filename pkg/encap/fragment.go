package encap

import (
	"encoding/binary"

	"github.com/xlbnet/xlb/pkg/packet"
)

// FragmentCount returns how many frames the encapsulated form of the
// packet m describes takes at the template's MTU: 1 when it fits (and
// always for Direct, which never fragments).
func (t *Template) FragmentCount(m *packet.Meta) int {
	inLen := int(m.L3End) - int(m.L3Off)
	if inLen+t.overhead <= t.mtu || t.kind == Direct {
		return 1
	}
	chunk := t.fragChunk()
	payload := t.overhead - t.ipLen + inLen
	return (payload + chunk - 1) / chunk
}

// fragChunk is the payload bytes per outer fragment: what fits after the
// outer header (and the IPv6 fragment header), rounded down to 8.
func (t *Template) fragChunk() int {
	fh := 0
	if t.outer == packet.IPv6 {
		fh = fragHeaderSize
	}
	return (t.mtu - t.ipLen - fh) &^ 7
}

// Fragment encapsulates the frame buf[off:off+n] like Encap, but splits
// the outer packet into fragments that fit the MTU (RFC 2003 §5.1: the
// tunnel entry point fragments the outer datagram; RFC 2473 §7 for an
// IPv6 outer header, which gets a fragment header). The first fragment is
// built in place and returned as buf[newOff:newOff+newLen]; fragment i+1
// is written to extra[i][:extraLen[i]] for i < nExtra. The caller supplies
// FragmentCount(m)-1 spare frames, each at least MTU+18 bytes long (or
// exactly as long as needed: every length is checked before anything is
// written). All fragments share the outer identification (ipID for IPv4;
// for IPv6 ipID in the low 16 bits and flow-hash bits above).
//
// Encap decides the policy (NeedFragments only for IPv4 without DF);
// Fragment does what it is asked for any inner packet. When the packet
// fits it is Encap. Results other than OK leave every frame untouched:
// DropNoHeadroom when the spare frames are too few or too short, DropTooBig
// for Direct. It never allocates.
func (t *Template) Fragment(buf []byte, off, n int, m *packet.Meta, flowHash uint64, ipID uint16, extra [][]byte, extraLen []int) (newOff, newLen, nExtra int, res Result) {
	if r := t.check(buf, off, n, m); r != OK {
		return off, n, 0, r
	}
	cnt := t.FragmentCount(m)
	if cnt == 1 {
		if inLen := int(m.L3End) - int(m.L3Off); inLen+t.overhead > t.mtu {
			return off, n, 0, DropTooBig // Direct
		}
		o, l, r := t.Encap(buf, off, n, m, flowHash, ipID)
		return o, l, 0, r
	}
	if len(extra) < cnt-1 || len(extraLen) < cnt-1 {
		return off, n, 0, DropNoHeadroom
	}
	l2 := ethHeaderSize
	if m.HasVLAN {
		l2 += vlanTagSize
	}
	fh := 0
	if t.outer == packet.IPv6 {
		fh = fragHeaderSize
	}
	l3 := off + int(m.L3Off)
	end := off + int(m.L3End)
	inLen := end - l3
	chunk := t.fragChunk()
	x := t.overhead - t.ipLen // UDP/GRE bytes, carried by the first fragment
	hl := l2 + t.ipLen + fh   // headers of every fragment
	for i := 1; i < cnt; i++ {
		if len(extra[i-1]) < hl+min(chunk, x+inLen-i*chunk) {
			return off, n, 0, DropNoHeadroom
		}
	}
	start := l3 - x - hl
	if start < 0 {
		return off, n, 0, DropNoHeadroom
	}
	proto := t.tunnelProto(m)
	id6 := uint32(flowHash>>32)&0xffff0000 | uint32(ipID)

	// The rest first: they only read the inner packet beyond the first
	// chunk, which the first fragment's headers (all in front of l3) never
	// touch.
	for i := 1; i < cnt; i++ {
		fo := i * chunk // offset in the outer payload
		data := buf[l3+fo-x : l3+min(fo-x+chunk, inLen)]
		f := extra[i-1]
		t.putL2(f[:l2], m)
		last := i == cnt-1
		t.putFragHeaders(f[l2:hl], m, proto, fh+len(data), fo, last, flowHash, ipID, id6)
		copy(f[hl:], data)
		extraLen[i-1] = hl + len(data)
	}

	t.putL2(buf[start:start+l2], m)
	t.putFragHeaders(buf[start+l2:start+hl], m, proto, fh+chunk, 0, false, flowHash, ipID, id6)
	tun := buf[start+hl : l3]
	copy(tun, t.hdr[t.ipLen:t.overhead])
	t.putTunnel(tun, buf[l3:end], m, flowHash)
	return start, hl + chunk, cnt - 1, OK
}

// putFragHeaders writes the outer IP header (and for IPv6 the fragment
// header) of the fragment at outer-payload offset fo, whose IP payload is
// payload bytes.
func (t *Template) putFragHeaders(h []byte, m *packet.Meta, proto uint8, payload, fo int, last bool, flowHash uint64, ipID uint16, id6 uint32) {
	copy(h[:t.ipLen], t.hdr[:t.ipLen])
	if t.outer == packet.IPv4 {
		ff := uint16(fo / 8)
		if !last {
			ff |= packet.IPv4FlagMF
		}
		// Fragments never carry DF.
		t.putIP(h, m, payload, proto, flowHash, ipID, ff)
		return
	}
	t.putIP(h, m, payload, packet.IPv6ExtFragment, flowHash, ipID, 0)
	f := h[t.ipLen : t.ipLen+fragHeaderSize]
	f[0] = proto
	f[1] = 0
	w := uint16(fo)
	if !last {
		w |= 1
	}
	binary.BigEndian.PutUint16(f[2:], w)
	binary.BigEndian.PutUint32(f[4:], id6)
}
