package encap_test

import (
	"bytes"
	"testing"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

func parse(t *testing.T, f []byte) packet.Meta {
	t.Helper()
	m, r := packet.Parse(f)
	if r != packet.OK {
		t.Fatalf("Parse = %v", r)
	}
	return m
}

// TestTooBigReplyRefuses covers the packets RFC 1122 §3.2.2 and RFC 4443
// §2.4(e) forbid an error about, and one it allows for contrast.
func TestTooBigReplyRefuses(t *testing.T) {
	big := func(src string, proto uint8, ff uint16, l4 []byte) []byte {
		return frame(-1, 0x0800, packettest.IPv4{Src: src, Dst: vip4, Proto: proto, Frag: ff}.Build(l4))
	}
	big6 := func(src string, nh uint8, l4 []byte) []byte {
		return frame(-1, 0x86dd, packettest.IPv6{Src: src, Dst: vip6, Next: nh}.Build(l4))
	}
	payload := packettest.Pattern(1400, 3, 7)
	tests := []struct {
		name string
		in   []byte
		want encap.Result
	}{
		{"tcp from a unicast client", big(client4, 6, df, packettest.L4Checksum(client4, vip4, 6, packettest.TCP(1, 2, synFlag, payload...))), encap.TooBig},
		{"echo request", big(client4, 1, df, packettest.L4Checksum("", "", 1, packettest.ICMP(8, 0, 1, payload...))), encap.TooBig},
		{"echo request v6", big6(client6, 58, packettest.L4Checksum(client6, vip6, 58, packettest.ICMP(128, 0, 1, payload...))), encap.TooBig},
		{"source quench", big(client4, 1, df, packettest.L4Checksum("", "", 1, packettest.ICMP(4, 0, 0, payload...))), encap.DropTooBig},
		{"redirect", big(client4, 1, df, packettest.L4Checksum("", "", 1, packettest.ICMP(5, 0, 0, payload...))), encap.DropTooBig},
		{"time exceeded", big(client4, 1, df, packettest.L4Checksum("", "", 1, packettest.ICMP(11, 0, 0, packettest.IPv4{Src: vip4, Dst: client4, Proto: 17}.Build(packettest.L4Checksum(vip4, client4, 17, packettest.UDP(1, 2, payload...)))...))), encap.DropTooBig},
		{"icmpv6 error", big6(client6, 58, packettest.L4Checksum(client6, vip6, 58, packettest.ICMP(1, 4, 0, packettest.IPv6{Src: vip6, Dst: client6, Next: 17}.Build(packettest.L4Checksum(vip6, client6, 17, packettest.UDP(1, 2, payload...)))...))), encap.DropTooBig},
		{"icmpv6 unknown error type 127", big6(client6, 58, packettest.L4Checksum(client6, vip6, 58, packettest.ICMP(127, 0, 0, payload...))), encap.DropTooBig},
		{"broadcast source", big("255.255.255.255", 6, df, packettest.L4Checksum("255.255.255.255", vip4, 6, packettest.TCP(1, 2, synFlag, payload...))), encap.DropTooBig},
		{"multicast source", big("224.0.0.5", 6, df, packettest.L4Checksum("224.0.0.5", vip4, 6, packettest.TCP(1, 2, synFlag, payload...))), encap.DropTooBig},
		{"loopback source", big("127.0.0.1", 6, df, packettest.L4Checksum("127.0.0.1", vip4, 6, packettest.TCP(1, 2, synFlag, payload...))), encap.DropTooBig},
		{"unspecified source", big("0.0.0.0", 6, df, packettest.L4Checksum("0.0.0.0", vip4, 6, packettest.TCP(1, 2, synFlag, payload...))), encap.DropTooBig},
		{"v6 multicast source", big6("ff02::1", 6, packettest.L4Checksum("ff02::1", vip6, 6, packettest.TCP(1, 2, synFlag, payload...))), encap.DropTooBig},
		{"v6 loopback source", big6("::1", 6, packettest.L4Checksum("::1", vip6, 6, packettest.TCP(1, 2, synFlag, payload...))), encap.DropTooBig},
		{"v4 non-first fragment", big(client4, 17, 100, payload), encap.DropTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := parse(t, tt.in)
			buf, off, n := chunk(tt.in)
			before := bytes.Clone(buf)
			o, l, r := encap.TooBigReply(buf, off, n, &m, ourMAC, 1000, testIPID)
			if r != tt.want {
				t.Fatalf("TooBigReply = %v, want %v", r, tt.want)
			}
			if r == encap.TooBig {
				if l != encap.TooBigReplyLen(&m) {
					t.Errorf("reply length %d, TooBigReplyLen %d", l, encap.TooBigReplyLen(&m))
				}
				if om := parse(t, buf[o:o+l]); !om.HasInner || om.ICMPType != 3 && om.ICMPType != 2 {
					t.Errorf("reply is not a too-big error: %+v", om)
				}
				return
			}
			if o != off || l != n || !bytes.Equal(buf, before) {
				t.Errorf("refused reply changed the frame")
			}
		})
	}
}

