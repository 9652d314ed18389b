package handover

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// EnvFD names the environment variable that tells a successor which fd is
// its end of the hand-over connection.
const EnvFD = "XLB_HANDOVER_FD"

// Timeouts bound each step; a step that overruns fails the hand-over.
type Timeouts struct {
	Hello   time.Duration // from start to the successor's HELLO (default 15 s)
	Prepare time.Duration // from the offer to READY (default 60 s)
	Step    time.Duration // every other step (default 5 s)
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Hello <= 0 {
		t.Hello = 15 * time.Second
	}
	if t.Prepare <= 0 {
		t.Prepare = 60 * time.Second
	}
	if t.Step <= 0 {
		t.Step = 5 * time.Second
	}
	return t
}

// Hello is the successor's introduction.
type Hello struct {
	Protocol int    `json:"protocol"`
	PID      int    `json:"pid"`
	Build    string `json:"build"`
	// States lists the state-document versions the successor reads.
	States []int `json:"states"`
}

// File is one fd handed over, by name.
type File struct {
	Name string
	FD   int
}

type offerBody struct {
	StateVersion int    `json:"state_version"`
	Reason       string `json:"reason,omitempty"`
	Files        int    `json:"files"`
}

// ChooseState returns the highest state-document version both sides know,
// or 0 when they share none (the successor then starts its state cold and
// still takes the files).
func ChooseState(ours, theirs []int) int {
	best := 0
	for _, v := range ours {
		if v > best && slices.Contains(theirs, v) {
			best = v
		}
	}
	return best
}

// Options start a successor.
type Options struct {
	Path string   // the executable
	Args []string // its arguments (without argv[0])
	Env  []string // its environment; EnvFD is added
	// Stdout and Stderr are files, not writers: a pipe copied by a
	// goroutine of this process would break when it exits.
	Stdout, Stderr *os.File
	Timeouts       Timeouts
}

// Predecessor is the running process's side of a hand-over.
type Predecessor struct {
	c      *conn
	cmd    *exec.Cmd
	to     Timeouts
	exited chan struct{}
}

// Start starts the successor with its end of a fresh socketpair and
// waits for its HELLO: Launch, then WaitHello.
func Start(o Options) (*Predecessor, Hello, error) {
	p, err := Launch(o)
	if err != nil {
		return nil, Hello{}, err
	}
	h, err := p.WaitHello()
	if err != nil {
		return nil, Hello{}, err
	}
	return p, h, nil
}

