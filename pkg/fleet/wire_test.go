package fleet

import (
	"bytes"
	"encoding/hex"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/hash"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.hex from the encoder")

// testKey is the key of the golden datagrams (32 bytes).
var testKey = []byte("golden-fleet-key-0123456789abcdef")

func key4(src, dst string, sport, dport uint16, proto uint8, kind hash.TupleKind) hash.Key {
	return hash.Key{Src: netip.MustParseAddr(src).As16(), Dst: netip.MustParseAddr(dst).As16(), SrcPort: sport, DstPort: dport, Proto: proto, Kind: kind}
}

var (
	rec4 = Record{Rule: RuleID("web4"), Key: key4("198.51.100.10", "203.0.113.10", 40000, 80, 6, hash.Tuple5),
		Backend: netip.MustParseAddr("198.18.1.100"), TTLms: 59000}
	rec6 = Record{Rule: RuleID("web6"), Key: key4("fd00:51::10", "fd00:203:113::10", 40001, 443, 6, hash.Tuple5),
		Backend: netip.MustParseAddr("fd00:18:1::100"), TTLms: 1000, Flags: FlagDraining}
	recSession = Record{Rule: RuleID("sticky"), Key: key4("198.51.100.11", "203.0.113.10", 0, 0, 0, hash.Tuple2),
		Backend: netip.MustParseAddr("fd00:18:1::101"), TTLms: 600000}
	recWithdraw = Record{Rule: RuleID("udp"), Key: key4("198.51.100.12", "203.0.113.10", 0, 0, 17, hash.Tuple3),
		Backend: netip.MustParseAddr("198.18.1.102"), TTLms: 0, Flags: FlagWithdraw}
)

var goldenHeader = Header{Epoch: 0x0102030405060708, Seq: 42, From: netip.MustParseAddr("192.0.2.11"), To: netip.MustParseAddr("192.0.2.12")}

// datagram seals a body of type t with goldenHeader under testKey.
func datagram(t Type, body []byte) []byte {
	h := goldenHeader
	h.Type = t
	k, _ := NewKeyring(testKey)
	return k.seal(append(appendHeader(nil, &h, len(body)), body...))
}

func recordsDatagram(sync uint64, rs ...Record) []byte {
	var rb recordsBody
	rb.reset(sync)
	for i := range rs {
		if !rb.add(&rs[i]) {
			panic("does not fit")
		}
	}
	return datagram(TypeRecords, rb.b)
}

// goldens are the fixtures of testdata/golden: one datagram of each type
// and every record shape.
var goldens = map[string][]byte{
	"hello":         datagram(TypeHello, appendHello(nil, &Hello{Challenge: 0x1111, Echo: 0x2222, Sync: 0x3333, Owned: 7})),
	"records-v4":    recordsDatagram(0, rec4),
	"records-mixed": recordsDatagram(0x99, rec4, rec6, recSession, recWithdraw),
	"sync-end":      datagram(TypeSyncEnd, appendSyncEnd(nil, 0x99, 4)),
}

