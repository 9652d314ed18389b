package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xlbnet/xlb/pkg/engine"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// TestArenaBytesMetric: xlb_conntrack_arena_bytes carries a reading's
// split (huge + base = the arena) and passes the linter; a reading whose
// smaps could not be read writes nothing. (The reading itself:
// TestArenaPagesReading in pkg/engine.)
func TestArenaBytesMetric(t *testing.T) {
	r := engine.ArenaPages{Mode: "advise", Arenas: []engine.ArenaUse{
		{Table: "queue-0", Queue: 0, Bytes: 9 << 20, HugeBytes: 8 << 20},
		{Table: "queue-1", Queue: 1, Bytes: 9 << 20, HugeBytes: 0},
		{Table: "sessions", Queue: -1, Bytes: 3 << 20, HugeBytes: 2 << 20},
		{Table: "fragments", Queue: -1, Bytes: 1 << 20, HugeBytes: 0},
	}}
	reg, err := metrics.NewRegistry(metrics.NewCollector([]*metrics.Family{mArenaBytes}, func(s metrics.Sink) { collectArenaPages(s, r) }))
	if err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg, "xlb_conntrack_arena_bytes")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	var exp strings.Builder
	exp.WriteString("# HELP xlb_conntrack_arena_bytes " + mArenaBytes.Help + "\n# TYPE xlb_conntrack_arena_bytes gauge\n")
	for _, a := range r.Arenas {
		fmt.Fprintf(&exp, "xlb_conntrack_arena_bytes{pages=\"base\",table=%q} %d\n", a.Table, a.Bytes-a.HugeBytes)
		fmt.Fprintf(&exp, "xlb_conntrack_arena_bytes{pages=\"huge\",table=%q} %d\n", a.Table, a.HugeBytes)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp.String()), "xlb_conntrack_arena_bytes"); err != nil {
		t.Error(err)
	}
	r.Err = fmt.Errorf("smaps: no such file")
	if n, err := testutil.GatherAndCount(reg, "xlb_conntrack_arena_bytes"); err != nil || n != 0 {
		t.Errorf("unreadable smaps: %d series (%v), want none", n, err)
	}
}
