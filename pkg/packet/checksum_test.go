package packet_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/pkg/packettest"
)

// naiveSum is RFC 1071 word by word, returned folded and not complemented.
func naiveSum(b []byte) uint16 { return packettest.Sum(b) }

func TestChecksumMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if got, want := packet.Checksum(b, 0), naiveSum(b); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("Checksum(len %d) = %#04x, want %#04x", n, got, want)
		}
	}
	// All 0xff bytes: every partial sum is 0xffff.
	ff := make([]byte, 64)
	for i := range ff {
		ff[i] = 0xff
	}
	if got := packet.Checksum(ff, 0); got != 0xffff {
		t.Errorf("Checksum(0xff * 64) = %#04x, want 0xffff", got)
	}
	// Chaining equals summing the concatenation at an even split.
	b := packettest.Bytes(101)
	if got, want := packet.Checksum(b[40:], packet.Checksum(b[:40], 0)), packet.Checksum(b, 0); got != want {
		t.Errorf("chained Checksum = %#04x, want %#04x", got, want)
	}
}

func TestChecksumRFC1071Example(t *testing.T) {
	// RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
	if got := packet.Checksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, 0); got != 0xddf2 {
		t.Errorf("Checksum = %#04x, want 0xddf2", got)
	}
}

func TestChecksumUpdates(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1000; i++ {
		b := make([]byte, 40)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		check := ^packet.Checksum(b, 0)

		// 16-bit word at an even offset.
		off := 2 * r.IntN(20)
		old := binary.BigEndian.Uint16(b[off:])
		nw := uint16(r.Uint32())
		binary.BigEndian.PutUint16(b[off:], nw)
		got := packet.ChecksumUpdate16(check, old, nw)
		if want := ^packet.Checksum(b, 0); !sameOnesComplement(got, want) {
			t.Fatalf("ChecksumUpdate16 = %#04x, want %#04x", got, want)
		}

		// 32-bit word.
		check = got
		off = 4 * r.IntN(10)
		old32 := binary.BigEndian.Uint32(b[off:])
		nw32 := r.Uint32()
		binary.BigEndian.PutUint32(b[off:], nw32)
		got = packet.ChecksumUpdate32(check, old32, nw32)
		if want := ^packet.Checksum(b, 0); !sameOnesComplement(got, want) {
			t.Fatalf("ChecksumUpdate32 = %#04x, want %#04x", got, want)
		}

		// 16-byte field.
		check = got
		oldF := append([]byte(nil), b[8:24]...)
		for j := 8; j < 24; j++ {
			b[j] = byte(r.Uint32())
		}
		got = packet.ChecksumUpdateBytes(check, oldF, b[8:24])
		if want := ^packet.Checksum(b, 0); !sameOnesComplement(got, want) {
			t.Fatalf("ChecksumUpdateBytes = %#04x, want %#04x", got, want)
		}
	}
}

// sameOnesComplement treats 0x0000 and 0xffff as the same value (+0 and -0).
func sameOnesComplement(a, b uint16) bool {
	return a == b || (a == 0 && b == 0xffff) || (a == 0xffff && b == 0)
}

func TestPseudoHeaderChecksum(t *testing.T) {
	src, dst := addr(client4).AsSlice(), addr(vip4).AsSlice()
	ph := packettest.Cat(src, dst, []byte{0, packet.ProtoUDP}, packettest.BE16(28))
	if got, want := packet.PseudoHeaderChecksum(packet.ProtoUDP, src, dst, 28), packet.Checksum(ph, 0); got != want {
		t.Errorf("IPv4 PseudoHeaderChecksum = %#04x, want %#04x", got, want)
	}
	src6, dst6 := addr(client6).AsSlice(), addr(vip6).AsSlice()
	ph6 := packettest.Cat(src6, dst6, packettest.BE32(70000), []byte{0, 0, 0, packet.ProtoTCP})
	if got, want := packet.PseudoHeaderChecksum(packet.ProtoTCP, src6, dst6, 70000), packet.Checksum(ph6, 0); got != want {
		t.Errorf("IPv6 PseudoHeaderChecksum = %#04x, want %#04x", got, want)
	}
}
