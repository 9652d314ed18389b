package hash

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// xxhPrime32 and xxhSanityPrime64 generate the xxHash sanity buffer
// (cli/xsum_sanity_check.c in the xxHash reference repository).
const (
	xxhPrime32       = 2654435761
	xxhSanityPrime64 = 11400714785074694797
)

func sanityBuffer(n int) []byte {
	b := make([]byte, n)
	gen := uint64(xxhPrime32)
	for i := range b {
		b[i] = byte(gen >> 56)
		gen *= xxhSanityPrime64
	}
	return b
}

// TestBytesKnownAnswers checks Bytes against the XXH64 vectors of the
// xxHash reference sanity check (XSUM_XXH64_testdata), which cover every
// code path: empty, 1..3 byte tail, 4-byte tail, 8-byte lanes, 32-byte
// stripes and long inputs, each with seed 0 and seed PRIME32.
func TestBytesKnownAnswers(t *testing.T) {
	buf := sanityBuffer(2367)
	tests := []struct {
		n    int
		seed uint64
		want uint64
	}{
		{0, 0, 0xEF46DB3751D8E999},
		{0, xxhPrime32, 0xAC75FDA2929B17EF},
		{1, 0, 0xE934A84ADB052768},
		{1, xxhPrime32, 0x5014607643A9B4C3},
		{3, 0, 0xFF7E1959CB50794A},
		{3, xxhPrime32, 0xAA8584E83660F7D1},
		{4, 0, 0x9136A0DCA57457EE},
		{4, xxhPrime32, 0xCAAB286BD8E9FDB5},
		{8, 0, 0xCDBCF538E71D1348},
		{8, xxhPrime32, 0xFE0C047A5353CDAC},
		{14, 0, 0x8282DCC4994E35C8},
		{14, xxhPrime32, 0xC3BD6BF63DEB6DF0},
		{16, 0, 0x98C90B57FDFCB55C},
		{16, xxhPrime32, 0xC900AD2D536B607E},
		{17, 0, 0x0D39A2D051A30C2C},
		{17, xxhPrime32, 0x495CD68A647C7A22},
		{24, 0, 0xF75A6DEA42DC5BF4},
		{24, xxhPrime32, 0x8B7C67EB59778E22},
		{32, 0, 0x18B216492BB44B70},
		{32, xxhPrime32, 0xB3F33BDF93ADE409},
		{222, 0, 0xB641AE8CB691C174},
		{222, xxhPrime32, 0x20CB8AB7AE10C14A},
		{2367, 0, 0xA82418DDEC0EA581},
		{2367, xxhPrime32, 0xA36A93C18052673A},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("len=%d/seed=%#x", tt.n, tt.seed), func(t *testing.T) {
			if got := Bytes(buf[:tt.n], tt.seed); got != tt.want {
				t.Errorf("Bytes(sanity[:%d], %#x) = %#016x, want %#016x", tt.n, tt.seed, got, tt.want)
			}
		})
	}
}

// TestBytesStrings checks well-known XXH64 values of short strings
// (seed 0) published with the reference implementation and its ports.
func TestBytesStrings(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"", 0xEF46DB3751D8E999},
		{"a", 0xD24EC4F1A98C6E5B},
		{"abc", 0x44BC2CF5AD770999},
		{"Hello, world!", 0xF58336A78B6F9476},
	}
	for _, tt := range tests {
		if got := Bytes([]byte(tt.in), 0); got != tt.want {
			t.Errorf("Bytes(%q, 0) = %#016x, want %#016x", tt.in, got, tt.want)
		}
		if got := String(tt.in, 0); got != tt.want {
			t.Errorf("String(%q, 0) = %#016x, want %#016x", tt.in, got, tt.want)
		}
	}
}

