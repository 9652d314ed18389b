package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/k8s/k8stest"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/lab/labtest"
)

func TestMain(m *testing.M) {
	code := k8stest.Main(m)
	if xlbBuild.dir != "" {
		os.RemoveAll(xlbBuild.dir)
	}
	os.Exit(code)
}

var xlbBuild struct {
	once      sync.Once
	dir, path string
	err       error
}

// xlbBinary builds cmd/xlb and cmd/xlb-k8s once, side by side (go build
// into a temporary directory, which TestMain removes), and returns xlb's
// path: `xlb k8s` runs the xlb-k8s beside it.
func xlbBinary(t *testing.T) string {
	t.Helper()
	xlbBuild.once.Do(func() {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			xlbBuild.err = fmt.Errorf("no go command to build xlb: %w", err)
			return
		}
		if xlbBuild.dir, err = os.MkdirTemp("", "xlb-k8s-e2e-"); err != nil {
			xlbBuild.err = err
			return
		}
		xlbBuild.path = filepath.Join(xlbBuild.dir, "xlb")
		start := time.Now()
		for _, cmd := range []string{"xlb", "xlb-k8s"} {
			out, err := exec.Command(goCmd, "build", "-o", filepath.Join(xlbBuild.dir, cmd), "github.com/xlbnet/xlb/cmd/"+cmd).CombinedOutput()
			if err != nil {
				xlbBuild.err = fmt.Errorf("go build ./cmd/%s: %v\n%s", cmd, err, out)
				return
			}
		}
		t.Logf("built xlb and xlb-k8s in %.1fs", time.Since(start).Seconds())
	})
	if xlbBuild.err != nil {
		t.Fatal(xlbBuild.err)
	}
	return xlbBuild.path
}

// labWith builds a lab with a unique prefix, torn down when the test ends.
func labWith(t *testing.T, o lab.Options) *lab.Lab {
	t.Helper()
	return labtest.Up(t, "k", o)
}

// lineBuffer keeps a process's lines (a test's processes log hundreds):
// counted by the tests, the last ones shown in error messages.
type lineBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *lineBuffer) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, s)
}

// String is the last 100 lines.
func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines[max(0, len(b.lines)-100):], "\n")
}

// count is the number of kept lines containing s.
func (b *lineBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// proc is the xlb binary (`xlb run` or `xlb k8s`) running in a lab
// namespace.
type proc struct {
	cmd     *exec.Cmd
	log     *lineBuffer
	exited  chan error
	stopped bool
}

// startProc runs xlb with args in namespace ns and waits (up to a minute)
// for a log line containing ready. Its lines also go to logf.
func startProc(t *testing.T, ns string, args []string, ready string, logf func(string)) (*proc, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, xlbBinary(t)}, args...)...)
	// A service manager's variables of this process are not the lab
	// daemon's.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(v string) bool {
		return strings.HasPrefix(v, "NOTIFY_SOCKET=") || strings.HasPrefix(v, "LISTEN_")
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, log: &lineBuffer{}, exited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start xlb %s: %w", args[0], err)
	}
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			p.log.add(line)
			if logf != nil {
				logf(line)
			}
			if strings.Contains(line, ready) {
				once.Do(func() { close(up) })
			}
		}
		p.exited <- cmd.Wait()
	}()
	select {
	case <-up:
		return p, nil
	case err := <-p.exited:
		p.exited <- err
		return nil, fmt.Errorf("xlb %s exited before %q (%v):\n%s", args[0], ready, err, p.log)
	case <-time.After(time.Minute):
		p.Stop()
		return nil, fmt.Errorf("xlb %s: no %q within a minute:\n%s", args[0], ready, p.log)
	}
}

// Stop ends the process with SIGTERM (SIGKILL after 15 s); a clean exit is
// nil.
func (p *proc) Stop() error {
	if p.stopped {
		return nil
	}
	p.stopped = true
	select {
	case err := <-p.exited:
		p.exited <- err
		return fmt.Errorf("exited before it was stopped (%v):\n%s", err, p.log)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("exited with %v:\n%s", err, p.log)
		}
		return err
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		err := <-p.exited
		p.exited <- err
		return fmt.Errorf("did not stop within 15s; killed:\n%s", p.log)
	}
}
