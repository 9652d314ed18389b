package sdnotifytest

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbnet/xlb/pkg/sdnotify"
)

// TestManager drives the stand-in with the daemon's own client
// (pkg/sdnotify): stored fds are kept by name and in order, a removal
// closes every fd of its name, READY=1 and MAINPID= are recorded with the
// sender, and With rewrites the store.
func TestManager(t *testing.T) {
	m, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	t.Setenv(sdnotify.EnvSocket, m.Path)

	memfd := func(content string) int {
		fd, err := unix.MemfdCreate(content, unix.MFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		unix.Write(fd, []byte(content))
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	for _, s := range []struct {
		name string
		fds  []int
	}{{"a", []int{memfd("a1"), memfd("a2")}}, {"b", []int{memfd("b1")}}, {"c", []int{memfd("c1")}}} {
		if ok, err := sdnotify.Store(s.name, s.fds...); !ok || err != nil {
			t.Fatalf("store %s: %v %v", s.name, ok, err)
		}
	}
	if ok, err := sdnotify.Remove("a"); !ok || err != nil {
		t.Fatalf("remove a: %v %v", ok, err)
	}
	pid := os.Getpid()
	if ok, err := sdnotify.Notify("READY=1\nMAINPID=" + strconv.Itoa(pid)); !ok || err != nil {
		t.Fatalf("ready: %v %v", ok, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !m.Ready(pid) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !m.Ready(pid) || m.MainPID() != pid {
		t.Fatalf("ready %v, main pid %d; want true, %d (log %q)", m.Ready(pid), m.MainPID(), pid, m.Log())
	}
	if got := len(m.Log()); got != 5 {
		t.Errorf("%d messages recorded, want 5: %q", got, m.Log())
	}

	var names, contents []string
	m.With(func(store []Stored) []Stored {
		for _, f := range store {
			names = append(names, f.Name)
			b := make([]byte, 8)
			n, _ := unix.Pread(f.FD, b, 0)
			contents = append(contents, string(b[:n]))
		}
		return store
	})
	if want := []string{"b", "c"}; !slices.Equal(names, want) || !slices.Equal(contents, []string{"b1", "c1"}) {
		t.Errorf("store %v holding %v, want %v holding [b1 c1]", names, contents, want)
	}

	m.With(func(store []Stored) []Stored {
		return slices.DeleteFunc(store, func(f Stored) bool {
			if f.Name == "b" {
				unix.Close(f.FD)
				return true
			}
			return false
		})
	})
	names = nil
	m.With(func(store []Stored) []Stored {
		for _, f := range store {
			names = append(names, f.Name)
		}
		return store
	})
	if !slices.Equal(names, []string{"c"}) {
		t.Errorf("store after With dropped b: %v, want [c]", names)
	}
}
