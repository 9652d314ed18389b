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
		topOut, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
		if err != nil {
			t.Fatal(err)
		}
		// The go command stamps VCS information from a checkout whose .git
		// is a directory, not from a git worktree's .git file. A clean
		// clone (CI) is built where it is: every package but main comes
		// from the cache the tests filled. A worktree is built from a
		// clone of HEAD with the tree's files copied over it (uncommitted
		// changes make the build "modified", as the go command says of
		// the tree itself); there every package of the module compiles
		// again, for its directory is new.
		top := strings.TrimSpace(string(topOut))
		dir := t.TempDir()
		src := top
		if fi, err := os.Stat(filepath.Join(top, ".git")); err != nil || !fi.IsDir() {
			src = filepath.Join(dir, "src")
			cloneTree(t, git, top, strings.TrimSpace(string(head)), src)
		}
		dirty, err := exec.Command(git, "-C", top, "status", "--porcelain").Output()
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

// cloneTree clones top at head into src and copies the tree's files (its
// uncommitted changes included, its deletions applied) over the clone.
func cloneTree(t *testing.T, git, top, head, src string) {
	t.Helper()
	if out, err := exec.Command(git, "clone", "--quiet", "--no-hardlinks", top, src).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if out, err := exec.Command(git, "-C", src, "checkout", "--quiet", head).CombinedOutput(); err != nil {
		t.Fatalf("git checkout: %v\n%s", err, out)
	}
	files, err := exec.Command(git, "-C", top, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(top, f))
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
}
