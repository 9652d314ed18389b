package probepath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

var (
	unitAppMAC = [6]byte{0x02, 0xa0, 0, 0, 0, 0x02}
	unitNHMAC  = [6]byte{0x02, 0xb0, 0, 0, 0, 0x01}
)

// unitPath is a Path without a host: a registry and the routes of routes.
func unitPath(routes map[health.Key]Route) *Path {
	p := &Path{o: Options{Routes: func(k health.Key) (Route, error) {
		r, ok := routes[k]
		if !ok {
			return Route{}, fmt.Errorf("no route for %s", k)
		}
		return r, nil
	}}}
	p.reg.init()
	return p
}

// probePacket is the IP packet a probe socket bound to src:sport writes into
// the TUN towards dst: a TCP SYN, or a UDP datagram with payload.
func probePacket(src, dst netip.AddrPort, tcp bool, payload int) []byte {
	s := packettest.Spec{Src: src.Addr(), Dst: dst.Addr(), SrcPort: src.Port(), DstPort: dst.Port(), DF: true, Payload: packettest.Bytes(payload)}
	s.Proto = layers.IPProtocolUDP
	if tcp {
		s.Proto, s.SYN = layers.IPProtocolTCP, true
	}
	ip := packettest.Frame(s)[ethLen:]
	// Without the Ethernet padding of a short frame: the TUN gives the IP
	// packet alone.
	if src.Addr().Is4() {
		return ip[:binary.BigEndian.Uint16(ip[2:])]
	}
	return ip[:40+binary.BigEndian.Uint16(ip[4:])]
}

