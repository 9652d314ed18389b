package encap_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/packet"
)

// fuzzTemplate picks a template from the fuzzer's choice bytes.
func fuzzTemplate(kind uint8, v6 bool, mtu uint16) (*encap.Template, error) {
	k := encap.Kind(kind%4) + encap.IPIP
	s := spec(k, v6)
	lo := 576
	if v6 {
		lo = 1280 + encap.Overhead(k, true)
	}
	s.MTU = lo + int(mtu)%(9216-lo)
	return encap.NewTemplate(s)
}

// FuzzEncap feeds Parse-OK frames to Encap under every kind and checks the
// invariants: a valid outer packet around the intact inner packet, a valid
// ICMP error quoting it, fragments that reassemble to it, or a refusal that
// leaves the frame alone. Never a bad-meta result for a parsed frame.
func FuzzEncap(f *testing.F) {
	for i, fx := range fixtures() {
		f.Add(fx.in, uint8(i), i%2 == 0, uint16(i*97), uint64(testHash)+uint64(i))
	}
	f.Fuzz(func(t *testing.T, in []byte, kind uint8, v6 bool, mtu uint16, hash uint64) {
		m, r := packet.Parse(in)
		if r != packet.OK {
			return
		}
		tmpl, err := fuzzTemplate(kind, v6, mtu)
		if err != nil {
			t.Fatal(err)
		}
		buf, off, n := chunk(in)
		before := bytes.Clone(buf)
		o, l, res := tmpl.Encap(buf, off, n, &m, hash, 0x4242)
		l2 := l2len(&m)
		switch res {
		case encap.OK:
			if l != l2+tmpl.Overhead()+int(m.L3End-m.L3Off) {
				t.Fatalf("length %d, want %d", l, l2+tmpl.Overhead()+int(m.L3End-m.L3Off))
			}
			verifyEncap(t, tmpl, in, &m, buf[o:o+l], l2+tmpl.Overhead())
		case encap.TooBig:
			verifyTooBig(t, tmpl, in, &m, buf[o:o+l])
		case encap.NeedFragments:
			if !bytes.Equal(buf, before) {
				t.Fatal("NeedFragments changed the frame")
			}
			cnt := tmpl.FragmentCount(&m)
			spare := make([][]byte, cnt-1)
			for i := range spare {
				spare[i] = make([]byte, tmpl.MTU()+18)
			}
			sizes := make([]int, cnt-1)
			o, l, k, r := tmpl.Fragment(buf, off, n, &m, hash, 0x4242, spare, sizes)
			if r != encap.OK || k != cnt-1 {
				t.Fatalf("Fragment = %v, %d extra; want ok, %d", r, k, cnt-1)
			}
			frames := [][]byte{buf[o : o+l]}
			for i := range k {
				frames = append(frames, spare[i][:sizes[i]])
			}
			verifyFragments(t, tmpl, in, &m, frames)
		case encap.DropTooBig, encap.DropFamily:
			if !bytes.Equal(buf, before) || o != off || l != n {
				t.Fatalf("%v changed the frame", res)
			}
		default:
			t.Fatalf("Encap = %v for a frame Parse accepted", res)
		}
	})
}

// TestWriteFuzzSeeds writes the fixtures as the committed seed corpus of
// FuzzEncap under -update (go test also replays the files as tests).
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("writes testdata/fuzz/FuzzEncap only with -update")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzEncap")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, fx := range fixtures() {
		// The fixture's own template, in fuzzTemplate's terms.
		v6 := fx.spec.Dst.Is6()
		tmpl, err := encap.NewTemplate(fx.spec)
		if err != nil {
			t.Fatal(err)
		}
		lo := 576
		if v6 {
			lo = 1280 + tmpl.Overhead()
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint8(%d)\nbool(%v)\nuint16(%d)\nuint64(%d)\n",
			fx.in, uint8(fx.spec.Kind-encap.IPIP), v6, uint16(max(tmpl.MTU()-lo, 0)), uint64(testHash)^uint64(i))
		if err := os.WriteFile(filepath.Join(dir, fx.name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzEncapAnyMeta hands Encap, TooBigReply and Fragment a Meta that need
// not describe the frame (a caller bug): they must not panic, and every
// refusal must leave the buffer alone.
func FuzzEncapAnyMeta(f *testing.F) {
	f.Add(frame(-1, 0x0800, tcp4), uint16(14), uint16(34), uint16(70), uint8(4), uint8(0), uint8(1), false)
	f.Add(frame(frameVLAN, 0x86dd, tcp6), uint16(18), uint16(58), uint16(178), uint8(6), uint8(0xff), uint8(2), true)
	f.Add(frame(-1, 0x0800, big4), uint16(14), uint16(34), uint16(1514), uint8(4), uint8(0x10), uint8(3), true)
	f.Fuzz(func(t *testing.T, in []byte, l3, l4, end uint16, fam, bits, kind uint8, v6 bool) {
		m := packet.Meta{L3Off: l3, L4Off: l4, L3End: end, Family: packet.Family(fam)}
		m.HasVLAN = bits&1 != 0
		m.DF = bits&2 != 0
		m.Frag = packet.FragState(bits >> 2 & 3)
		m.Proto = [4]uint8{packet.ProtoTCP, packet.ProtoUDP, packet.ProtoICMP, packet.ProtoICMPv6}[bits>>4&3]
		m.ICMPType = bits
		tmpl, err := fuzzTemplate(kind, v6, uint16(bits)*7)
		if err != nil {
			t.Fatal(err)
		}
		buf, off, n := chunk(in)
		before := bytes.Clone(buf)
		unchanged := func(what string, r encap.Result) {
			if !bytes.Equal(buf, before) {
				t.Fatalf("%s: %v changed the buffer", what, r)
			}
		}
		if _, _, r := tmpl.Encap(buf, off, n, &m, 1, 1); r != encap.OK && r != encap.TooBig {
			unchanged("Encap", r)
		}
		buf, off, n = chunk(in)
		if _, _, r := encap.TooBigReply(buf, off, n, &m, ourMAC, 1400, 1); r != encap.TooBig {
			unchanged("TooBigReply", r)
		}
		buf, off, n = chunk(in)
		spare := [][]byte{make([]byte, 9300), make([]byte, 9300)}
		if _, _, _, r := tmpl.Fragment(buf, off, n, &m, 1, 1, spare, make([]int, 2)); r != encap.OK && r != encap.TooBig {
			unchanged("Fragment", r)
		}
	})
}
