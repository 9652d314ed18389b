//go:build !xlbctl

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/lab"
)

// lineBuffer keeps a process's output for error messages.
type lineBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *lineBuffer) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, s)
	if len(b.lines) > 200 {
		b.lines = b.lines[len(b.lines)-200:]
	}
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// labXLB is an xlb daemon running in a lab's appliance namespace.
type labXLB struct {
	cmd    *exec.Cmd
	ns     string
	dir    string
	config string
	log    *lineBuffer
	exited chan error
}

// startLabXLB writes a configuration for rules and starts `xlb run` in the
// lab's xlb namespace (this same executable, under ip netns exec), and
// waits until it serves. The daemon's log lines go to logf.
func startLabXLB(ctx context.Context, l *lab.Lab, dir string, rules []lab.Rule, logf func(string)) (*labXLB, error) {
	return startLabXLBOn(ctx, l, l.Appliances[0], dir, rules, logf)
}

// startLabXLBOn does startLabXLB on appliance a; each appliance needs a
// directory of its own (state file, control socket).
func startLabXLBOn(ctx context.Context, l *lab.Lab, a *lab.Appliance, dir string, rules []lab.Rule, logf func(string)) (*labXLB, error) {
	cfg, err := l.WriteConfigOn(a, dir, rules)
	if err != nil {
		return nil, fmt.Errorf("write lab config: %w", err)
	}
	return runLabXLB(ctx, a.NS.Name, dir, cfg, logf)
}

// runLabXLB starts `xlb run -c cfg` in namespace ns and waits until it
// serves.
func runLabXLB(ctx context.Context, ns, dir, cfg string, logf func(string)) (*labXLB, error) {
	return runLabXLBWith(ctx, ns, dir, cfg, logf, labStart{})
}

// labStart is what a service manager adds to a start (the tests of the
// systemd paths): environment, fds from 3 on, and LISTEN_PID set to the
// daemon's own pid.
type labStart struct {
	Env       []string
	Files     []*os.File
	ListenPID bool
}

func runLabXLBWith(ctx context.Context, ns, dir, cfg string, logf func(string), o labStart) (*labXLB, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := []string{"netns", "exec", ns}
	if o.ListenPID {
		// The shell's pid is the daemon's after exec, as systemd sets it.
		argv = append(argv, "sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`)
	}
	cmd := exec.Command("ip", append(argv, self, "run", "-c", cfg)...)
	// A service manager's variables of this process are not the lab
	// daemon's (a test run under systemd must not reach its manager).
	env := slices.DeleteFunc(os.Environ(), func(v string) bool {
		return strings.HasPrefix(v, "NOTIFY_SOCKET=") || strings.HasPrefix(v, "LISTEN_")
	})
	cmd.Env = append(append(env, runMainEnv+"=1"), o.Env...)
	cmd.ExtraFiles = o.Files
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	x := &labXLB{cmd: cmd, ns: ns, dir: dir, config: cfg, log: &lineBuffer{}, exited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start xlb: %w", err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			x.log.add(line)
			if logf != nil {
				logf(line)
			}
			if strings.Contains(line, "msg=serving") {
				once.Do(func() { close(ready) })
			}
		}
		x.exited <- cmd.Wait()
	}()
	select {
	case <-ready:
		return x, nil
	case err := <-x.exited:
		return nil, fmt.Errorf("xlb exited before serving (%v):\n%s", err, x.log)
	case <-time.After(60 * time.Second):
		x.Stop()
		return nil, fmt.Errorf("xlb did not start serving within 60s:\n%s", x.log)
	case <-ctx.Done():
		x.Stop()
		return nil, ctx.Err()
	}
}

// Reload sends SIGHUP.
func (x *labXLB) Reload() error { return x.cmd.Process.Signal(syscall.SIGHUP) }

// Stop sends SIGTERM and waits (SIGKILL after 15 s). A clean exit is nil.
func (x *labXLB) Stop() error {
	select { // already exited (not ProcessState: the waiting goroutine writes it)
	case err := <-x.exited:
		x.exited <- err
		return nil
	default:
	}
	_ = x.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-x.exited:
		x.exited <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("xlb exited with %v:\n%s", err, x.log)
		}
		return err
	case <-time.After(15 * time.Second):
		// SIGQUIT: the Go runtime writes every goroutine's stack to the
		// log, which says where the stop hung.
		_ = x.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case err := <-x.exited:
			x.exited <- err
		case <-time.After(5 * time.Second):
		}
		_ = x.cmd.Process.Kill()
		return fmt.Errorf("xlb did not stop within 15s after SIGTERM; SIGQUIT, then killed:\n%s", x.log)
	}
}

// Socket is the daemon's control socket (WriteConfig puts it in dir).
func (x *labXLB) Socket() string { return filepath.Join(x.dir, "xlb.sock") }

// Kill ends the daemon with SIGKILL (a crash: nothing withdrawn, the XDP
// program left attached) and waits for it.
func (x *labXLB) Kill() error {
	if err := x.cmd.Process.Kill(); err != nil {
		return err
	}
	x.wait()
	return nil
}

// wait waits until the daemon has exited and returns how it ended
// (Signal(SIGKILL), then wait, is Kill in two steps).
func (x *labXLB) wait() error {
	err := <-x.exited
	x.exited <- err
	return err
}

// Signal sends sig (SIGSTOP, SIGCONT) to the daemon.
func (x *labXLB) Signal(sig os.Signal) error { return x.cmd.Process.Signal(sig) }

// Restart starts the daemon again with the same configuration, in the same
// namespace, once the previous process has exited.
func (x *labXLB) Restart(ctx context.Context, logf func(string)) (*labXLB, error) {
	return runLabXLB(ctx, x.ns, x.dir, x.config, logf)
}

// waitRulesHealthy waits until every rule of the daemon has finished its
// first round of health checks and serves from a tier with a backend that
// passes (PRIMARY, FAILOVER or PRIMARY_FALLBACK), and says so.
func (x *labXLB) waitRulesHealthy(ctx context.Context, timeout time.Duration, say func(string, ...any)) error {
	cl := control.NewClient(x.Socket())
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	last := "no answer on the control socket"
	for {
		st, err := cl.Status(ctx, control.StatusQuery{})
		if err == nil {
			var waiting, ok []string
			for _, r := range st.Rules {
				switch {
				case !r.FirstChecksDone:
					waiting = append(waiting, r.Name+": first health checks under way")
				case r.Tier != "PRIMARY" && r.Tier != "FAILOVER" && r.Tier != "PRIMARY_FALLBACK":
					waiting = append(waiting, fmt.Sprintf("%s: tier %s (%s)", r.Name, r.Tier, r.Reason))
				default:
					ok = append(ok, fmt.Sprintf("%s %s (%d eligible)", r.Name, r.Tier, r.Eligible))
				}
			}
			if len(waiting) == 0 {
				say("%s: every rule healthy: %s", x.ns, strings.Join(ok, ", "))
				return nil
			}
			last = strings.Join(waiting, "; ")
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: rules not healthy within %v: %s", x.ns, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
