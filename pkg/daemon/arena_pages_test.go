package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/conntrack"
)

// TestLogArenaPages: the start-up line reports the arenas' bytes and the
// bytes huge pages map (as smaps says), and the hint to set advise comes
// exactly when the arenas got none under a mode that gives none.
func TestLogArenaPages(t *testing.T) {
	tb, err := conntrack.NewInArena(1<<17, 1, conntrack.ArenaInfo{})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Arena().Close()
	huge, err := tb.Arena().HugeBytes()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"never", "advise"} {
		var buf bytes.Buffer
		logArenaPages(slog.New(slog.NewTextHandler(&buf, nil)), map[string]*conntrack.Arena{"ct-0": tb.Arena(), "none": nil}, mode)
		out := buf.String()
		want := fmt.Sprintf("msg=\"conntrack arenas\" bytes=%d huge_page_bytes=%d shmem_thp=%s", tb.Arena().Bytes(), huge, mode)
		if !strings.Contains(out, want) {
			t.Errorf("mode %s: log lacks %q:\n%s", mode, want, out)
		}
		hint := strings.Contains(out, "echo advise > "+conntrack.ShmemTHPPath)
		if wantHint := huge == 0 && mode == "never"; hint != wantHint {
			t.Errorf("mode %s, %d huge bytes: hint %v, want %v:\n%s", mode, huge, hint, wantHint, out)
		}
	}
}