// Launch starts the successor with its end of a fresh socketpair, without
// waiting for it: the caller can Abandon it from the start.
func Launch(o Options) (*Predecessor, error) {
	c, theirs, err := newPair()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Path, o.Args...)
	cmd.Env = append(slices.Clone(o.Env), EnvFD+"=3")
	cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
	cmd.ExtraFiles = []*os.File{theirs}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		c.close()
		return nil, fmt.Errorf("start successor %s: %w", o.Path, err)
	}
	p := &Predecessor{c: c, cmd: cmd, to: o.Timeouts.withDefaults(), exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// WaitHello waits for the launched successor's HELLO. A successor that
// exits or says nothing in time is killed and the error says why.
func (p *Predecessor) WaitHello() (Hello, error) {
	m, _, err := p.c.recv("wait for the successor's hello", p.to.Hello)
	if err == nil {
		err = expect(m, "hello", msgHello)
	}
	var h Hello
	if err == nil {
		err = json.Unmarshal(m.Body, &h)
	}
	if err == nil && h.Protocol != Protocol {
		err = fmt.Errorf("successor speaks hand-over protocol %d, this process %d", h.Protocol, Protocol)
	}
	if err == nil && h.PID != p.cmd.Process.Pid {
		err = fmt.Errorf("hello from pid %d, successor is %d", h.PID, p.cmd.Process.Pid)
	}
	if err != nil {
		p.Abandon()
		return Hello{}, err
	}
	return h, nil
}

// PID is the successor's process id.
func (p *Predecessor) PID() int { return p.cmd.Process.Pid }

// Offer sends the files (the caller keeps its copies and closes them when
// it is done) and the state document of version stateVersion (0: none,
// with reason), which travels in a sealed memfd.
func (p *Predecessor) Offer(stateVersion int, state []byte, reason string, files []File) error {
	sf, err := stateFile(state)
	if err != nil {
		return err
	}
	defer sf.Close()
	return p.OfferSealed(stateVersion, int(sf.Fd()), reason, files)
}

// OfferSealed is Offer with the state document already in stateFD, a
// memfd sealed against every change (F_SEAL_SHRINK, GROW, WRITE, SEAL),
// which stays the caller's: a large document is written there piece by
// piece, never whole in memory.
func (p *Predecessor) OfferSealed(stateVersion int, stateFD int, reason string, files []File) error {
	count := len(files)
	for len(files) > 0 {
		n := min(len(files), maxFDsPerMessage)
		m := message{Type: msgFiles}
		fds := make([]int, n)
		for i, f := range files[:n] {
			m.Names = append(m.Names, f.Name)
			fds[i] = f.FD
		}
		if err := p.c.send(m, fds, p.to.Step); err != nil {
			return err
		}
		files = files[n:]
	}
	body, _ := json.Marshal(offerBody{StateVersion: stateVersion, Reason: reason, Files: count})
	return p.c.send(message{Type: msgOffer, Body: body, Names: []string{"state"}}, []int{stateFD}, p.to.Step)
}

// WaitReady waits for the successor to finish preparing and returns the
// notes it sent with READY (what it could not take over as it was, say).
// Its refusal is a *RefusedError with its reason.
func (p *Predecessor) WaitReady() ([]string, error) {
	m, fds, err := p.c.recv("wait for the successor to prepare", p.to.Prepare)
	closeAll(fds)
	if err != nil {
		return nil, err
	}
	if err := expect(m, "prepare", msgReady); err != nil {
		return nil, err
	}
	var notes []string
	if len(m.Body) > 0 {
		if err := json.Unmarshal(m.Body, &notes); err != nil {
			return nil, fmt.Errorf("prepare: bad notes: %w", err)
		}
	}
	return notes, nil
}

// Cutover sends body (the workers' hand-over, taken after they stopped)
// and waits for DONE. A *RefusedError means the successor failed before
// it touched anything: the caller resumes. Any other error leaves it
// unknown whether the successor started driving the rings.
func (p *Predecessor) Cutover(body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("cut-over: %w", err)
	}
	if err := p.c.send(message{Type: msgCutover, Body: b}, nil, p.to.Step); err != nil {
		return err
	}
	m, fds, err := p.c.recv("wait for the successor to take over", p.to.Step)
	closeAll(fds)
	if err != nil {
		return err
	}
	return expect(m, "cut-over", msgDone)
}

