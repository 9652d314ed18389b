package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// EnvSocket names the service manager's notification socket.
const EnvSocket = "NOTIFY_SOCKET"

// listenFDsStart is SD_LISTEN_FDS_START: passed fds begin at 3.
const listenFDsStart = 3

// Notify sends state (newline-separated VAR=VALUE lines) to the service
// manager, with fds attached (for FDSTORE=1). It reports false, with no
// error, when there is no service manager to tell.
func Notify(state string, fds ...int) (bool, error) {
	path := os.Getenv(EnvSocket)
	if path == "" {
		return false, nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("notify service manager: %w", err)
	}
	defer unix.Close(fd)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(fd, []byte(state), oob, &unix.SockaddrUnix{Name: path}, 0); err != nil {
		return false, fmt.Errorf("notify service manager (%s): %w", firstLine(state), err)
	}
	return true, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// Store puts fds in the service manager's fd store under name (FDSTORE=1,
// FDNAME=name). The fds stay the caller's too.
func Store(name string, fds ...int) (bool, error) {
	return Notify("FDSTORE=1\nFDNAME="+name, fds...)
}

// Remove takes every fd named name out of the store (FDSTOREREMOVE=1).
func Remove(name string) (bool, error) {
	return Notify("FDSTOREREMOVE=1\nFDNAME=" + name)
}

// File is one inherited fd and its name ("unknown" when the manager gave
// none).
type File struct {
	Name string
	FD   int
}

// Inherited returns the fds the service manager passed this process
// (LISTEN_FDS from 3 on, named by LISTEN_FDNAMES), or none when they are
// not for this process (LISTEN_PID). It clears the variables.
func Inherited() ([]File, error) { return inheritedFrom(listenFDsStart) }

func inheritedFrom(start int) ([]File, error) {
	defer func() {
		for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
			os.Unsetenv(v)
		}
	}()
	pid, n := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS")
	if pid == "" || n == "" {
		return nil, nil
	}
	if p, err := strconv.Atoi(pid); err != nil || p != os.Getpid() {
		return nil, nil
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 0 {
		return nil, fmt.Errorf("LISTEN_FDS=%q: not a count", n)
	}
	names := strings.Split(os.Getenv("LISTEN_FDNAMES"), ":")
	var out []File
	for i := range count {
		f := File{Name: "unknown", FD: start + i}
		if i < len(names) && names[i] != "" {
			f.Name = names[i]
		}
		unix.CloseOnExec(f.FD)
		out = append(out, f)
	}
	return out, nil
}

// Listener turns an inherited fd into a listener (the fd is then the
// listener's).
func Listener(f File) (net.Listener, error) {
	file := os.NewFile(uintptr(f.FD), f.Name)
	defer file.Close()
	return net.FileListener(file)
}
