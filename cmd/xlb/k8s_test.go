package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Commands run in-process in these tests: xlb k8s must never replace the
// test binary with another program.
func init() {
	execProgram = func(string, []string, []string) error { return errors.New("exec in a test") }
}

// TestK8sRunsController: xlb k8s executes the xlb-k8s beside the xlb
// binary with its arguments as given (flags after arguments too, --help
// included), and without one says where it looked.
func TestK8sRunsController(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "xlb-k8s")
	if err := os.WriteFile(ctl, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	oldExe, oldExec := executable, execProgram
	t.Cleanup(func() { executable, execProgram = oldExe, oldExec })
	executable = func() (string, error) { return filepath.Join(dir, "xlb"), nil }
	var gotPath string
	var gotArgs []string
	execProgram = func(path string, argv, env []string) error {
		gotPath, gotArgs = path, argv
		return nil
	}
	t.Setenv("PATH", t.TempDir())
	for _, args := range [][]string{
		{"--help"},
		{"-c", "/etc/xlb/xlb.toml", "--pool", "203.0.113.64/26", "extra", "--class", "x"},
		{},
	} {
		gotPath, gotArgs = "", nil
		if _, _, err := runXLB(t, append([]string{"k8s"}, args...)...); err != nil {
			t.Fatalf("xlb k8s %v: %v", args, err)
		}
		if want := append([]string{ctl}, args...); gotPath != ctl || !slices.Equal(gotArgs, want) {
			t.Errorf("xlb k8s %v ran %s %q, want %q", args, gotPath, gotArgs, want)
		}
	}

	// Not beside xlb: $PATH, then a message that says where it looked.
	executable = func() (string, error) { return "/nonexistent/bin/xlb", nil }
	t.Setenv("PATH", dir)
	if _, _, err := runXLB(t, "k8s", "--help"); err != nil || gotPath != ctl {
		t.Errorf("from $PATH: ran %q, %v", gotPath, err)
	}
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	_, _, err := runXLB(t, "k8s", "--help")
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("no xlb-k8s anywhere: %v", err)
	}
	for _, want := range []string{"/nonexistent/bin/xlb-k8s", empty, "go build ./cmd/xlb-k8s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
