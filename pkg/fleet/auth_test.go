package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyFile: one key per line, comments and blanks skipped, the first
// signs and every one verifies (rotation); short keys and empty files are
// refused with the file and line.
func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o600)
		return p
	}
	oldKey, newKey := strings.Repeat("o", 40), strings.Repeat("n", 44)
	rotating, err := LoadKeyFile(write("rot", "# new key first\n"+newKey+"\n\n  "+oldKey+"  \n"))
	if err != nil {
		t.Fatal(err)
	}
	onlyOld, _ := NewKeyring([]byte(oldKey))
	onlyNew, _ := NewKeyring([]byte(newKey))
	msg := []byte("a datagram's header and body")
	signed := rotating.seal(append([]byte(nil), msg...))
	if !onlyNew.verify(signed) || onlyOld.verify(signed) {
		t.Error("the first key does not sign")
	}
	if !rotating.verify(onlyOld.seal(append([]byte(nil), msg...))) {
		t.Error("the second key does not verify")
	}
	for _, tc := range []struct{ name, text, want string }{
		{"short", "# c\nshort-key\n", "short:2: key is 9 bytes, want at least 32"},
		{"empty", "# only a comment\n\n", "empty: no key"},
	} {
		_, err := LoadKeyFile(write(tc.name, tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file loaded")
	}
	if _, err := NewKeyring([]byte("short")); err == nil {
		t.Error("a short key was accepted")
	}
}

// TestReplayWindow: new sequences pass once, in any order within the
// window; repeats and sequences older than the window are replays.
func TestReplayWindow(t *testing.T) {
	var w window
	steps := []struct {
		seq  uint64
		want bool
	}{
		{1, true}, {1, false}, {3, true}, {2, true}, {2, false}, {3, false},
		{300, true}, {44, false}, {45, true}, {45, false}, {299, true}, {100, true},
		{1000, true}, {744, false}, {745, true}, {999, true}, {300, false},
		{1000 + 64, true}, {1000, false}, {1001, true}, {1000 + 63, true},
	}
	for i, s := range steps {
		if got := w.accept(s.seq); got != s.want {
			t.Fatalf("step %d: accept(%d) = %v, want %v", i, s.seq, got, s.want)
		}
	}
	// Every sequence of a long reordered run is taken exactly once.
	var w2 window
	seen := 0
	for base := uint64(1); base < 5000; base += 100 {
		for i := uint64(99); ; i-- {
			if w2.accept(base + i) {
				seen++
			}
			if w2.accept(base + i) {
				t.Fatalf("%d accepted twice", base+i)
			}
			if i == 0 {
				break
			}
		}
	}
	if seen != 5000 {
		t.Errorf("%d of 5000 reordered sequences accepted", seen)
	}
}