// TestSum64KnownAnswers pins Sum64 for fixed keys. The values were
// computed with an independent XXH64 implementation
// (github.com/cespare/xxhash/v2, Digest with seed) over Key.Encode().
func TestSum64KnownAnswers(t *testing.T) {
	k := sanityKey()
	tests := []struct {
		name string
		key  Key
		seed uint64
		want uint64
	}{
		{"zero key, seed 0", Key{}, 0, sum64ZeroSeed0},
		{"zero key, seed PRIME32", Key{}, xxhPrime32, sum64ZeroSeedP32},
		{"sanity key, seed 0", k, 0, sum64SanitySeed0},
		{"sanity key, seed PRIME32", k, xxhPrime32, sum64SanitySeedP32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sum64(&tt.key, tt.seed); got != tt.want {
				t.Errorf("Sum64 = %#016x, want %#016x", got, tt.want)
			}
		})
	}
}

// sanityKey is the Key whose encoding is the first 40 bytes of the sanity
// buffer except the two padding bytes, which a Key always has zero.
func sanityKey() Key {
	b := sanityBuffer(KeySize)
	var k Key
	copy(k.Src[:], b[0:16])
	copy(k.Dst[:], b[16:32])
	k.SrcPort = binary.LittleEndian.Uint16(b[32:34])
	k.DstPort = binary.LittleEndian.Uint16(b[34:36])
	k.Proto = b[36]
	k.Kind = TupleKind(b[37])
	return k
}

// TestSum64MatchesBytes checks the specialised 40-byte path against the
// generic one for many keys and seeds, and that each field changes the hash.
func TestSum64MatchesBytes(t *testing.T) {
	buf := sanityBuffer(4096)
	for i := 0; i+KeySize <= len(buf); i += 7 {
		var k Key
		copy(k.Src[:], buf[i:i+16])
		copy(k.Dst[:], buf[i+16:i+32])
		k.SrcPort = binary.LittleEndian.Uint16(buf[i+32:])
		k.DstPort = binary.LittleEndian.Uint16(buf[i+34:])
		k.Proto = buf[i+36]
		k.Kind = TupleKind(buf[i+37])
		seed := binary.LittleEndian.Uint64(buf[i:])
		enc := k.Encode()
		if got, want := Sum64(&k, seed), Bytes(enc[:], seed); got != want {
			t.Fatalf("offset %d: Sum64 = %#x, Bytes(Encode) = %#x", i, got, want)
		}
	}

	base := sanityKey()
	h0 := Sum64(&base, 1)
	mutations := map[string]func(*Key){
		"Src":     func(k *Key) { k.Src[15] ^= 1 },
		"Dst":     func(k *Key) { k.Dst[0] ^= 0x80 },
		"SrcPort": func(k *Key) { k.SrcPort ^= 1 },
		"DstPort": func(k *Key) { k.DstPort ^= 0x8000 },
		"Proto":   func(k *Key) { k.Proto ^= 1 },
		"Kind":    func(k *Key) { k.Kind ^= 1 },
	}
	for name, mutate := range mutations {
		k := base
		mutate(&k)
		if Sum64(&k, 1) == h0 {
			t.Errorf("changing %s does not change Sum64", name)
		}
	}
	if Sum64(&base, 2) == h0 {
		t.Error("changing the seed does not change Sum64")
	}
}

// TestEncodeLayout checks the canonical byte layout field by field.
func TestEncodeLayout(t *testing.T) {
	k := Key{SrcPort: 0x1234, DstPort: 0xABCD, Proto: 17, Kind: Tuple5}
	k.Src[0], k.Src[15] = 1, 2
	k.Dst[0], k.Dst[15] = 3, 4
	b := k.Encode()
	want := map[int]byte{0: 1, 15: 2, 16: 3, 31: 4, 32: 0x34, 33: 0x12, 34: 0xCD, 35: 0xAB, 36: 17, 37: 5}
	for i, c := range b {
		if c != want[i] {
			t.Errorf("byte %d = %#x, want %#x", i, c, want[i])
		}
	}
}

func TestHashZeroAllocs(t *testing.T) {
	k := sanityKey()
	long := string(sanityBuffer(300))
	var sink uint64
	tests := map[string]func(){
		"Sum64":  func() { sink += Sum64(&k, 7) },
		"Bytes":  func() { sink += Bytes([]byte(long[:222]), 7) },
		"String": func() { sink += String(long, 7) },
	}
	for name, f := range tests {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
	_ = sink
}
