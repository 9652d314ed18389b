package main

// What an operator sees of the appliance's memory and sessions (issue 13
// follow-ups): the conntrack arenas' pages in status and the metrics,
// and the active/inactive split of PER_SESSION sessions.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/lab"
)

// TestEndToEndArenaPages: with shmem THP at advise (as the unit sets
// it), xlb status --json names each served queue's arena and the shared
// session and fragment arenas with their size and the bytes 2 MiB pages
// map (every whole 2 MiB of them), the metric
// xlb_conntrack_arena_bytes{table, pages} says the same, and the text
// status has the line.
func TestEndToEndArenaPages(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 1})
	if conntrack.ShmemTHP() == "" {
		t.Skip("kernel without transparent huge pages")
	}
	release, err := conntrack.AdviseShmemTHP()
	if err != nil {
		t.Skipf("shmem THP: %v", err)
	}
	t.Cleanup(func() {
		if err := release(); err != nil {
			t.Error(err)
		}
	})
	rules := l.DefaultRules("IPIP")[:1]
	rules[0].Health = healthNone
	x := xlbIn(t, l, rules) // started after the advice: its arenas get huge pages
	sock := x.Socket()
	st := statusJSON(t, sock)
	var want []string
	for _, q := range st.Queues {
		want = append(want, fmt.Sprintf("queue-%d", q))
	}
	want = append(want, "sessions", "fragments")
	if len(st.Arenas) != len(want) {
		t.Fatalf("arenas %+v, want %v", st.Arenas, want)
	}
	if !conntrack.ShmemTHPAdvised(st.ShmemTHP) {
		t.Errorf("shmem_thp %q under advise", st.ShmemTHP)
	}
	m := metricValues(scrapeBody(t, l))
	for i, a := range st.Arenas {
		t.Logf("%s: %d of %d bytes in huge pages", a.Table, a.HugeBytes, a.Bytes)
		if a.Table != want[i] || a.Bytes <= 0 {
			t.Errorf("arena %d: %+v, want %s", i, a, want[i])
		}
		if a.HugeBytes < a.Bytes-2<<20 || a.HugeBytes > a.Bytes || a.HugeBytes%(2<<20) != 0 {
			t.Errorf("%s: %d of %d bytes in huge pages, want every whole 2 MiB", a.Table, a.HugeBytes, a.Bytes)
		}
		huge := m[fmt.Sprintf(`xlb_conntrack_arena_bytes{pages="huge",table=%q}`, a.Table)]
		base := m[fmt.Sprintf(`xlb_conntrack_arena_bytes{pages="base",table=%q}`, a.Table)]
		if huge != float64(a.HugeBytes) || base != float64(a.Bytes-a.HugeBytes) {
			t.Errorf("%s: metric huge %v base %v, status %d of %d", a.Table, huge, base, a.HugeBytes, a.Bytes)
		}
	}
	out, errOut, err := xlbCtl(t, sock, 1, "status")
	if err != nil {
		t.Fatalf("status: %v %s", err, errOut)
	}
	if !strings.Contains(out, "conntrack arenas: ") || !strings.Contains(out, "shmem_thp "+st.ShmemTHP) || !strings.Contains(out, want[0]+" ") {
		t.Errorf("text status lacks the arenas' line:\n%s", out)
	}
}