// Abandon kills the successor (if it still runs), reaps it and closes the
// connection: a failed hand-over.
func (p *Predecessor) Abandon() {
	p.c.close()
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// Close closes the connection after a completed hand-over; the successor
// runs on.
func (p *Predecessor) Close() error { return p.c.close() }

// Exited is closed when the successor process has exited.
func (p *Predecessor) Exited() <-chan struct{} { return p.exited }

// stateFile puts doc in a memfd sealed against every change.
func stateFile(doc []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("xlb-handover-state", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("state memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "xlb-handover-state")
	if _, err := f.Write(doc); err != nil {
		f.Close()
		return nil, fmt.Errorf("write state memfd: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal state memfd: %w", err)
	}
	return f, nil
}

// Successor is the new process's side of a hand-over.
type Successor struct {
	c  *conn
	to Timeouts
}

// Inherited returns the hand-over connection this process was started
// with, or nil when it was started normally. It clears EnvFD, so the
// process's own successors do not inherit it, and checks that the
// connection comes from the parent process.
func Inherited(to Timeouts) (*Successor, error) {
	v, ok := os.LookupEnv(EnvFD)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(EnvFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q: not a file descriptor", EnvFD, v)
	}
	unix.CloseOnExec(fd)
	c, err := fileConn(os.NewFile(uintptr(fd), "xlb-handover"))
	if err != nil {
		return nil, err
	}
	pid, err := c.peerPID()
	if err != nil {
		c.close()
		return nil, fmt.Errorf("hand-over peer: %w", err)
	}
	if pid != os.Getppid() {
		c.close()
		return nil, fmt.Errorf("hand-over connection created by pid %d, not by the parent %d", pid, os.Getppid())
	}
	return &Successor{c: c, to: to.withDefaults()}, nil
}

// Hello introduces this process (Protocol and PID are filled in).
func (s *Successor) Hello(h Hello) error {
	h.Protocol, h.PID = Protocol, os.Getpid()
	b, _ := json.Marshal(h)
	return s.c.send(message{Type: msgHello, Body: b}, nil, s.to.Step)
}

// Offer is what the predecessor hands over.
type Offer struct {
	StateVersion int    // 0: no state document this process reads
	Reason       string // why, when StateVersion is 0
	State        []byte
	files        map[string]int
}

// Take removes the named fd from the offer and returns it; the caller
// owns it from then on.
func (o *Offer) Take(name string) (int, bool) {
	fd, ok := o.files[name]
	if ok {
		delete(o.files, name)
	}
	return fd, ok
}

// Names lists the fds not taken yet.
func (o *Offer) Names() []string {
	var out []string
	for n := range o.files {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Close closes every fd not taken.
func (o *Offer) Close() {
	for n, fd := range o.files {
		unix.Close(fd)
		delete(o.files, n)
	}
}

// ReceiveOffer receives the files and the state document.
func (s *Successor) ReceiveOffer() (*Offer, error) {
	o := &Offer{files: map[string]int{}}
	for {
		m, fds, err := s.c.recv("receive the hand-over", s.to.Prepare)
		if err == nil {
			err = expect(m, "receive the hand-over", msgFiles, msgOffer)
		}
		if err != nil {
			closeAll(fds)
			o.Close()
			return nil, err
		}
		if m.Type == msgFiles {
			for i, name := range m.Names {
				if old, dup := o.files[name]; dup {
					unix.Close(old)
				}
				o.files[name] = fds[i]
			}
			continue
		}
		var b offerBody
		if err := json.Unmarshal(m.Body, &b); err != nil || len(fds) != 1 {
			closeAll(fds)
			o.Close()
			return nil, fmt.Errorf("receive the hand-over: bad offer (%v)", err)
		}
		o.StateVersion, o.Reason = b.StateVersion, b.Reason
		f := os.NewFile(uintptr(fds[0]), "state")
		st, err := readAll(f)
		f.Close()
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("read the state document: %w", err)
		}
		o.State = st
		return o, nil
	}
}

func readAll(f *os.File) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	b := make([]byte, st.Size)
	if _, err := f.ReadAt(b, 0); err != nil && st.Size > 0 {
		return nil, err
	}
	return b, nil
}

// Ready tells the predecessor everything is prepared, with notes for its
// caller (the operator).
func (s *Successor) Ready(notes ...string) error {
	m := message{Type: msgReady}
	if len(notes) > 0 {
		m.Body, _ = json.Marshal(notes)
	}
	return s.c.send(m, nil, s.to.Step)
}

// Abort tells the predecessor this process gives up before the cut-over,
// and why; the predecessor keeps serving.
func (s *Successor) Abort(reason string) error {
	return s.c.send(message{Type: msgAbort, Reason: reason}, nil, s.to.Step)
}

// WaitCutover waits for the predecessor's cut-over and decodes its body
// into v.
func (s *Successor) WaitCutover(v any) error {
	m, fds, err := s.c.recv("wait for the cut-over", s.to.Prepare)
	closeAll(fds)
	if err == nil {
		err = expect(m, "cut-over", msgCutover)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(m.Body, v); err != nil {
		return fmt.Errorf("cut-over: %w", err)
	}
	return nil
}

// Done tells the predecessor this process serves now.
func (s *Successor) Done() error { return s.c.send(message{Type: msgDone}, nil, s.to.Step) }

// Failed tells the predecessor this process failed after the cut-over
// but before it touched anything, so the predecessor resumes.
func (s *Successor) Failed(reason string) error {
	return s.c.send(message{Type: msgFailed, Reason: reason}, nil, s.to.Step)
}

// Close closes the connection.
func (s *Successor) Close() error { return s.c.close() }

// IsRefused reports whether err is the successor's own refusal.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
