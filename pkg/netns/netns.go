package netns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// runDir is where ip(8) keeps the bind mounts that name namespaces.
const runDir = "/run/netns"

// NS is a named network namespace.
type NS struct {
	Name string
}

// New creates the namespace name and brings its loopback up.
func New(name string) (*NS, error) {
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("create netns %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	ns := &NS{Name: name}
	if err := ns.Run("ip", "link", "set", "lo", "up"); err != nil {
		ns.Delete()
		return nil, err
	}
	return ns, nil
}

// Open returns the existing namespace name.
func Open(name string) (*NS, error) {
	if _, err := os.Stat(filepath.Join(runDir, name)); err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	return &NS{Name: name}, nil
}

// Exists reports whether a namespace called name exists.
func Exists(name string) bool {
	_, err := os.Stat(filepath.Join(runDir, name))
	return err == nil
}

// Delete removes the namespace. Interfaces inside it are destroyed with it
// (veth peers in other namespaces too).
func (ns *NS) Delete() error {
	if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("delete netns %s: %w: %s", ns.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command returns a command that runs inside the namespace.
func (ns *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns an error that carries
// its output when it fails.
func (ns *NS) Run(name string, args ...string) error {
	out, err := ns.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("in netns %s: %s %s: %w: %s", ns.Name, name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Output runs a command inside the namespace and returns its standard output.
func (ns *NS) Output(name string, args ...string) (string, error) {
	cmd := ns.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("in netns %s: %s %s: %w: %s", ns.Name, name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Do runs fn on the calling goroutine with its OS thread switched into the
// namespace, then switches back. See the package documentation for what
// does and does not inherit the namespace.
func (ns *NS) Do(fn func() error) error {
	target, err := unix.Open(filepath.Join(runDir, ns.Name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", ns.Name, err)
	}
	defer unix.Close(target)

	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open current netns: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns %s: %w", ns.Name, err)
	}
	fnErr := fn()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: the runtime will throw it away.
		return fmt.Errorf("leave netns %s: %w", ns.Name, err)
	}
	runtime.UnlockOSThread()
	return fnErr
}
