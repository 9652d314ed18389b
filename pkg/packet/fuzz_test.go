package packet_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/xlbnet/xlb/pkg/packet"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzParse seeds from the golden and malformed frames")

// fuzzSeeds are the golden, pass and malformed frames.
func fuzzSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	for _, g := range append(goldens(), passFrames()...) {
		seeds["golden-"+g.name] = g.frame
	}
	for _, c := range malformedFrames() {
		if len(c.frame) > 4096 {
			continue // frame-too-long: the fuzzer caps inputs anyway
		}
		seeds["malformed-"+c.name] = c.frame
	}
	return seeds
}

// TestWriteFuzzCorpus rewrites the committed seed corpus when run with
// -update-corpus; otherwise it checks that every seed is committed.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	for name, frame := range fuzzSeeds() {
		path := filepath.Join(dir, name)
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(frame)))
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, []byte(content)) {
			t.Errorf("seed %s is missing or stale (run go test -run TestWriteFuzzCorpus -update-corpus): %v", path, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	// The committed corpus in testdata/fuzz/FuzzParse holds the same
	// frames; adding them here keeps the fuzzer seeded if it goes stale.
	for _, frame := range fuzzSeeds() {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame := data[:len(data):len(data)] // a read past len panics
		orig := bytes.Clone(frame)
		m, res := packet.Parse(frame)
		if !bytes.Equal(frame, orig) {
			t.Fatalf("Parse modified its input")
		}
		if m2, res2 := packet.Parse(frame); m2 != m || res2 != res {
			t.Fatalf("Parse is not deterministic: %v then %v", res, res2)
		}
		// ParseInto gives the same into a Meta that held another packet.
		dirty := packet.Meta{L3Off: 99, HasInner: true, Frag: packet.FragNonFirst, ICMPMTU: 7}
		dirty.Src[3] = 1
		if res3 := packet.ParseInto(frame, &dirty); dirty != m || res3 != res {
			t.Fatalf("ParseInto into a used Meta: %v, Parse: %v", res3, res)
		}
		checkInvariants(t, frame, m, res)
	})
}

// checkInvariants asserts what must hold for any frame.
func checkInvariants(t *testing.T, frame []byte, m packet.Meta, res packet.Result) {
	t.Helper()
	if int(res) >= packet.NumResults {
		t.Fatalf("result %d out of range", res)
	}
	if res.String() == "unknown" {
		t.Fatalf("result %d has no name", res)
	}
	if res != packet.OK {
		return
	}
	// L2: the EtherType at L3Off-2 decides the family.
	l3 := int(m.L3Off)
	wantL3 := 14
	if m.HasVLAN {
		wantL3 = 18
	}
	if l3 != wantL3 {
		t.Fatalf("L3Off = %d, want %d (HasVLAN %v)", l3, wantL3, m.HasVLAN)
	}
	et := binary.BigEndian.Uint16(frame[l3-2:])
	switch {
	case et == packet.EtherTypeIPv4 && m.Family == packet.IPv4:
	case et == packet.EtherTypeIPv6 && m.Family == packet.IPv6:
	default:
		t.Fatalf("EtherType %#04x but Family %v", et, m.Family)
	}
	// Offsets: L3Off < L4Off <= L3End <= len(frame).
	if !(m.L3Off < m.L4Off && m.L4Off <= m.L3End && int(m.L3End) <= len(frame)) {
		t.Fatalf("offsets out of order: L3Off %d L4Off %d L3End %d len %d", m.L3Off, m.L4Off, m.L3End, len(frame))
	}
	minHdr := map[uint8]int{packet.ProtoTCP: 20, packet.ProtoUDP: 8, packet.ProtoESP: 8, packet.ProtoGRE: 4}
	if m.Family == packet.IPv4 {
		minHdr[packet.ProtoICMP] = 8
		if !packet.IPv4Header(frame[l3:]).IsChecksumValid() {
			t.Fatalf("OK with a bad IPv4 checksum")
		}
	} else {
		minHdr[packet.ProtoICMPv6] = 8
	}
	if n, ok := minHdr[m.Proto]; ok && m.Frag != packet.FragNonFirst && int(m.L4Off)+n > int(m.L3End) {
		t.Fatalf("%d-byte transport header at %d runs past L3End %d", n, m.L4Off, m.L3End)
	}
	// Ports only for TCP/UDP with a transport header.
	hasPorts := (m.Proto == packet.ProtoTCP || m.Proto == packet.ProtoUDP) && m.Frag != packet.FragNonFirst
	if !hasPorts && (m.SrcPort != 0 || m.DstPort != 0 || m.TCPFlags != 0) {
		t.Fatalf("ports %d→%d flags %#x on proto %d frag %v", m.SrcPort, m.DstPort, m.TCPFlags, m.Proto, m.Frag)
	}
	if m.Proto == packet.ProtoTCP && hasPorts && !packet.IsValidTCPFlags(m.TCPFlags) {
		t.Fatalf("OK with TCP flags %#x", m.TCPFlags)
	}
	if m.Frag == packet.FragNone && m.FragID != 0 {
		t.Fatalf("FragID %d on an unfragmented packet", m.FragID)
	}
	// The quoted packet of an ICMP error lies after the ICMP header, with
	// its IP header and 8 bytes inside the packet.
	if m.HasInner {
		if m.InnerOff != m.L4Off+8 {
			t.Fatalf("InnerOff %d, want L4Off+8 = %d", m.InnerOff, m.L4Off+8)
		}
		minQuote := 20 + 8
		if m.Family == packet.IPv6 {
			minQuote = 40 + 8
		}
		if int(m.InnerOff)+minQuote > int(m.L3End) {
			t.Fatalf("quoted packet at %d shorter than %d bytes (L3End %d)", m.InnerOff, minQuote, m.L3End)
		}
	} else if m.InnerOff != 0 || m.Inner != (packet.Tuple{}) {
		t.Fatalf("inner tuple without HasInner")
	}
}

// TestInvariantsOnSeeds runs the fuzz invariants over every seed, so they
// are exercised without -fuzz too.
func TestInvariantsOnSeeds(t *testing.T) {
	for name, frame := range fuzzSeeds() {
		m, res := packet.Parse(frame)
		t.Run(name, func(t *testing.T) { checkInvariants(t, frame, m, res) })
	}
}
