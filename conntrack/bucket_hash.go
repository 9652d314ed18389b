package conntrack

import (
	"encoding/binary"
	"math/bits"

	"github.com/xlbnet/xlb/hash"
)

// bucketHash places (k, rule) in a table. It need not be the fleet-wide
// hash (tables are private to one appliance) but must spread keys evenly
// and depend on a secret seed, so nobody outside can aim flows at one
// bucket. It folds the key's five 64-bit words pairwise with 128-bit
// multiplies (the wyhash construction): about a third of the cost of
// XXH64 over the same 40 bytes. Every word is combined with a
// seed-derived secret before it is multiplied, so an outsider cannot make
// a factor zero and lose the other half of the key.
func bucketHash(k *hash.Key, rule uint16, seed uint64) uint64 {
	s := newSecrets(seed)
	return s.hash(k, rule)
}

// secrets are the four seed-derived words of bucketHash, computed once
// per table.
type secrets [4]uint64

func newSecrets(seed uint64) secrets {
	return secrets{
		seed ^ 0xa0761d6478bd642f,
		bits.RotateLeft64(seed, 17) ^ 0xe7037ed1a0b428db,
		bits.RotateLeft64(seed, 31) ^ 0x8ebc6af09c88c6e3,
		bits.RotateLeft64(seed, 47) ^ 0x589965cc75374cc3,
	}
}

func (s *secrets) hash(k *hash.Key, rule uint16) uint64 {
	s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
	a := binary.LittleEndian.Uint64(k.Src[0:8])
	b := binary.LittleEndian.Uint64(k.Src[8:16])
	c := binary.LittleEndian.Uint64(k.Dst[0:8])
	d := binary.LittleEndian.Uint64(k.Dst[8:16])
	e := uint64(k.SrcPort) | uint64(k.DstPort)<<16 | uint64(k.Proto)<<32 | uint64(k.Kind)<<40 | uint64(rule)<<48
	h1 := mix(a^s0, b^s1)
	h2 := mix(c^s2, d^s3)
	h3 := mix(e^s1, h1^s2)
	return mix(h2^s0, h3^s3)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
