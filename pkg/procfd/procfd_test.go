package procfd

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestHolders: this process is found holding a file it opened, by the
// file's path as its descriptor's link reads, and no longer once it
// closed it; the descriptor's fdinfo and the process's name are read.
func TestHolders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	var heldFD string
	held := func() []int {
		return Holders(func(pid int, fd, target string) bool {
			if target == path {
				heldFD = fd
				return true
			}
			return false
		})
	}
	if got := held(); !slices.Equal(got, []int{self}) {
		t.Fatalf("holders of %s: %v, want [%d] (this process)", path, got, self)
	}
	if want := strconv.Itoa(int(f.Fd())); heldFD != want {
		t.Errorf("matched descriptor %s, want %s", heldFD, want)
	}
	if !InfoHas(self, heldFD, "pos:\t0") || InfoHas(self, heldFD, "pos:\t1") {
		t.Errorf("fdinfo of descriptor %s: pos 0 not found, or pos 1 found", heldFD)
	}
	if c, want := Comm(self), filepath.Base(os.Args[0]); c == "" || len(want) >= len(c) && want[:len(c)] != c {
		t.Errorf("Comm(self) = %q, want a prefix of %q", c, want)
	}
	f.Close()
	if got := held(); len(got) != 0 {
		t.Errorf("holders after close: %v", got)
	}
}
