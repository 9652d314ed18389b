package testutil

import (
	"os/exec"
	"regexp"
	"testing"
)

var canInline = regexp.MustCompile(`can inline (\S+)`)

// MustInline fails t unless the compiler reports every function named in
// want as inlinable in the package in the test's directory (as
// `go build -gcflags=-m .` names them: "(*Table).Reset", "Time.Before",
// "mix"). It guards the packet path's small functions against a change
// that pushes one over the inlining budget, as net/netip's
// inlining_test.go does. It skips when the go command is missing or
// coverage is on (coverage counters change the costs).
func MustInline(t *testing.T, want ...string) {
	t.Helper()
	if testing.CoverMode() != "" {
		t.Skip("skipped: coverage instrumentation changes inlining")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipped: no go command to ask the compiler")
	}
	out, err := exec.Command(goCmd, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, m := range canInline.FindAllStringSubmatch(string(out), -1) {
		got[m[1]] = true
	}
	for _, f := range want {
		if !got[f] {
			t.Errorf("%s is no longer inlinable (go build -gcflags=-m=2 . says why)", f)
		}
	}
}
