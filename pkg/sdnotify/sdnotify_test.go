package sdnotify

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// manager is a stand-in for the service manager's notification socket.
func manager(t *testing.T) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSocket, path)
	return fd, path
}

func receive(t *testing.T, fd int) (string, []int) {
	t.Helper()
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(16*4))
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fds []int
	cms, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for _, cm := range cms {
		r, _ := unix.ParseUnixRights(&cm)
		fds = append(fds, r...)
	}
	return string(buf[:n]), fds
}

func TestNotifyAndStore(t *testing.T) {
	mfd, _ := manager(t)
	if ok, err := Notify("READY=1\nSTATUS=serving"); !ok || err != nil {
		t.Fatalf("Notify = %v, %v", ok, err)
	}
	if msg, fds := receive(t, mfd); msg != "READY=1\nSTATUS=serving" || len(fds) != 0 {
		t.Errorf("got %q with %d fds", msg, len(fds))
	}
	mem, err := unix.MemfdCreate("arena", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mem)
	unix.Write(mem, []byte("kept"))
	if ok, err := Store("ct-q0", mem); !ok || err != nil {
		t.Fatalf("Store = %v, %v", ok, err)
	}
	msg, fds := receive(t, mfd)
	if msg != "FDSTORE=1\nFDNAME=ct-q0" || len(fds) != 1 {
		t.Fatalf("got %q with %d fds", msg, len(fds))
	}
	buf := make([]byte, 4)
	if _, err := unix.Pread(fds[0], buf, 0); err != nil || string(buf) != "kept" {
		t.Errorf("the stored fd reads %q (%v)", buf, err)
	}
	unix.Close(fds[0])
	if _, err := Remove("ct-q0"); err != nil {
		t.Fatal(err)
	}
	if msg, _ := receive(t, mfd); msg != "FDSTOREREMOVE=1\nFDNAME=ct-q0" {
		t.Errorf("got %q", msg)
	}
	t.Setenv(EnvSocket, "")
	if ok, err := Notify("READY=1"); ok || err != nil {
		t.Errorf("without a manager: %v, %v; want false, nil", ok, err)
	}
}

func TestInherited(t *testing.T) {
	// Two fds at 3 and 4, as a manager passes them.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for i, f := range []*os.File{r, w} {
		if err := unix.Dup2(int(f.Fd()), 3+i+100); err != nil {
			t.Fatal(err)
		}
	}
	// Use high numbers the test owns instead of 3 and 4: shift the start.
	t.Setenv("LISTEN_PID", fmt.Sprint(os.Getpid()))
	t.Setenv("LISTEN_FDS", "2")
	t.Setenv("LISTEN_FDNAMES", "state:ct-q0")
	got, err := inheritedFrom(103)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (File{"state", 103}) || got[1] != (File{"ct-q0", 104}) {
		t.Errorf("Inherited = %+v", got)
	}
	if os.Getenv("LISTEN_FDS") != "" || os.Getenv("LISTEN_PID") != "" {
		t.Error("LISTEN_* still set")
	}
	t.Setenv("LISTEN_PID", "1")
	t.Setenv("LISTEN_FDS", "2")
	if got, _ := inheritedFrom(103); len(got) != 0 {
		t.Errorf("fds for another pid taken: %+v", got)
	}
	t.Setenv("LISTEN_PID", fmt.Sprint(os.Getpid()))
	t.Setenv("LISTEN_FDS", "x")
	if _, err := inheritedFrom(103); err == nil || !strings.Contains(err.Error(), "LISTEN_FDS") {
		t.Errorf("bad LISTEN_FDS: %v", err)
	}
}