// TestGoldenDatagrams: the encoder writes the committed bytes (reviewed
// against the layout in wire.go and doc.go), and the decoder reads them
// back into the values they were made of.
func TestGoldenDatagrams(t *testing.T) {
	for name, d := range goldens {
		path := filepath.Join("testdata", "golden", name+".hex")
		if *update {
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(hex.EncodeToString(d)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := hex.DecodeString(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d, want) {
			t.Errorf("%s: encoder wrote\n%x\nwant\n%x", name, d, want)
		}
		k, _ := NewKeyring(testKey)
		if !k.verify(want) {
			t.Errorf("%s: tag does not verify", name)
		}
		h, body, err := parseHeader(want)
		if err != nil || h.Epoch != goldenHeader.Epoch || h.Seq != 42 || h.From != goldenHeader.From || h.To != goldenHeader.To || checkHeader(&h) != nil {
			t.Errorf("%s: header %+v, %v", name, h, err)
		}
		switch h.Type {
		case TypeHello:
			m, err := parseHello(body)
			if err != nil || m != (Hello{Challenge: 0x1111, Echo: 0x2222, Sync: 0x3333, Owned: 7}) {
				t.Errorf("%s: %+v %v", name, m, err)
			}
		case TypeRecords:
			sync, rs, err := parseRecords(body, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			want := []Record{rec4}
			if name == "records-mixed" {
				want = []Record{rec4, rec6, recSession, recWithdraw}
				if sync != 0x99 {
					t.Errorf("sync %x", sync)
				}
			}
			if len(rs) != len(want) {
				t.Fatalf("%s: %d records", name, len(rs))
			}
			for i := range rs {
				if rs[i] != want[i] {
					t.Errorf("%s: record %d\n got %+v\nwant %+v", name, i, rs[i], want[i])
				}
			}
		case TypeSyncEnd:
			sync, n, err := parseSyncEnd(body)
			if err != nil || sync != 0x99 || n != 4 {
				t.Errorf("%s: %x %d %v", name, sync, n, err)
			}
		}
	}
}

// TestRecordSizes: what the doc says a record costs.
func TestRecordSizes(t *testing.T) {
	for _, tc := range []struct {
		r    Record
		want int
	}{{rec4, 32}, {rec6, 68}, {recSession, 44}, {recWithdraw, 32}} {
		if got := len(appendRecord(nil, &tc.r)); got != tc.want || recordLen(&tc.r) != got {
			t.Errorf("%+v: %d bytes (recordLen %d), want %d", tc.r.Key, got, recordLen(&tc.r), tc.want)
		}
	}
	var rb recordsBody
	rb.reset(0)
	n := 0
	for rb.add(&rec4) {
		n++
	}
	if n != (maxBody-recordsHead)/32 || n < 40 {
		t.Errorf("%d IPv4 records per datagram", n)
	}
}

// TestMalformedDatagrams: every way a datagram can be wrong is an error
// with its reason, found before anything is applied.
func TestMalformedDatagrams(t *testing.T) {
	good := goldens["records-mixed"]
	k, _ := NewKeyring(testKey)
	reseal := func(d []byte) []byte { return k.seal(d[:len(d)-tagLen]) }
	edit := func(f func(d []byte) []byte) []byte { return reseal(f(bytes.Clone(good))) }
	body := func(d []byte) []byte { return d[headerLen : len(d)-tagLen] }
	for _, tc := range []struct {
		name string
		d    []byte
		want Reason
	}{
		{"empty", nil, ReasonTruncated},
		{"header only", good[:headerLen], ReasonTruncated},
		{"cut", good[:len(good)-1], ReasonTruncated},
		{"bad magic", edit(func(d []byte) []byte { d[0] = 'Y'; return d }), ReasonMalformed},
		{"version 2", edit(func(d []byte) []byte { d[4] = 2; return d }), ReasonVersion},
		{"trailing byte", append(bytes.Clone(good), 0), ReasonMalformed},
		{"wrong key", func() []byte {
			k2, _ := NewKeyring([]byte("another-fleet-key-0123456789abcdef"))
			return k2.seal(bytes.Clone(good[:len(good)-tagLen]))
		}(), ReasonAuth},
		{"flipped bit", func() []byte { d := bytes.Clone(good); d[headerLen+20] ^= 1; return d }(), ReasonAuth},
		{"type 9", edit(func(d []byte) []byte { d[5] = 9; return d }), ReasonMalformed},
		{"epoch 0", edit(func(d []byte) []byte { clear(d[8:16]); return d }), ReasonMalformed},
		{"count too high", edit(func(d []byte) []byte { body(d)[9]++; return d }), ReasonTruncated},
		{"count too low", edit(func(d []byte) []byte { body(d)[9]--; return d }), ReasonMalformed},
		{"unknown record flag", edit(func(d []byte) []byte { body(d)[recordsHead] |= 0x80; return d }), ReasonMalformed},
		{"tuple kind 4", edit(func(d []byte) []byte { body(d)[recordsHead+1] = 4; return d }), ReasonMalformed},
		{"reserved byte", edit(func(d []byte) []byte { body(d)[recordsHead+3] = 1; return d }), ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.d, k); got != tc.want {
				t.Errorf("reason %v, want %v", got, tc.want)
			}
		})
	}
	if got := classify(good, k); got != numReasons {
		t.Errorf("the good datagram: %v", got)
	}
}

// classify runs the receiver's checks on d (no peer or epoch state) and
// returns the drop reason, numReasons when it would be applied.
func classify(d []byte, k *Keyring) Reason {
	h, body, err := parseHeader(d)
	if err != nil {
		return reasonOf(err)
	}
	if !k.verify(d) {
		return ReasonAuth
	}
	if err := checkHeader(&h); err != nil {
		return ReasonMalformed
	}
	switch h.Type {
	case TypeHello:
		_, err = parseHello(body)
	case TypeRecords:
		_, _, err = parseRecords(body, nil)
	case TypeSyncEnd:
		_, _, err = parseSyncEnd(body)
	}
	if err != nil {
		return reasonOf(err)
	}
	return numReasons
}

// FuzzDecode: no datagram crashes the decoder; one that decodes re-encodes
// to the same bytes (the format has one encoding per value).
func FuzzDecode(f *testing.F) {
	for _, d := range goldens {
		f.Add(d)
	}
	k, _ := NewKeyring(testKey)
	f.Fuzz(func(t *testing.T, d []byte) {
		h, body, err := parseHeader(d)
		if err != nil {
			return
		}
		k.verify(d)
		if checkHeader(&h) != nil {
			return
		}
		var again []byte
		switch h.Type {
		case TypeHello:
			m, err := parseHello(body)
			if err != nil {
				return
			}
			again = appendHello(nil, &m)
		case TypeRecords:
			sync, rs, err := parseRecords(body, nil)
			if err != nil {
				return
			}
			var rb recordsBody
			rb.reset(sync)
			for i := range rs {
				if !rb.add(&rs[i]) {
					t.Fatalf("a decoded record does not fit again: %+v", rs[i])
				}
			}
			again = rb.b
		case TypeSyncEnd:
			sync, n, err := parseSyncEnd(body)
			if err != nil {
				return
			}
			again = appendSyncEnd(nil, sync, n)
		}
		if !bytes.Equal(again, body) {
			t.Fatalf("re-encoded body differs:\n got %x\nwant %x", again, body)
		}
	})
}
