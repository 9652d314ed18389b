package conntrack

import (
	"math/rand/v2"
	"testing"

	"github.com/xlbnet/xlb/hash"
)

// The bucket hash spreads flows that differ in one field only (the worst
// case of real traffic: one client, many ports; many clients, one port)
// evenly over the buckets, and depends on the seed.
func TestBucketHashSpreads(t *testing.T) {
	const buckets = 1024
	rng := rand.New(rand.NewPCG(1, 2))
	cases := map[string]func(i int) hash.Key{
		"source port": func(i int) hash.Key {
			return hash.Key{Src: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 51, 14: 100, 15: 7}, SrcPort: uint16(i), DstPort: 80, Proto: 6, Kind: hash.Tuple5}
		},
		"ipv4 source": func(i int) hash.Key {
			return hash.Key{Src: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 14: byte(i >> 8), 15: byte(i)}, SrcPort: 40000, DstPort: 80, Proto: 6, Kind: hash.Tuple5}
		},
		"ipv6 source low bits": func(i int) hash.Key {
			return hash.Key{Src: [16]byte{0: 0xfd, 14: byte(i >> 8), 15: byte(i)}, Kind: hash.Tuple2}
		},
	}
	for name, key := range cases {
		t.Run(name, func(t *testing.T) {
			seed := rng.Uint64()
			var counts [buckets]int
			const n = 64 * buckets
			for i := range n {
				k := key(i)
				counts[bucketHash(&k, 3, seed)%buckets]++
			}
			lo, hi := n, 0
			for _, c := range counts {
				lo, hi = min(lo, c), max(hi, c)
			}
			// 64 per bucket on average; a uniform hash stays well inside.
			if lo < 30 || hi > 110 {
				t.Errorf("buckets hold %d to %d keys (mean 64)", lo, hi)
			}
			k := key(1)
			if bucketHash(&k, 3, seed) == bucketHash(&k, 3, seed+1) || bucketHash(&k, 3, seed) == bucketHash(&k, 4, seed) {
				t.Error("hash does not depend on the seed or the rule")
			}
		})
	}
}

func BenchmarkBucketHash(b *testing.B) {
	k := hash.Key{Src: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 51, 14: 100, 15: 7}, SrcPort: 4000, DstPort: 80, Proto: 6, Kind: hash.Tuple5}
	s := newSecrets(42)
	var sink uint64
	for b.Loop() {
		k.SrcPort++
		sink ^= s.hash(&k, 1)
	}
	_ = sink
}
