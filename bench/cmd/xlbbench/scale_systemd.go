package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// fdStore stands in for systemd's notification socket and file
// descriptor store (scale --systemd): the daemon under Type=notify stores
// its state document there at every publication, which is part of what a
// change costs. It keeps what FDSTORE passes and closes what
// FDSTOREREMOVE names, and counts the messages.
type fdStore struct {
	path string
	fd   int
	done chan struct{}

	mu       sync.Mutex
	files    map[string][]int
	messages int
}

func newFDStore() (*fdStore, error) {
	dir, err := os.MkdirTemp("", "xlbbench-notify")
	if err != nil {
		return nil, err
	}
	s := &fdStore{path: filepath.Join(dir, "notify"), files: map[string][]int{}, done: make(chan struct{})}
	if s.fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	if err := unix.Bind(s.fd, &unix.SockaddrUnix{Name: s.path}); err != nil {
		unix.Close(s.fd)
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	go s.serve()
	return s, nil
}

func (s *fdStore) serve() {
	defer close(s.done)
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(64*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(s.fd, buf, oob, 0)
		if err != nil || n == 0 && oobn == 0 {
			return
		}
		var fds []int
		cms, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, cm := range cms {
			if r, err := unix.ParseUnixRights(&cm); err == nil {
				fds = append(fds, r...)
			}
		}
		vars := map[string]string{}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				vars[k] = v
			}
		}
		s.mu.Lock()
		s.messages++
		switch {
		case vars["FDSTORE"] == "1":
			s.files[vars["FDNAME"]] = append(s.files[vars["FDNAME"]], fds...)
			fds = nil
		case vars["FDSTOREREMOVE"] == "1":
			for _, fd := range s.files[vars["FDNAME"]] {
				unix.Close(fd)
			}
			delete(s.files, vars["FDNAME"])
		}
		s.mu.Unlock()
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

// summary says what the store holds: its fds, how many of them are the
// state document's and their bytes, and the messages received.
func (s *fdStore) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	fds, stateFDs, stateBytes := 0, 0, int64(0)
	for name, list := range s.files {
		fds += len(list)
		if name == "state" || strings.HasPrefix(name, "state-") {
			for _, fd := range list {
				var st unix.Stat_t
				if unix.Fstat(fd, &st) == nil {
					stateBytes += st.Size
				}
			}
			stateFDs += len(list)
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return fmt.Sprintf("%d fds (%d of the state document, %.1f MB; others %s), %d messages", fds, stateFDs, float64(stateBytes)/1e6, strings.Join(names, " "), s.messages)
}

func (s *fdStore) close() {
	unix.Shutdown(s.fd, unix.SHUT_RDWR)
	unix.Close(s.fd)
	<-s.done
	for _, list := range s.files {
		for _, fd := range list {
			unix.Close(fd)
		}
	}
	os.RemoveAll(filepath.Dir(s.path))
}
