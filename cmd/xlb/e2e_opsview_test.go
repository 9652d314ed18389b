package main

// What an operator sees of the appliance's memory and sessions
// (docs/design.md#observability): the conntrack arenas' pages in status and
// the metrics, and the active/inactive split of PER_SESSION sessions.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
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

// TestEndToEndSessionActivity: a PER_SESSION CLIENT_IP rule keeps one
// session per client in the shared table; while the clients send, every
// session is active (status per rule and backend, the metric, the text
// status), once they have been quiet for the rule's window (half its
// 16 s idle timeout) every session is inactive but still held, and then
// they expire.
func TestEndToEndSessionActivity(t *testing.T) {
	l := labWith(t, lab.Options{Backends: 2})
	r := rule(l, "web4", "session_affinity = \"CLIENT_IP\"\n[connection_tracking]\ntracking_mode = \"PER_SESSION\"\nidle_timeout = \"16s\"\n")
	r.Health = healthNone
	x := xlbIn(t, l, []lab.Rule{r})
	sock := x.Socket()
	const clients = 6
	for _, src := range l.ClientAddrs4[:clients] {
		if b := sameBackend(requests(l, src, l.Opts.VIP4, 2)); b < 0 {
			t.Fatalf("the requests of %s failed or went to different backends", src)
		}
	}
	sessions := func(rs control.Rule) (entries, active, inactive int) {
		for _, b := range rs.Backends {
			entries, active, inactive = entries+b.SessionEntries, active+b.ActiveConnections, inactive+b.InactiveConnections
		}
		return
	}
	rs := ruleStatus(t, statusJSON(t, sock), "web4")
	if rs.SessionActiveSeconds != 8 {
		t.Errorf("session_active_seconds %v, want 8 (half the idle timeout)", rs.SessionActiveSeconds)
	}
	if n, a, i := sessions(rs); n != clients || a != clients || i != 0 || rs.ActiveConnections != clients || rs.InactiveConnections != 0 {
		t.Errorf("just after the requests: %d sessions, backends %d active %d inactive, rule %d/%d; want all %d active", n, a, i, rs.ActiveConnections, rs.InactiveConnections, clients)
	}
	if got := sumMetric(metricValues(scrapeBody(t, l)), "xlb_backend_connections_active", `rule="web4"`); got != clients {
		t.Errorf("xlb_backend_connections_active %v, want %d", got, clients)
	}
	testutil.WaitFor(t, 15*time.Second, "the quiet sessions turn inactive", func() (bool, string) {
		rs = ruleStatus(t, statusJSON(t, sock), "web4")
		n, a, i := sessions(rs)
		return n == clients && a == 0 && i == clients, fmt.Sprintf("%d sessions, %d active, %d inactive", n, a, i)
	})
	if got := sumMetric(metricValues(scrapeBody(t, l)), "xlb_backend_connections_inactive", `rule="web4"`); got != clients {
		t.Errorf("xlb_backend_connections_inactive %v, want %d", got, clients)
	}
	out, errOut, err := xlbCtl(t, sock, 1, "status")
	if err != nil {
		t.Fatalf("status: %v %s", err, errOut)
	}
	if want := fmt.Sprintf("sessions 0 active (a packet in the last 8s), %d inactive", clients); !strings.Contains(out, want) {
		t.Errorf("text status lacks %q:\n%s", want, out)
	}
	testutil.WaitFor(t, 20*time.Second, "the sessions expire", func() (bool, string) {
		n, a, i := sessions(ruleStatus(t, statusJSON(t, sock), "web4"))
		return n == 0 && a == 0 && i == 0, fmt.Sprintf("%d sessions, %d active, %d inactive", n, a, i)
	})
}
