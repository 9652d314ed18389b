package hash

// Sum64 known answers, computed with github.com/cespare/xxhash/v2 v2.3.0
// (NewWithSeed, Write(key.Encode()), Sum64) — an implementation independent
// of this package. Zero key: 40 zero bytes. Sanity key: see sanityKey.
const (
	sum64ZeroSeed0     = 0xf628aee62df1d172
	sum64ZeroSeedP32   = 0xf2f5258921244ffa
	sum64SanitySeed0   = 0x92ae31701cdf4952
	sum64SanitySeedP32 = 0xeef4bcd250c26a44
)