func mustTemplate(t *testing.T, s encap.Spec) *encap.Template {
	t.Helper()
	s.SrcMAC, s.DstMAC = unitAppMAC, unitNHMAC
	tm, err := encap.NewTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestEncapsulate: a probe's packet leaves inside its backend's template,
// exactly as a worker sends a client's: the inner packet unchanged behind
// the outer headers, the template's MACs, and for GUE a source port from
// the flow hash a worker computes for the probe's flow.
func TestEncapsulate(t *testing.T) {
	app4, app6 := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("fd00:18::2")
	be4, be6 := netip.MustParseAddr("198.18.1.100"), netip.MustParseAddr("fd00:18:1::100")
	const seed = 0x1ab5eed
	for _, tc := range []struct {
		kind     encap.Kind
		v4, tcp  bool
		outerLen int // bytes in front of the inner packet after Ethernet
		proto    uint8
	}{
		{encap.IPIP, true, true, 20, packet.ProtoIPIP},
		{encap.IPIP, false, false, 40, packet.ProtoIPv6},
		{encap.GUE, true, true, 28, packet.ProtoUDP},
		{encap.GUE, false, true, 48, packet.ProtoUDP},
		{encap.GRE, true, false, 24, packet.ProtoGRE},
		{encap.GRE, false, true, 44, packet.ProtoGRE},
		{encap.Direct, true, true, 0, packet.ProtoTCP},
		{encap.Direct, false, false, 0, packet.ProtoUDP},
	} {
		name := fmt.Sprintf("%s/v4=%v/tcp=%v", tc.kind, tc.v4, tc.tcp)
		t.Run(name, func(t *testing.T) {
			src, vip, be := app4, testVIP4, be4
			if !tc.v4 {
				src, vip, be = app6, testVIP6, be6
			}
			k := health.Key{Rule: "web", Backend: be}
			tm := mustTemplate(t, encap.Spec{Kind: tc.kind, Src: src, Dst: be})
			p := unitPath(map[health.Key]Route{k: {VIP: vip, Template: tm, Seed: seed}})
			proto := packet.ProtoUDP
			if tc.tcp {
				proto = packet.ProtoTCP
			}
			e := &entry{key: k}
			p.reg.put(flowOf(proto, netip.AddrPortFrom(src, 40001), netip.AddrPortFrom(vip, 8080)), e)
			in := probePacket(netip.AddrPortFrom(src, 40001), netip.AddrPortFrom(vip, 8080), tc.tcp, 10)

			buf := make([]byte, headroom+ethLen+maxPacket)
			copy(buf[headroom+ethLen:], in)
			var m packet.Meta
			off, l, got, v := p.encapsulate(buf, len(in), &m, 7, false)
			if v != sent || got != e {
				t.Fatalf("verdict %d, entry %p (want %p); note %v", v, got, e, e.note.Load())
			}
			out := buf[off : off+l]
			if !bytes.Equal(out[0:6], unitNHMAC[:]) || !bytes.Equal(out[6:12], unitAppMAC[:]) {
				t.Errorf("MACs %x → %x, want the template's", out[6:12], out[0:6])
			}
			if inner := out[ethLen+tc.outerLen:]; !bytes.Equal(inner, in) {
				t.Errorf("inner packet changed:\n got %x\nwant %x", inner, in)
			}
			if tc.kind == encap.Direct {
				return
			}
			var outerProto uint8
			var outerDst netip.Addr
			if tc.v4 {
				outerProto, outerDst = out[ethLen+9], netip.AddrFrom4([4]byte(out[ethLen+16:ethLen+20]))
			} else {
				outerProto, outerDst = out[ethLen+6], netip.AddrFrom16([16]byte(out[ethLen+24:ethLen+40]))
			}
			if outerProto != tc.proto || outerDst != be {
				t.Errorf("outer protocol %d to %s, want %d to %s", outerProto, outerDst, tc.proto, be)
			}
			if tc.kind == encap.GUE {
				ipLen := tc.outerLen - 8
				sport := binary.BigEndian.Uint16(out[ethLen+ipLen:])
				et := uint16(0x0800)
				if !tc.v4 {
					et = 0x86dd
				}
				var wm packet.Meta // the probe's packet as a worker parses it
				if r := packet.ParseInto(packettest.Cat(packettest.Eth(et), in), &wm); r != packet.OK {
					t.Fatal(r)
				}
				h := hash.SelectionHash(&wm, hash.AffinityNone, seed)
				h ^= h >> 32
				h ^= h >> 16
				if want := 0xc000 | uint16(h)&0x3fff; sport != want {
					t.Errorf("GUE source port %d, want %d (the flow hash's)", sport, want)
				}
			}
		})
	}
}

// TestGUESourcePortFollowsTheFlow: two probes of one backend (two local
// ports) get GUE source ports of their own, one probe always the same.
func TestGUESourcePortFollowsTheFlow(t *testing.T) {
	src, be := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.1.100")
	k := health.Key{Rule: "web", Backend: be}
	p := unitPath(map[health.Key]Route{k: {VIP: testVIP4, Template: mustTemplate(t, encap.Spec{Kind: encap.GUE, Src: src, Dst: be}), Seed: 1}})
	sport := func(local uint16) uint16 {
		p.reg.put(flowOf(packet.ProtoTCP, netip.AddrPortFrom(src, local), netip.AddrPortFrom(testVIP4, 80)), &entry{key: k})
		in := probePacket(netip.AddrPortFrom(src, local), netip.AddrPortFrom(testVIP4, 80), true, 0)
		buf := make([]byte, headroom+ethLen+maxPacket)
		copy(buf[headroom+ethLen:], in)
		var m packet.Meta
		off, _, _, v := p.encapsulate(buf, len(in), &m, 1, false)
		if v != sent {
			t.Fatalf("verdict %d", v)
		}
		return binary.BigEndian.Uint16(buf[off+ethLen+20:])
	}
	a, b, a2 := sport(40001), sport(40002), sport(40001)
	if a == b || a != a2 || a < 0xc000 {
		t.Errorf("GUE source ports %d, %d, again %d: want two ports of 49152.. and the same again", a, b, a2)
	}
}

// TestEncapsulateRefusals: what the reader does not send, and the note the
// probe gets.
func TestEncapsulateRefusals(t *testing.T) {
	src, be := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.1.100")
	k := health.Key{Rule: "web", Backend: be}
	small := mustTemplate(t, encap.Spec{Kind: encap.IPIP, Src: src, Dst: be, MTU: 576})
	v4only := mustTemplate(t, encap.Spec{Kind: encap.GRE, Src: src, Dst: be})
	for _, tc := range []struct {
		name     string
		route    *Route // nil: Routes fails
		register bool
		in       []byte
		want     verdict
		note     string
	}{
		{"no probe on that port", &Route{VIP: testVIP4, Template: small}, false,
			probePacket(netip.AddrPortFrom(src, 40001), netip.AddrPortFrom(testVIP4, 80), true, 0), unmatched, ""},
		{"not TCP or UDP", &Route{VIP: testVIP4, Template: small}, true,
			packettest.Frame(packettest.Spec{Src: src, Dst: testVIP4, Proto: layers.IPProtocolICMPv4, ICMPType: 8})[ethLen:], unmatched, ""},
		{"not IP", &Route{VIP: testVIP4, Template: small}, true, []byte{0x10, 0, 0, 0}, unmatched, ""},
		{"no route", nil, true,
			probePacket(netip.AddrPortFrom(src, 40001), netip.AddrPortFrom(testVIP4, 80), true, 0), noRoute, "no route to backend 198.18.1.100: no route for web/198.18.1.100"},
		{"no template", &Route{VIP: testVIP4}, true,
			probePacket(netip.AddrPortFrom(src, 40001), netip.AddrPortFrom(testVIP4, 80), true, 0), noRoute, "no encapsulation template"},
		{"too big", &Route{VIP: testVIP4, Template: small}, true,
			probePacket(netip.AddrPortFrom(src, 40001), netip.AddrPortFrom(testVIP4, 80), false, 600), tooBig,
			"a 628-byte probe packet does not fit the IPIP path to 198.18.1.100 (MTU 576 leaves 556 bytes inside)"},
		{"IPv6 inside IPv4", &Route{VIP: testVIP6, Template: v4only}, true,
			probePacket(netip.AddrPortFrom(netip.MustParseAddr("fd00:18::2"), 40001), netip.AddrPortFrom(testVIP6, 80), true, 0), failed,
			"GRE encapsulation to 198.18.1.100 refused a probe packet: unsupported-family"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes := map[health.Key]Route{}
			if tc.route != nil {
				routes[k] = *tc.route
			}
			p := unitPath(routes)
			e := &entry{key: k}
			if tc.register {
				var m packet.Meta
				frame := append(append([]byte{}, make([]byte, 12)...), 0x08, 0x00)
				if tc.in[0]>>4 == 6 {
					frame[12], frame[13] = 0x86, 0xdd
				}
				if packet.ParseInto(append(frame, tc.in...), &m) == packet.OK {
					p.reg.put(flowKey{src: m.Src, dst: m.Dst, sport: m.SrcPort, dport: m.DstPort, proto: m.Proto}, e)
				}
			}
			buf := make([]byte, headroom+ethLen+maxPacket)
			copy(buf[headroom+ethLen:], tc.in)
			var m packet.Meta
			_, _, _, v := p.encapsulate(buf, len(tc.in), &m, 1, false)
			if v != tc.want {
				t.Errorf("verdict %d, want %d", v, tc.want)
			}
			var note string
			if n := e.note.Load(); n != nil {
				note = (*n).Error()
			}
			if !strings.Contains(note, tc.note) || (tc.note == "") != (note == "") {
				t.Errorf("note %q, want %q", note, tc.note)
			}
		})
	}
}

