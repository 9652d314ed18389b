// Package hash builds flow keys from parsed packets, hashes them, and maps
// hashes to backends with a weighted Maglev table.
//
// # Hash
//
// Sum64 and Bytes are XXH64 exactly as the xxHash specification defines it
// (64-bit variant, seeded), so any conforming implementation reproduces
// them. Sum64(k, seed) == Bytes(k.Encode(), seed): a Key is hashed as 40
// bytes, Src (16) | Dst (16) | SrcPort (2, little-endian) | DstPort (2,
// little-endian) | Proto (1) | Kind (1) | 2 zero bytes. The result is the
// same on every architecture. Sum64 is unrolled for the fixed length
// (one 32-byte stripe, one 8-byte lane) and reads fields without unsafe.
//
// Everything in this package is safe for concurrent use; the hash and key
// functions allocate nothing and are meant for the packet path.
package hash
