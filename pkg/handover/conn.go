package handover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Protocol is the version of the message exchange (not of the state
// document, which is versioned on its own).
const Protocol = 1

// Message types, in the order they are exchanged.
const (
	msgHello   = "hello"   // successor → predecessor: Hello
	msgFiles   = "files"   // predecessor → successor: a batch of named fds
	msgOffer   = "offer"   // predecessor → successor: Offer (after the files)
	msgReady   = "ready"   // successor → predecessor: prepared
	msgAbort   = "abort"   // successor → predecessor: gives up, reason
	msgCutover = "cutover" // predecessor → successor: workers stopped, body
	msgDone    = "done"    // successor → predecessor: serving
	msgFailed  = "failed"  // successor → predecessor: failed before touching anything, reason
)

// maxFDsPerMessage stays under the kernel's SCM_MAX_FD (253).
const maxFDsPerMessage = 200

// maxMessage bounds one message's JSON; the state document travels in a
// memfd, so messages stay small.
const maxMessage = 64 << 10

// message is one SOCK_SEQPACKET datagram: JSON, with fds in SCM_RIGHTS
// named by Names in order.
type message struct {
	Type   string          `json:"type"`
	Body   json.RawMessage `json:"body,omitempty"`
	Names  []string        `json:"names,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// conn is one end of the socketpair. Every receive has a deadline.
type conn struct {
	c *net.UnixConn
}

// newPair returns a connected SOCK_SEQPACKET pair: ours as a conn, the
// other as a file to pass to a child process.
func newPair() (*conn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("hand-over socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "xlb-handover")
	theirs := os.NewFile(uintptr(fds[1]), "xlb-handover-child")
	c, err := fileConn(ours)
	if err != nil {
		theirs.Close()
		return nil, nil, err
	}
	return c, theirs, nil
}

// fileConn wraps f (which it closes; the conn has its own copy).
func fileConn(f *os.File) (*conn, error) {
	defer f.Close()
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("hand-over socket: %w", err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("hand-over socket: fd %d is a %T, not a unix socket", f.Fd(), nc)
	}
	return &conn{c: uc}, nil
}

func (c *conn) close() error { return c.c.Close() }

// send writes one message with fds (which stay the caller's).
func (c *conn) send(m message, fds []int, timeout time.Duration) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("send %s: %w", m.Type, err)
	}
	if len(b) > maxMessage {
		return fmt.Errorf("send %s: message of %d bytes exceeds %d", m.Type, len(b), maxMessage)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.c.SetWriteDeadline(time.Now().Add(timeout))
	if _, _, err := c.c.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("send %s: %w", m.Type, err)
	}
	return nil
}

// errClosed says the other side closed the connection (it exited).
var errClosed = errors.New("the other process closed the hand-over connection")

// recv reads one message within timeout; its fds belong to the caller.
// what names the step for errors.
func (c *conn) recv(what string, timeout time.Duration) (message, []int, error) {
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(maxFDsPerMessage*4))
	c.c.SetReadDeadline(time.Now().Add(timeout))
	n, oobn, flags, _, err := c.c.ReadMsgUnix(buf, oob)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return message{}, nil, fmt.Errorf("%s: no answer within %v", what, timeout)
		}
		if errors.Is(err, io.EOF) {
			return message{}, nil, fmt.Errorf("%s: %w", what, errClosed)
		}
		return message{}, nil, fmt.Errorf("%s: %w", what, err)
	}
	fds, err := parseRights(oob[:oobn])
	if err != nil {
		return message{}, nil, fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 && oobn == 0 {
		return message{}, nil, fmt.Errorf("%s: %w", what, errClosed)
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		closeAll(fds)
		return message{}, nil, fmt.Errorf("%s: message truncated", what)
	}
	var m message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		closeAll(fds)
		return message{}, nil, fmt.Errorf("%s: bad message: %w", what, err)
	}
	if len(m.Names) != len(fds) {
		closeAll(fds)
		return message{}, nil, fmt.Errorf("%s: %d names for %d fds", what, len(m.Names), len(fds))
	}
	return m, fds, nil
}

func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	cms, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parse control message: %w", err)
	}
	var fds []int
	for _, cm := range cms {
		r, err := unix.ParseUnixRights(&cm)
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("parse fds: %w", err)
		}
		fds = append(fds, r...)
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// peerPID returns the pid SO_PEERCRED reports: for a socketpair, the
// process that created it.
func (c *conn) peerPID() (int, error) {
	rc, err := c.c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// expect checks that m is of type want; an abort or failure from the
// other side becomes a *RefusedError.
func expect(m message, what string, want ...string) error {
	for _, w := range want {
		if m.Type == w {
			return nil
		}
	}
	if m.Type == msgAbort || m.Type == msgFailed {
		return &RefusedError{Step: what, Reason: m.Reason}
	}
	return fmt.Errorf("%s: unexpected %q message", what, m.Type)
}

// RefusedError is the successor's reason for giving up (its ABORT before
// the cut-over or FAILED right after it, both before it touched anything).
type RefusedError struct {
	Step   string
	Reason string
}

func (e *RefusedError) Error() string { return e.Step + ": the successor gave up: " + e.Reason }