// TestTooBigReplyClampsMTU: an IPv6 packet-too-big never announces less
// than 1280, an IPv4 frag-needed never less than 68.
func TestTooBigReplyClampsMTU(t *testing.T) {
	for _, tt := range []struct {
		in   []byte
		mtu  int
		want uint32
	}{
		{frame(-1, 0x86dd, big6), 1000, 1280},
		{frame(-1, 0x86dd, big6), 70000, 65535},
		{frame(-1, 0x0800, big4DF), 10, 68},
		{frame(-1, 0x0800, big4DF), 1400, 1400},
	} {
		m := parse(t, tt.in)
		buf, off, n := chunk(tt.in)
		o, l, r := encap.TooBigReply(buf, off, n, &m, ourMAC, tt.mtu, 1)
		if r != encap.TooBig {
			t.Fatalf("TooBigReply = %v", r)
		}
		if om := parse(t, buf[o:o+l]); om.ICMPMTU != tt.want {
			t.Errorf("mtu %d announced as %d, want %d", tt.mtu, om.ICMPMTU, tt.want)
		}
	}
}

func TestEncapRefusesBadFrames(t *testing.T) {
	tmpl, err := encap.NewTemplate(spec(encap.GUE, false))
	if err != nil {
		t.Fatal(err)
	}
	in := frame(-1, 0x0800, tcp4)
	good := parse(t, in)
	tests := []struct {
		name    string
		buf     func() ([]byte, int, int)
		mod     func(*packet.Meta)
		want    encap.Result
		tooBigR encap.Result // TooBigReply's answer for the same frame
	}{
		{name: "no headroom", buf: func() ([]byte, int, int) { return bytes.Clone(in), 0, len(in) }, want: encap.DropNoHeadroom, tooBigR: encap.DropNoHeadroom},
		{name: "headroom one short", buf: func() ([]byte, int, int) {
			b := make([]byte, 27+len(in))
			copy(b[27:], in)
			return b, 27, len(in)
		}, want: encap.DropNoHeadroom, tooBigR: encap.DropNoHeadroom}, // both need 28 bytes in front
		{name: "headroom exactly enough", buf: func() ([]byte, int, int) {
			b := make([]byte, 28+len(in))
			copy(b[28:], in)
			return b, 28, len(in)
		}, want: encap.OK, tooBigR: encap.TooBig},
		{name: "L3End beyond n", mod: func(m *packet.Meta) { m.L3End = uint16(len(in) + 1) }, want: encap.DropBadMeta, tooBigR: encap.DropBadMeta},
		{name: "no family", mod: func(m *packet.Meta) { m.Family = packet.FamilyNone }, want: encap.DropBadMeta, tooBigR: encap.DropBadMeta},
		{name: "L3Off inside Ethernet", mod: func(m *packet.Meta) { m.L3Off = 4 }, want: encap.DropBadMeta, tooBigR: encap.DropBadMeta},
		{name: "IPv4 shorter than its header", mod: func(m *packet.Meta) { m.L3End = m.L3Off + 10; m.L4Off = m.L3End }, want: encap.DropBadMeta, tooBigR: encap.DropBadMeta},
		{name: "IPv6 shorter than its header", mod: func(m *packet.Meta) { m.Family, m.L3End, m.L4Off = packet.IPv6, m.L3Off+30, m.L3Off+30 }, want: encap.DropBadMeta, tooBigR: encap.DropBadMeta},
		{name: "n beyond buf", buf: func() ([]byte, int, int) { b, o, n := chunk(in); return b, o, n + 100 }, want: encap.DropBadMeta, tooBigR: encap.DropBadMeta},
		{name: "negative off", buf: func() ([]byte, int, int) { b, _, n := chunk(in); return b, -1, n }, want: encap.DropBadMeta, tooBigR: encap.DropBadMeta},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good
			if tt.mod != nil {
				tt.mod(&m)
			}
			get := tt.buf
			if get == nil {
				get = func() ([]byte, int, int) { return chunk(in) }
			}
			buf, off, n := get()
			before := bytes.Clone(buf)
			o, l, r := tmpl.Encap(buf, off, n, &m, testHash, 1)
			if r == encap.OK && tt.want == encap.OK {
				if o != 0 {
					t.Errorf("Encap used %d bytes less headroom than it could", o)
				}
				verifyEncap(t, tmpl, in, &m, buf[o:o+l], 14+28)
			} else if r != tt.want || o != off || l != n || !bytes.Equal(buf, before) {
				t.Errorf("Encap = (%d, %d, %v), want (%d, %d, %v) and the frame untouched", o, l, r, off, n, tt.want)
			}
			buf, off, n = get()
			if _, _, r := encap.TooBigReply(buf, off, n, &m, ourMAC, 1000, 1); r != tt.tooBigR {
				t.Errorf("TooBigReply = %v, want %v", r, tt.tooBigR)
			}
			buf, off, n = get()
			if _, _, k, r := tmpl.Fragment(buf, off, n, &m, testHash, 1, nil, nil); r != tt.want || k != 0 {
				t.Errorf("Fragment = %v with %d extra, want %v", r, k, tt.want)
			}
		})
	}
}

