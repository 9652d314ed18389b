package bfd

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// golden is an Up packet with Poll: diag 0, multiplier 3, my 0x11223344,
// your 0x55667788, 100 ms / 100 ms, no echo. The bytes are RFC 5880
// §4.1's layout written out by hand.
var golden = Packet{State: Up, Poll: true, DetectMult: 3, MyDisc: 0x11223344, YourDisc: 0x55667788, DesiredMinTx: 100000, RequiredMinRx: 100000}

const goldenHex = "20e00318" + "11223344" + "55667788" + "000186a0" + "000186a0" + "00000000"

func TestPacketGolden(t *testing.T) {
	got := golden.Append(nil)
	if hex.EncodeToString(got) != goldenHex {
		t.Fatalf("Append = %x, want %s", got, goldenHex)
	}
	b, _ := hex.DecodeString(goldenHex)
	p, err := Parse(b)
	if err != nil || p != golden {
		t.Fatalf("Parse = %+v, %v; want %+v", p, err, golden)
	}
	// A Down packet with diag 1 and Final: first bytes 0x21 (version 1,
	// diag 1) and 0x50 (state 1, F).
	d := Packet{Diag: DiagDetectionExpired, State: Down, Final: true, DetectMult: 5, MyDisc: 1}
	if got := d.Append(nil)[:2]; !bytes.Equal(got, []byte{0x21, 0x50}) {
		t.Errorf("Down/Final/diag 1 first bytes %x, want 2150", got)
	}
}

func TestParseRejects(t *testing.T) {
	good := func() []byte { return golden.Append(nil) }
	for _, tc := range []struct {
		name string
		mod  func(b []byte) []byte
		want error
	}{
		{"short", func(b []byte) []byte { return b[:23] }, ErrShort},
		{"length field beyond data", func(b []byte) []byte { b[3] = 26; return b }, ErrShort},
		{"length field below 24", func(b []byte) []byte { b[3] = 20; return b }, ErrShort},
		{"version 0", func(b []byte) []byte { b[0] &^= 0xe0; return b }, ErrVersion},
		{"auth bit", func(b []byte) []byte { b[1] |= flagAuth; return b }, ErrAuth},
		{"multipoint", func(b []byte) []byte { b[1] |= flagMultipoint; return b }, ErrMultipoint},
		{"multiplier 0", func(b []byte) []byte { b[2] = 0; return b }, ErrDetectMult},
		{"my discriminator 0", func(b []byte) []byte { copy(b[4:8], []byte{0, 0, 0, 0}); return b }, ErrMyDisc},
		{"your discriminator 0 while Up", func(b []byte) []byte { copy(b[8:12], []byte{0, 0, 0, 0}); return b }, ErrYourDisc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.mod(good())); !errors.Is(err, tc.want) {
				t.Errorf("Parse error %v, want %v", err, tc.want)
			}
		})
	}
	// Your Discriminator 0 is fine in Down, and a longer length field
	// covering trailing bytes too.
	b := (&Packet{State: Down, DetectMult: 3, MyDisc: 7}).Append(nil)
	b = append(b, 0, 0)
	b[3] = 26
	if _, err := Parse(b); err != nil {
		t.Errorf("Down with your discriminator 0, length 26: %v", err)
	}
}

// FuzzParse: Parse never panics, and what it accepts encodes back to the
// same first 24 bytes (apart from the length byte and the bits Parse
// ignores).
func FuzzParse(f *testing.F) {
	f.Add(golden.Append(nil))
	f.Add((&Packet{State: Down, DetectMult: 3, MyDisc: 7}).Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		out := p.Append(nil)
		in := append([]byte(nil), b[:PacketLen]...)
		in[3] = PacketLen
		if !bytes.Equal(out, in) {
			t.Fatalf("round trip %x -> %+v -> %x", in, p, out)
		}
	})
}
