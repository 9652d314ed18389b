package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: xlb --version prints the module version and VCS revision
// (pkg/buildinfo), and a binary built from a git checkout carries that
// checkout's revision.
func TestVersion(t *testing.T) {
	for _, flag := range []string{"--version", "-v"} {
		out, _, err := runXLB(t, flag)
		if err != nil || !strings.HasPrefix(out, "xlb ") || !strings.Contains(out, " revision ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("xlb %s: %q, %v", flag, out, err)
		}
	}
	t.Run("built", func(t *testing.T) {
		git, err := exec.LookPath("git")
		if err != nil {
			t.Skip("skipped: no git to build from a checkout")
		}
		head, err := exec.Command(git, "rev-parse", "HEAD").Output()
		if err != nil {
			t.Skip("skipped: the source is not a git checkout")
		}
		top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
		if err != nil {
			t.Fatal(err)
		}
		// The go command stamps VCS information from a checkout whose .git
		// is a directory (not from a git worktree's .git file), so build
		// from a clone of HEAD.
		dir := t.TempDir()
		src := filepath.Join(dir, "src")
		if out, err := exec.Command(git, "clone", "--quiet", "--no-hardlinks", strings.TrimSpace(string(top)), src).CombinedOutput(); err != nil {
			t.Fatalf("git clone: %v\n%s", err, out)
		}
		if out, err := exec.Command(git, "-C", src, "checkout", "--quiet", strings.TrimSpace(string(head))).CombinedOutput(); err != nil {
			t.Fatalf("git checkout: %v\n%s", err, out)
		}
		// The tree as it is, uncommitted changes included: they make the
		// build "modified", as the go command says of the tree itself.
		files, err := exec.Command(git, "-C", strings.TrimSpace(string(top)), "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
			data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(top)), f))
			if err != nil {
				if os.IsNotExist(err) {
					os.Remove(filepath.Join(src, f)) // deleted in the tree
					continue
				}
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Dir(filepath.Join(src, f)), 0o755)
			if err := os.WriteFile(filepath.Join(src, f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dirty, err := exec.Command(git, "-C", strings.TrimSpace(string(top)), "status", "--porcelain").Output()
		if err != nil {
			t.Fatal(err)
		}
		modified := len(strings.TrimSpace(string(dirty))) > 0
		bin := filepath.Join(dir, "xlb")
		build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/xlb")
		build.Dir = src
		build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Fatal(err)
		}
		want := "revision " + strings.TrimSpace(string(head)) + " of "
		if !strings.Contains(string(out), want) || strings.Contains(string(out), "(modified)") != modified {
			t.Errorf("xlb --version of a build of HEAD: %q, want %q, modified %v", out, want, modified)
		}
		t.Logf("%s", out)
	})
}
