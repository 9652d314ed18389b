package hash

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
)

// FuzzSum64 checks that the fixed-size path equals the generic XXH64 over
// the key's canonical encoding, for any key and seed.
func FuzzSum64(f *testing.F) {
	f.Add(make([]byte, 40), uint64(0))
	f.Add(sanityBuffer(40), uint64(xxhPrime32))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		var raw [KeySize]byte
		copy(raw[:], b)
		var k Key
		copy(k.Src[:], raw[0:16])
		copy(k.Dst[:], raw[16:32])
		k.SrcPort = binary.LittleEndian.Uint16(raw[32:])
		k.DstPort = binary.LittleEndian.Uint16(raw[34:])
		k.Proto = raw[36]
		k.Kind = TupleKind(raw[37])
		enc := k.Encode()
		if got, want := Sum64(&k, seed), Bytes(enc[:], seed); got != want {
			t.Fatalf("Sum64 = %#x, Bytes(Encode) = %#x", got, want)
		}
		// The same bytes as a flow: SumTuple must hash what MakeKey builds.
		tu := packet.Tuple{Src: k.Src, Dst: k.Dst, SrcPort: k.SrcPort, DstPort: k.DstPort, Proto: k.Proto}
		for _, kind := range []TupleKind{TupleNone, Tuple2, Tuple3, Tuple5, k.Kind} {
			mk := MakeKey(&tu, kind)
			if got, want := SumTuple(&tu, kind, seed), Sum64(&mk, seed); got != want {
				t.Fatalf("kind %d: SumTuple = %#x, Sum64(MakeKey) = %#x", kind, got, want)
			}
		}
	})
}

// FuzzBuild builds tables from arbitrary weight sets and checks the
// invariants: every slot owned, each share within one slot of M·w/W,
// the same table from reversed input.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{1, 4}, uint16(0), uint64(1))
	f.Add([]byte{0, 2, 6}, uint16(3), uint64(0x5eed))
	f.Add([]byte{0, 0, 0}, uint16(7), uint64(9))
	f.Add([]byte{255, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, uint16(1), uint64(2))
	primes := []uint32{2, 3, 13, 251, 1009, 4099, 65537}
	f.Fuzz(func(t *testing.T, weights []byte, mSel uint16, seed uint64) {
		if len(weights) > 300 {
			weights = weights[:300]
		}
		m := primes[int(mSel)%len(primes)]
		bs := make([]Backend, len(weights))
		var total uint64
		for i, w := range weights {
			bs[i] = Backend{Name: fmt.Sprintf("b%d", i), ID: uint32(i), Weight: uint32(w) * 3}
			total += uint64(bs[i].Weight)
		}
		tab, err := Build(bs, m, seed)
		if err != nil {
			t.Fatal(err)
		}
		ids := tab.SlotIDs()
		if !slices.Equal(ids, walkFill(t, bs, m, seed)) {
			t.Fatal("the fill differs from the walk")
		}
		if len(bs) == 0 {
			if ids != nil {
				t.Fatal("empty set built slots")
			}
			return
		}
		if total == 0 {
			for i := range bs {
				bs[i].Weight = 1
			}
			total = uint64(len(bs))
		}
		count := make([]uint64, len(bs))
		for _, id := range ids {
			if int(id) >= len(bs) {
				t.Fatalf("slot holds unknown ID %d", id)
			}
			count[id]++
		}
		for i, b := range bs {
			exact := uint64(m) * uint64(b.Weight) // compare count·W with M·w ± W
			if c := count[i] * total; c+total <= exact || c >= exact+total {
				t.Fatalf("backend %d weight %d: %d of %d slots, not within one of exact", i, b.Weight, count[i], m)
			}
		}
		rev := slices.Clone(bs)
		slices.Reverse(rev)
		for i := range rev { // restore original weights for the rebuild
			rev[i].Weight = uint32(weights[rev[i].ID]) * 3
		}
		tab2, err := Build(rev, m, seed)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tab2.SlotIDs(), ids) {
			t.Fatal("reversed input built a different table")
		}
	})
}
