package hash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
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
