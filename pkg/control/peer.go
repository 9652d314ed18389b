package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"

	"golang.org/x/sys/unix"
)

// Access levels, as HAProxy's stats socket levels: whoever may connect to
// the socket may read (status, backends, conntrack list and count, lookup);
// only an admin may change anything (every method but GET). The kernel's
// SO_PEERCRED says who the peer is: root, or the daemon's own user, is
// admin; anyone else who could connect — a member of control_socket_group,
// for which the socket is group read-write — is read-only.

// Level is what a peer may do through the control socket.
type Level uint8

// Levels.
const (
	LevelNone     Level = iota // no credentials known: nothing that changes state
	LevelReadOnly              // GET endpoints only
	LevelAdmin                 // everything
)

func (l Level) String() string {
	switch l {
	case LevelReadOnly:
		return "read-only"
	case LevelAdmin:
		return "admin"
	}
	return "none"
}

// Peer is the process at the other end of a control connection, as the
// kernel reported it when it connected (SO_PEERCRED).
type Peer struct {
	PID   int32
	UID   uint32
	GID   uint32
	Level Level
}

func (p Peer) String() string {
	if p.Level == LevelNone {
		return "an unidentified peer"
	}
	return fmt.Sprintf("uid %d (pid %d)", p.UID, p.PID)
}

type peerKey struct{}

// WithPeer returns ctx carrying p; Serve does this for every connection
// (tests of a handler served otherwise use it to act as a peer).
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom returns the peer of the request whose context is ctx; a context
// without one has Level LevelNone.
func PeerFrom(ctx context.Context) Peer {
	p, _ := ctx.Value(peerKey{}).(Peer)
	return p
}

// levelOf is the level of a peer with user id uid.
func levelOf(uid uint32) Level {
	if uid == 0 || uid == uint32(os.Geteuid()) {
		return LevelAdmin
	}
	return LevelReadOnly
}

// peerContext is the http.Server's ConnContext: it asks the kernel for the
// peer's credentials once per connection. A connection whose credentials
// cannot be read carries none, and may change nothing.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	p := peerOf(c)
	if p.Level == LevelNone {
		return ctx
	}
	return WithPeer(ctx, p)
}

// peerOf asks the kernel who is at the other end of a unix socket
// connection (SO_PEERCRED: the credentials at connect or listen time). A
// connection whose credentials cannot be read gets Level LevelNone.
func peerOf(c net.Conn) Peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return Peer{}
	}
	return Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid, Level: levelOf(cred.Uid)}
}

// adminReads are the GET endpoints only an admin may use: a capture
// shows the clients' packets, payloads included.
var adminReads = map[string]bool{"/v1/capture": true}

// authorize refuses every request but a GET to a peer that is not admin
// (403, with who it is and why), and the GETs of adminReads.
func authorize(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if adminReads[r.URL.Path] {
			if p := PeerFrom(r.Context()); p.Level != LevelAdmin {
				writeError(w, Errorf(http.StatusForbidden, "read-only access: %s may not capture packets (they carry the clients' data; capturing needs root)", p))
				return
			}
		}
		if r.Method != http.MethodGet {
			if p := PeerFrom(r.Context()); p.Level != LevelAdmin {
				writeError(w, Errorf(http.StatusForbidden, "read-only access: %s may read the appliance but not change it (changes need root)", p))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// LookupGroup returns the id of group, a name or a number.
func LookupGroup(group string) (int, error) {
	if n, err := strconv.Atoi(group); err == nil && n >= 0 {
		return n, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}

// ShareWithGroup gives group read-only access to the socket at path: it
// becomes owned by group and mode 0660 (connecting needs write
// permission). An empty group makes it 0600 again, root only.
func ShareWithGroup(path, group string) error {
	if group == "" {
		if err := os.Chmod(path, 0o600); err != nil {
			return fmt.Errorf("control socket: %w", err)
		}
		return nil
	}
	gid, err := LookupGroup(group)
	if err != nil {
		var unknown user.UnknownGroupError
		if errors.As(err, &unknown) {
			return fmt.Errorf("control socket group %q: no such group", group)
		}
		return fmt.Errorf("control socket group %q: %w", group, err)
	}
	if err := os.Chown(path, -1, gid); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	return nil
}
