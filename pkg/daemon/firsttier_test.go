package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/xlbnet/xlb/pkg/control"
)

// lockedBuffer is a log destination the control goroutine writes while
// the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns what was written since the last take.
func (l *lockedBuffer) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

// eligibleLines returns the "eligible set" lines of a log.
func eligibleLines(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `msg="eligible set"`) {
			out = append(out, line)
		}
	}
	return out
}

// TestFirstEligibleSetsLoggedByTier: rules computed for the first time
// (here seven a reload adds back) log their first eligible set as one
// line per tier, with their count and the first names, not one line per
// rule; a later switch of one rule is still its own line.
func TestFirstEligibleSetsLoggedByTier(t *testing.T) {
	d, dir := scaleDaemon(t, 8, 2)
	var log lockedBuffer
	d.log = slog.New(slog.NewTextHandler(&log, nil))
	rulesDir := filepath.Join(dir, "rules.d")
	aside := t.TempDir()
	move := func(from, to string) {
		t.Helper()
		for i := 1; i < 8; i++ {
			name := fmt.Sprintf("r%05d.toml", i)
			if err := os.Rename(filepath.Join(from, name), filepath.Join(to, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	reload := func() {
		t.Helper()
		if err := do(d, func() error { _, err := d.Reload(false); return err }); err != nil {
			t.Fatal(err)
		}
	}
	move(rulesDir, aside)
	reload()
	log.take()
	move(aside, rulesDir)
	reload()
	lines := eligibleLines(log.take())
	if len(lines) != 1 {
		t.Fatalf("the reload that added seven rules logged %d eligible-set lines, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, want := range []string{"rules=7", "from=NONE", "to=PRIMARY", `names="r00001,r00002,r00003,r00004,r00005,… (2 more)"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first eligible sets line lacks %s:\n%s", want, lines[0])
		}
	}

	o := &ops{d: d}
	for j := range 2 {
		if _, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "r00003", Backend: scaleBackend(3, j).String()}); err != nil {
			t.Fatal(err)
		}
	}
	lines = eligibleLines(log.take())
	if len(lines) != 1 || !strings.Contains(lines[0], "rule=r00003") || !strings.Contains(lines[0], "from=PRIMARY") {
		t.Fatalf("draining every backend of r00003 logged, want one line of r00003's switch from PRIMARY:\n%s", strings.Join(lines, "\n"))
	}
}
