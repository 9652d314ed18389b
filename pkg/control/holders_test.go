package control

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// listenChildEnv makes the test binary listen on the socket path it names,
// pass the listener to its parent over descriptor 3 and exit: a listener
// whose maker has exited, as after xlb restart's hand-over.
const listenChildEnv = "XLB_CONTROL_LISTEN_CHILD"

func listenChild(path string) int {
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	f, err := ln.(*net.UnixListener).File()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := unix.Sendmsg(3, []byte{1}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestServedSocketNamesItsHolder: a second daemon refused a served control
// socket names the process that holds it, not the one that made its
// listener (the kernel's peer credentials) when that one handed it over
// and exited.
func TestServedSocketNamesItsHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xlb.sock")
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "ours"), os.NewFile(uintptr(pair[1]), "theirs")
	defer ours.Close()
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), listenChildEnv+"="+path)
	child.ExtraFiles = []*os.File{theirs}
	out, err := child.CombinedOutput()
	theirs.Close()
	if err != nil {
		t.Fatalf("the child that makes the listener: %v: %s", err, out)
	}
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(pair[0], make([]byte, 1), oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("no listener passed: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("no listener passed: %v", err)
	}
	ln, err := net.FileListener(os.NewFile(uintptr(fds[0]), "listener"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	maker := child.Process.Pid

	_, err = Listen(path)
	if want := fmt.Sprintf("another process (pid %d) is serving it", os.Getpid()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a served socket whose maker exited: %v; want %q (pid %d made it)", err, want, maker)
	}

	// Where no holder can be found (another network namespace's socket):
	// the maker, and whether it has exited.
	missing := filepath.Join(t.TempDir(), "elsewhere.sock")
	for _, c := range []struct {
		creator int32
		want    string
	}{
		{int32(maker), fmt.Sprintf("another process (its listener was made by pid %d, which has exited", maker)},
		{int32(os.Getpid()), fmt.Sprintf("another process (pid %d)", os.Getpid())},
		{0, "another process"},
	} {
		if got := servingWho(missing, c.creator); !strings.HasPrefix(got, c.want) {
			t.Errorf("servingWho(creator %d) = %q, want %q…", c.creator, got, c.want)
		}
	}
}