// TestAnnotate: a connection error gets the data path's note, or on a
// timeout what was sent; errors.Is and net.Error still see through it, and
// io.EOF stays itself.
func TestAnnotate(t *testing.T) {
	e := &entry{key: health.Key{Rule: "web", Backend: netip.MustParseAddr("198.18.1.100")},
		dst: netip.MustParseAddrPort("203.0.113.10:80"), via: "IPIP to 198.18.1.100"}
	e.sent.Store(3)
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	err := e.annotate(timeout)
	if err.Error() != timeout.Error()+" (data path: no answer to 3 packet(s) sent to 203.0.113.10:80 inside IPIP to 198.18.1.100)" {
		t.Errorf("timeout: %v", err)
	}
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("the timeout is hidden: %#v", err)
	}
	refused := errors.New("connection refused")
	if got := e.annotate(refused); got != refused {
		t.Errorf("a refusal proves the path: %v", got)
	}
	unreach := &net.OpError{Op: "dial", Net: "tcp6", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	if got := e.annotate(unreach); !strings.HasSuffix(got.Error(), "(data path: 3 packet(s) sent to 203.0.113.10:80 inside IPIP to 198.18.1.100 drew an ICMP unreachable)") || !errors.Is(got, syscall.ENETUNREACH) {
		t.Errorf("unreachable: %v", got)
	}
	if got := e.annotate(io.EOF); got != io.EOF {
		t.Errorf("io.EOF became %v", got)
	}
	e.noteErr(errors.New("no route to backend 198.18.1.100: no next hop"))
	if got := e.annotate(refused); !strings.HasSuffix(got.Error(), "(data path: no route to backend 198.18.1.100: no next hop)") || !errors.Is(got, refused) {
		t.Errorf("noted: %v", got)
	}
	if got := e.annotate(context.DeadlineExceeded); !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("context deadline hidden: %v", got)
	}
}

