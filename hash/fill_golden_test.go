package hash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// fillCase is one table of TestFillGolden: n backends named like
// addresses, IDs from firstID (which sets the slot width), weights
// equal (weight != 0) or varied (weight == 0: 1 + i·7919 mod 1000, every
// eleventh 0).
type fillCase struct {
	n       int
	m       uint32
	firstID uint32
	weight  uint32
}

func (c fillCase) backends() []Backend {
	bs := make([]Backend, c.n)
	for i := range bs {
		w := c.weight
		if w == 0 {
			w = uint32(1 + i*7919%1000)
			if i%11 == 10 {
				w = 0
			}
		}
		bs[i] = Backend{Name: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff), ID: c.firstID + uint32(i), Weight: w}
	}
	return bs
}

// fillDigest is a table's slot array, its Placement and its per-backend
// counts, as one SHA-256.
func fillDigest(tab *MaglevTable) string {
	h := sha256.New()
	var b [8]byte
	for _, id := range tab.SlotIDs() {
		binary.LittleEndian.PutUint32(b[:4], id)
		h.Write(b[:4])
	}
	binary.LittleEndian.PutUint64(b[:], tab.Placement())
	h.Write(b[:])
	for _, be := range tab.Backends() {
		n, _ := tab.Slots(be.Name)
		binary.LittleEndian.PutUint32(b[:4], n)
		h.Write(b[:4])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TestFillGolden pins the tables of every path of the fill (each slot
// width, equal and varied weights, sets from one backend to more than
// the table's tail, tables from 13 slots to 131101) to the digests the
// fill gave before it was made faster: a fleet of mixed versions must
// compute the same tables.
func TestFillGolden(t *testing.T) {
	for _, tc := range []struct {
		c    fillCase
		want string
	}{
		{fillCase{1, 13, 1, 1}, "09de7aa4f1062af2"},
		{fillCase{5, 13, 1, 1}, "5b4bcc00afde6fec"},
		{fillCase{13, 13, 1, 0}, "e9544184b815b5f0"},
		{fillCase{7, 251, 1, 0}, "c33a985eccf64e0e"},
		{fillCase{100, 65537, 1, 1}, "999b2e363bca16f7"},
		{fillCase{100, 65537, 1, 0}, "59d7722343a97a3f"},
		{fillCase{100, 65537, 300, 7}, "81412fd5bcc8b02e"},
		{fillCase{100, 65537, 300, 0}, "f252b990b3eb93a1"},
		{fillCase{300, 65537, 1, 1}, "15412667bc0cc635"},
		{fillCase{300, 65537, 1, 0}, "e837cda1bc01c2ec"},
		{fillCase{1000, 65537, 70000, 1}, "58ecd1e84f85a337"},
		{fillCase{1000, 65537, 70000, 0}, "81a909c0eb337f6d"},
		{fillCase{3, 65537, 1, 1}, "bddaa784586e0c89"},
		{fillCase{2000, 131101, 1, 1}, "fb2edceac8c52a22"},
		{fillCase{2000, 131101, 1, 0}, "5f74a73e68dff365"},
	} {
		tab := mustBuild(t, tc.c.backends(), tc.c.m, 0x5eed)
		if got := fillDigest(tab); got != tc.want {
			t.Errorf("%+v: digest %s, want %s", tc.c, got, tc.want)
		}
	}
}

// walkFill is the fill as Maglev defines it, the reference the fill
// must equal: the same turns, each walking its backend's list one place
// at a time (walkTurns). It returns slot → ID.
func walkFill(t testing.TB, backends []Backend, m uint32, seed uint64) []uint32 {
	t.Helper()
	bs, err := sortedSet(backends, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) == 0 {
		return nil
	}
	w, total := effectiveWeights(bs)
	return walkTurns(bs, slices.Clone(turnOrder(new(scratch), w, total, quotas(w, total, m), m)), m, seed)
}

// TestFillIsWalk: the fill gives the walk's table for random sets:
// sizes from 1 backend to more than the computed tail, tables from 2
// slots to 65537, equal, varied and zero weights, IDs of every width.
func TestFillIsWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 23))
	primes := []uint32{2, 3, 13, 251, 257, 1009, 4099, 65537}
	for k := range 60 {
		m := primes[k%len(primes)]
		n := 1 + rng.IntN(min(int(m), 700))
		base := []uint32{0, 300, 70000}[k%3]
		bs := make([]Backend, n)
		for i := range bs {
			w := uint32(5)
			switch k % 4 {
			case 1:
				w = uint32(rng.IntN(1000))
			case 2:
				w = 0
			}
			bs[i] = Backend{Name: fmt.Sprintf("192.0.2.%d/%d", i, k), ID: base + uint32(i), Weight: w}
		}
		tab := mustBuild(t, bs, m, rng.Uint64())
		want := walkFill(t, bs, m, tab.Seed())
		if got := tab.SlotIDs(); !slices.Equal(got, want) {
			t.Errorf("case %d (n=%d m=%d): the fill differs from the walk", k, n, m)
		}
		if tab.Placement() != placement(want) {
			t.Errorf("case %d: placement %x, the walk's %x", k, tab.Placement(), placement(want))
		}
	}
}
