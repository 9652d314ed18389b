package sdnotifytest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Stored is one fd in the store and the name it was stored under.
type Stored struct {
	Name string
	FD   int
}

// Manager is the stand-in service manager: its notification socket at
// Path and what it holds and heard.
type Manager struct {
	// Path is the notification socket: the daemon's NOTIFY_SOCKET.
	Path string
	fd   int
	done chan struct{}

	mu      sync.Mutex
	store   []Stored
	mainPID int
	ready   map[int]bool
	log     []string
}

// New binds the notification socket in dir (as "notify") and serves it
// until Close.
func New(dir string) (*Manager, error) {
	m := &Manager{Path: filepath.Join(dir, "notify"), ready: map[int]bool{}, done: make(chan struct{})}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: m.Path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("notify socket %s: %w", m.Path, err)
	}
	// Like systemd: know who sent each message. A large receive buffer:
	// a daemon storing its state in parts sends bursts of datagrams, and
	// a full queue would block it in sendmsg.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	m.fd = fd
	go m.serve()
	return m, nil
}

func (m *Manager) serve() {
	defer close(m.done)
	buf, oob := make([]byte, 4096), make([]byte, 4096)
	for {
		n, oobn, _, _, err := unix.Recvmsg(m.fd, buf, oob, 0)
		if err != nil || n == 0 && oobn == 0 {
			return
		}
		var fds []int
		pid := 0
		cms, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, cm := range cms {
			if r, err := unix.ParseUnixRights(&cm); err == nil {
				fds = append(fds, r...)
			} else if cred, err := unix.ParseUnixCredentials(&cm); err == nil {
				pid = int(cred.Pid)
			}
		}
		vars := map[string]string{}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				vars[k] = v
			}
		}
		m.mu.Lock()
		m.log = append(m.log, fmt.Sprintf("%d: %q (%d fds)", pid, buf[:n], len(fds)))
		switch {
		case vars["FDSTORE"] == "1":
			for _, fd := range fds {
				m.store = append(m.store, Stored{vars["FDNAME"], fd})
			}
			fds = nil
		case vars["FDSTOREREMOVE"] == "1":
			kept := m.store[:0]
			for _, f := range m.store {
				if f.Name == vars["FDNAME"] {
					unix.Close(f.FD)
				} else {
					kept = append(kept, f)
				}
			}
			m.store = kept
		}
		if p, ok := vars["MAINPID"]; ok {
			m.mainPID, _ = strconv.Atoi(p)
		}
		if vars["READY"] == "1" {
			m.ready[pid] = true
		}
		m.mu.Unlock()
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

// With runs f on the store under the manager's lock, and makes f's result
// the store: fds f drops from it are f's to close, fds it adds the
// manager's. No message is taken meanwhile, so the fds stay open while f
// reads or duplicates them.
func (m *Manager) With(f func(store []Stored) []Stored) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.store = f(m.store)
}

// Ready reports whether pid said READY=1.
func (m *Manager) Ready(pid int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready[pid]
}

// MainPID is the last MAINPID= received (0: none).
func (m *Manager) MainPID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mainPID
}

// Log is every message received, in order: "PID: "TEXT" (N fds)".
func (m *Manager) Log() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.log...)
}

// Close stops serving and closes the socket and every stored fd.
func (m *Manager) Close() {
	unix.Shutdown(m.fd, unix.SHUT_RDWR)
	unix.Close(m.fd)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.store {
		unix.Close(f.FD)
	}
	m.store = nil
}
