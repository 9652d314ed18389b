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