// TestRegistry: a flow's newest probe wins; released registrations live on
// for their socket's last packets and are swept after the linger only; a
// SYN read before its probe registered is handed to the registration, once.
func TestRegistry(t *testing.T) {
	var r registry
	r.init()
	r.sweepAt = 3
	vip := netip.MustParseAddrPort("203.0.113.10:80")
	k1 := flowOf(packet.ProtoTCP, netip.MustParseAddrPort("198.18.0.2:1"), vip)
	k2 := flowOf(packet.ProtoTCP, netip.MustParseAddrPort("198.18.0.2:2"), vip)
	k3 := flowOf(packet.ProtoTCP, netip.MustParseAddrPort("198.18.0.2:1"), netip.MustParseAddrPort("203.0.113.11:80"))
	get := func(k flowKey) *entry { return r.get(k, nil, false) }
	a, b, c := &entry{}, &entry{}, &entry{}
	r.put(k1, a)
	if get(k1) != a || get(k2) != nil || get(k3) != nil {
		t.Fatal("get after put (k3: the same port to another VIP is another probe)")
	}
	a.release()
	if get(k1) != a {
		t.Error("a released registration is gone at once")
	}
	r.put(k1, b) // the kernel gave the 4-tuple to a new socket
	if get(k1) != b {
		t.Error("the newer probe does not win")
	}
	b.releasedAt.Store(time.Now().Add(-2 * lingerAfterClose).UnixNano())
	r.put(k2, c) // third put: a sweep
	if get(k1) != nil || get(k2) != c || r.len() != 1 {
		t.Errorf("after the sweep: k1 %p, k2 %p, %d entries", get(k1), get(k2), r.len())
	}

	syn := []byte("syn")
	if e := r.get(k3, syn, true); e != nil {
		t.Fatal("an unregistered flow has a probe")
	}
	syn[0] = 'X' // the reader's buffer is reused: the parked packet is a copy
	if got := r.put(k3, a); len(got) != 1 || string(got[0]) != "syn" {
		t.Errorf("registration got %q, want the parked SYN", got)
	}
	if got := r.put(k3, a); len(got) != 0 {
		t.Errorf("a second registration got %q again", got)
	}
}
