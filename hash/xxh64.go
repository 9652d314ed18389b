package hash

import (
	"encoding/binary"
	"math/bits"

	"github.com/xlbnet/xlb/pkg/packet"
)

// XXH64 constants from the xxHash specification (doc/xxhash_spec.md,
// "XXH64 Algorithm Description").
const (
	prime64x1 uint64 = 0x9E3779B185EBCA87
	prime64x2 uint64 = 0xC2B2AE3D27D4EB4F
	prime64x3 uint64 = 0x165667B19E3779F9
	prime64x4 uint64 = 0x85EBCA77C2B2AE63
	prime64x5 uint64 = 0x27D4EB2F165667C5
)

// KeySize is the number of bytes a Key is hashed as.
const KeySize = 40

// Sum64 returns XXH64 (xxHash spec, 64-bit variant) with the given seed
// over the 40-byte canonical encoding of k:
//
//	bytes  0..15  Src
//	bytes 16..31  Dst
//	bytes 32..33  SrcPort, little-endian
//	bytes 34..35  DstPort, little-endian
//	byte  36      Proto
//	byte  37      Kind
//	bytes 38..39  zero
//
// It equals Bytes(k.Encode(), seed) on every architecture. On a
// little-endian machine this is exactly the in-memory layout of Key. It
// reads the fields directly (no unsafe, no allocation) and unrolls XXH64
// for the fixed length: one 32-byte stripe, then one 8-byte lane.
func Sum64(k *Key, seed uint64) uint64 {
	return sum40(
		binary.LittleEndian.Uint64(k.Src[0:8]), binary.LittleEndian.Uint64(k.Src[8:16]),
		binary.LittleEndian.Uint64(k.Dst[0:8]), binary.LittleEndian.Uint64(k.Dst[8:16]),
		tailWord(k.SrcPort, k.DstPort, k.Proto, k.Kind), seed)
}

// SumTuple returns Sum64 of the Key that MakeKey(t, kind) would build,
// without building it: the packet path's selection hash in one call.
func SumTuple(t *packet.Tuple, kind TupleKind, seed uint64) uint64 {
	var tail uint64
	switch kind {
	case Tuple5:
		tail = tailWord(t.SrcPort, t.DstPort, t.Proto, Tuple5)
	case Tuple3:
		tail = tailWord(0, 0, t.Proto, Tuple3)
	case Tuple2:
		tail = tailWord(0, 0, 0, Tuple2)
	default: // the zero Key
		return sum40(0, 0, 0, 0, 0, seed)
	}
	return sum40(
		binary.LittleEndian.Uint64(t.Src[0:8]), binary.LittleEndian.Uint64(t.Src[8:16]),
		binary.LittleEndian.Uint64(t.Dst[0:8]), binary.LittleEndian.Uint64(t.Dst[8:16]),
		tail, seed)
}

// tailWord is bytes 32..39 of the canonical encoding as a little-endian word.
//
// The fields are disjoint, so + is |; + keeps the compiler from merging
// the port loads into one 4-byte load, which a caller's two 2-byte stores
// (a Key just built) could not forward to, costing a store-forwarding stall.
func tailWord(srcPort, dstPort uint16, proto uint8, kind TupleKind) uint64 {
	return uint64(srcPort) + uint64(dstPort)<<16 + uint64(proto)<<32 + uint64(kind)<<40
}

// sum40 is XXH64 unrolled for 40 bytes given as five little-endian words:
// one 32-byte stripe (w0..w3), then one 8-byte lane (w4).
func sum40(w0, w1, w2, w3, w4, seed uint64) uint64 {
	v1 := xxhRound(seed+prime64x1+prime64x2, w0)
	v2 := xxhRound(seed+prime64x2, w1)
	v3 := xxhRound(seed, w2)
	v4 := xxhRound(seed-prime64x1, w3)

	h := bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) +
		bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
	h = xxhMergeRound(h, v1)
	h = xxhMergeRound(h, v2)
	h = xxhMergeRound(h, v3)
	h = xxhMergeRound(h, v4)

	h += KeySize

	h ^= xxhRound(0, w4)
	h = bits.RotateLeft64(h, 27)*prime64x1 + prime64x4

	return xxhAvalanche(h)
}

// Encode returns the 40-byte canonical encoding of k that Sum64 hashes.
func (k *Key) Encode() [KeySize]byte {
	var b [KeySize]byte
	copy(b[0:16], k.Src[:])
	copy(b[16:32], k.Dst[:])
	binary.LittleEndian.PutUint16(b[32:34], k.SrcPort)
	binary.LittleEndian.PutUint16(b[34:36], k.DstPort)
	b[36] = k.Proto
	b[37] = byte(k.Kind)
	return b
}

// Bytes returns XXH64 of b with the given seed, exactly as the xxHash
// specification defines it (any length, little-endian lane reads).
func Bytes(b []byte, seed uint64) uint64 {
	n := len(b)
	var h uint64
	if n >= 32 {
		v1 := seed + prime64x1 + prime64x2
		v2 := seed + prime64x2
		v3 := seed
		v4 := seed - prime64x1
		for len(b) >= 32 {
			v1 = xxhRound(v1, binary.LittleEndian.Uint64(b[0:8]))
			v2 = xxhRound(v2, binary.LittleEndian.Uint64(b[8:16]))
			v3 = xxhRound(v3, binary.LittleEndian.Uint64(b[16:24]))
			v4 = xxhRound(v4, binary.LittleEndian.Uint64(b[24:32]))
			b = b[32:]
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) +
			bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xxhMergeRound(h, v1)
		h = xxhMergeRound(h, v2)
		h = xxhMergeRound(h, v3)
		h = xxhMergeRound(h, v4)
	} else {
		h = seed + prime64x5
	}

	h += uint64(n)

	for ; len(b) >= 8; b = b[8:] {
		h ^= xxhRound(0, binary.LittleEndian.Uint64(b[:8]))
		h = bits.RotateLeft64(h, 27)*prime64x1 + prime64x4
	}
	if len(b) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(b[:4])) * prime64x1
		h = bits.RotateLeft64(h, 23)*prime64x2 + prime64x3
		b = b[4:]
	}
	for _, c := range b {
		h ^= uint64(c) * prime64x5
		h = bits.RotateLeft64(h, 11) * prime64x1
	}
	return xxhAvalanche(h)
}

// String is Bytes over the bytes of s, without copying it.
func String(s string, seed uint64) uint64 {
	// A []byte(s) conversion that does not escape is not allocated by the
	// compiler; Bytes keeps no reference.
	return Bytes([]byte(s), seed)
}

func xxhRound(acc, lane uint64) uint64 {
	acc += lane * prime64x2
	acc = bits.RotateLeft64(acc, 31)
	return acc * prime64x1
}

func xxhMergeRound(acc, v uint64) uint64 {
	acc ^= xxhRound(0, v)
	return acc*prime64x1 + prime64x4
}

func xxhAvalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= prime64x2
	h ^= h >> 29
	h *= prime64x3
	h ^= h >> 32
	return h
}
