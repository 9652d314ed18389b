package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// xlbctlDeps are packages xlbctl must not link: the daemon's, whose
// initialization is what it saves (commands_xlbctl.go).
var xlbctlDeps = []string{
	"github.com/xlbnet/xlb/pkg/daemon",
	"github.com/xlbnet/xlb/pkg/engine",
	"github.com/xlbnet/xlb/pkg/lab",
	"github.com/xlbnet/xlb/pkg/bgp",
	"github.com/xlbnet/xlb/pkg/metrics",
	"github.com/osrg/gobgp/",
	"github.com/prometheus/client_golang/",
	"github.com/cilium/ebpf",
	"google.golang.org/grpc",
	"github.com/vishvananda/netlink",
}

// buildXlbctl builds this package with -tags xlbctl into a temporary
// directory and returns the binary's path.
func buildXlbctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "xlbctl")
	if out, err := exec.Command("go", "build", "-tags", "xlbctl", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags xlbctl: %v\n%s", err, out)
	}
	return bin
}

// runBinary runs bin with args and returns its output and exit status.
func runBinary(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return out.String(), errOut.String(), code
}

// TestXlbctlBuild: the package built with -tags xlbctl links none of the
// daemon's packages, and each of its commands is xlb's: the same help
// (so the same flags and arguments) at every depth, and the same exit
// status for a wrong call; one of xlb's other commands is refused with
// exit status 3 and a sentence that says where it is.
func TestXlbctlBuild(t *testing.T) {
	deps, err := exec.Command("go", "list", "-deps", "-tags", "xlbctl", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps -tags xlbctl: %v", err)
	}
	pkgs := strings.Fields(string(deps))
	if !slices.Contains(pkgs, "github.com/xlbnet/xlb/pkg/control") {
		t.Fatalf("go list -deps -tags xlbctl lists no pkg/control: %q", pkgs)
	}
	for _, p := range pkgs {
		for _, heavy := range xlbctlDeps {
			if strings.HasPrefix(p, heavy) {
				t.Errorf("xlbctl links %s", p)
			}
		}
	}

	bin := buildXlbctl(t)
	ctl := map[string]bool{}
	for _, c := range commands() { // the full build's, in this test binary
		ctl[c.Name] = false
	}
	help, _, code := runBinary(t, bin, "--help")
	if code != 0 {
		t.Fatalf("xlbctl --help: exit status %d", code)
	}
	listed := help[strings.Index(help, "COMMANDS:"):]
	for _, name := range []string{"status", "backend", "appliance", "reload", "conntrack", "lookup", "capture", "top"} {
		if _, ok := ctl[name]; !ok {
			t.Fatalf("xlb has no command %q", name)
		}
		ctl[name] = true
		if !strings.Contains(listed, "\n   "+name+" ") {
			t.Errorf("xlbctl --help does not list %s:\n%s", name, help)
		}
	}
	for name, in := range ctl {
		if !in && strings.Contains(listed, "\n   "+name+" ") {
			t.Errorf("xlbctl --help lists %s, which is xlb's only", name)
		}
	}

	compared := map[string]int{}
	for _, p := range commandPaths(nil, newApp(nil, nil).Commands) {
		if !ctl[p[0]] {
			continue
		}
		compared[p[0]]++
		want, _, err := runXLB(t, append(p, "--help")...)
		if err != nil {
			t.Fatalf("xlb %v --help: %v", p, err)
		}
		got, _, code := runBinary(t, bin, append(p, "--help")...)
		// The program's name in NAME and USAGE; the descriptions name xlb's
		// commands as they are.
		if want = strings.ReplaceAll(want, "\n   xlb "+p[0], "\n   xlbctl "+p[0]); code != 0 || got != want {
			t.Errorf("xlbctl %s --help (exit %d) differs from xlb's:\n%s\nwant:\n%s", strings.Join(p, " "), code, got, want)
		}
	}
	if len(compared) != 8 || compared["backend"] < 6 {
		t.Errorf("compared the help of %v; want every control command and backend's subcommands", compared)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run"}, 3, `"run" is a command of xlb, not of xlbctl`},
		{[]string{"validate", "-c", "x.toml"}, 3, `"validate" is a command of xlb, not of xlbctl`},
		{[]string{"nosuch"}, 3, `unknown command "nosuch" for "xlbctl"`},
		{[]string{"backend", "nosuch"}, 3, `unknown command "nosuch" for "xlbctl backend"`},
		{[]string{"lookup", "--socket", "/nonexistent"}, 2, "--src"},
	} {
		_, errOut, code := runBinary(t, bin, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("xlbctl %v: exit %d, %q; want exit %d saying %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
