package benchutil

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// Child is a helper process of a benchmark: the test binary itself,
// started again in a role named by an environment variable (its TestMain
// dispatches on it), so that the helper's CPU is its own and not the
// measured process's. The parent talks to it through its stdin and
// stdout; closing its stdin asks it to end.
type Child struct {
	In  io.WriteCloser
	Out *bufio.Reader

	cmd  *exec.Cmd
	once sync.Once
}

// Self is a command, made by command (exec.Command, or a namespace's
// Command), that runs this test binary without running any of its tests
// or benchmarks (a role's TestMain takes over before).
func Self(command func(name string, args ...string) *exec.Cmd) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return command(self, "-test.run=^$", "-test.bench=^$"), nil
}

// StartChild starts cmd (Self's) with env added to this process's
// environment, its stderr this process's, and stdin and stdout piped.
// It ends, if Stop did not end it before, when tb's test ends.
func StartChild(tb testing.TB, cmd *exec.Cmd, env ...string) *Child {
	tb.Helper()
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", cmd.Path, err)
	}
	c := &Child{In: in, Out: bufio.NewReader(out), cmd: cmd}
	tb.Cleanup(c.Stop)
	return c
}

// Stop closes the child's stdin and waits for it to end.
func (c *Child) Stop() {
	c.once.Do(func() {
		c.In.Close()
		c.cmd.Wait()
	})
}
