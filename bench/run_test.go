package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunNamesMissingTools: on a machine without the harness's tools,
// bench/run names every one of them and the packages to install, in one
// message, before it builds or touches anything.
func TestRunNamesMissingTools(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"bash", "dirname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("skipped: no %s to run bench/run with", tool)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "bash"), "run", "--profile")
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 3 {
		t.Fatalf("bench/run without tools: %v\n%s", err, out)
	}
	want := "ERROR: bench/run needs go ip nft ping perf: apt-get install golang-go iproute2 nftables iputils-ping linux-perf"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("bench/run said %q, want %q", got, want)
	}
}
