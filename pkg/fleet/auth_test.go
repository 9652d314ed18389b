package fleet

import (
	"strings"
	"testing"
)

// TestKeyring: the first key signs and every one verifies (rotation);
// short keys are refused.
func TestKeyring(t *testing.T) {
	oldKey, newKey := []byte(strings.Repeat("o", 40)), []byte(strings.Repeat("n", 44))
	rotating, err := NewKeyring(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	onlyOld, _ := NewKeyring(oldKey)
	onlyNew, _ := NewKeyring(newKey)
	msg := []byte("a datagram's header and body")
	signed := rotating.seal(append([]byte(nil), msg...))
	if !onlyNew.verify(signed) || onlyOld.verify(signed) {
		t.Error("the first key does not sign")
	}
	if !rotating.verify(onlyOld.seal(append([]byte(nil), msg...))) {
		t.Error("the second key does not verify")
	}
	if !rotating.Clone().verify(signed) {
		t.Error("a clone does not verify")
	}
	if _, err := NewKeyring([]byte("short")); err == nil {
		t.Error("a short key was accepted")
	}
	if _, err := NewKeyring(); err == nil {
		t.Error("no key was accepted")
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
