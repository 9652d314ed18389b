package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBuildID: the build id read from the running executable's note is
// the content part of what `go tool buildid` prints for it.
func TestBuildID(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "tool", "buildid", exe).Output()
	if err != nil {
		t.Fatalf("go tool buildid: %v", err)
	}
	full := strings.TrimSpace(string(out))
	got := buildID()
	if got == "unknown" || !strings.HasSuffix(full, "/"+got) {
		t.Errorf("buildID() = %q, go tool buildid says %q", got, full)
	}
}