func TestFragmentNeedsSpareFrames(t *testing.T) {
	tmpl, err := encap.NewTemplate(spec(encap.GUE, false))
	if err != nil {
		t.Fatal(err)
	}
	in := frame(-1, 0x0800, big4)
	m := parse(t, in)
	if c := tmpl.FragmentCount(&m); c != 2 {
		t.Fatalf("FragmentCount = %d, want 2", c)
	}
	for _, tt := range []struct {
		name  string
		spare [][]byte
		sizes []int
	}{
		{"none", nil, nil},
		{"no sizes", [][]byte{make([]byte, 2048)}, nil},
		{"one byte short", [][]byte{make([]byte, 14+20+len(gueHdr(big4))-1480-1)}, make([]int, 1)},
	} {
		buf, off, n := chunk(in)
		before := bytes.Clone(buf)
		o, l, k, r := tmpl.Fragment(buf, off, n, &m, testHash, 1, tt.spare, tt.sizes)
		if r != encap.DropNoHeadroom || k != 0 || o != off || l != n || !bytes.Equal(buf, before) {
			t.Errorf("%s: Fragment = (%d, %d, %d, %v), want DropNoHeadroom with the frame untouched", tt.name, o, l, k, r)
		}
	}
	// Exactly long enough is enough.
	buf, off, n := chunk(in)
	spare := [][]byte{make([]byte, 14+20+len(gueHdr(big4))-1480)}
	if _, _, k, r := tmpl.Fragment(buf, off, n, &m, testHash, 1, spare, make([]int, 1)); r != encap.OK || k != 1 {
		t.Errorf("Fragment with an exact spare frame = %v, %d", r, k)
	}
	// A packet that fits is just encapsulated.
	small := frame(-1, 0x0800, udp4)
	sm := parse(t, small)
	buf, off, n = chunk(small)
	o, l, k, r := tmpl.Fragment(buf, off, n, &sm, testHash, testIPID, nil, nil)
	if r != encap.OK || k != 0 || tmpl.FragmentCount(&sm) != 1 {
		t.Fatalf("Fragment of a small packet = %v, %d", r, k)
	}
	verifyEncap(t, tmpl, small, &sm, buf[o:o+l], o+14+28-o)
	// Direct never fragments.
	d, err := encap.NewTemplate(withMTU(spec(encap.Direct, false), 1000))
	if err != nil {
		t.Fatal(err)
	}
	buf, off, n = chunk(in)
	if d.FragmentCount(&m) != 1 {
		t.Errorf("Direct FragmentCount = %d", d.FragmentCount(&m))
	}
	if _, _, _, r := d.Fragment(buf, off, n, &m, testHash, 1, nil, nil); r != encap.DropTooBig {
		t.Errorf("Direct Fragment = %v, want DropTooBig", r)
	}
}
