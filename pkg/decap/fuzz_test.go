package decap

import "testing"

// FuzzDecode feeds arbitrary datagrams to every reader kind. Invariants: no
// panic; a delivered packet lies inside the input, starts with IP version 4
// or 6, and is exactly as long as its own header says.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(kindRaw4), uint8(0), []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 4, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint8(kindGUE), uint8(0), []byte{0x00, 4, 0, 0})
	f.Add(uint8(kindRaw6GRE), uint8(0), []byte{0x80, 0, 8, 0})
	f.Fuzz(func(t *testing.T, k, proto uint8, in []byte) {
		k = k%4 + 1
		if proto&1 == 0 {
			proto = protoIPIP
		} else {
			proto = protoIPv6
		}
		inner, why := decode(kind(k), proto, in)
		if why >= NumDropReasons {
			t.Fatalf("drop reason %d out of range", why)
		}
		if why != DropNone {
			if inner != nil {
				t.Fatalf("dropped (%v) but returned %d bytes", why, len(inner))
			}
			return
		}
		if len(inner) == 0 {
			t.Fatal("delivered an empty packet")
		}
		off := -1
		for i := range in {
			if &in[i] == &inner[0] {
				off = i
				break
			}
		}
		if off < 0 || off+len(inner) > len(in) {
			t.Fatal("inner packet does not lie inside the input")
		}
		switch inner[0] >> 4 {
		case 4:
			if got := int(inner[2])<<8 | int(inner[3]); got != len(inner) {
				t.Fatalf("ipv4 total length %d, delivered %d", got, len(inner))
			}
		case 6:
			if got := 40 + (int(inner[4])<<8 | int(inner[5])); got != len(inner) {
				t.Fatalf("ipv6 length %d, delivered %d", got, len(inner))
			}
		default:
			t.Fatalf("delivered version %d", inner[0]>>4)
		}
	})
}
