package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

var (
	rx   = NewFamily("xlb_test_rx_packets_total", "Frames received, per queue.", Counter, "queue")
	up   = NewFamily("xlb_test_up", "1 while up.", Gauge)
	test = []*Family{rx, up}
)

func collector(extra func(Sink)) *Collector {
	return NewCollector(test, func(s Sink) {
		s.Add(rx, 12, "0")
		s.Add(rx, 3.5e9, "1")
		s.Add(up, 1)
		if extra != nil {
			extra(s)
		}
	})
}

func TestCollector(t *testing.T) {
	c := collector(nil)
	want := `# HELP xlb_test_rx_packets_total Frames received, per queue.
# TYPE xlb_test_rx_packets_total counter
xlb_test_rx_packets_total{queue="0"} 12
xlb_test_rx_packets_total{queue="1"} 3.5e+09
# HELP xlb_test_up 1 while up.
# TYPE xlb_test_up gauge
xlb_test_up 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestLintCatchesBadNames: the linter the daemon's test relies on does
// find the mistakes it is there for.
func TestLintCatchesBadNames(t *testing.T) {
	bad := NewFamily("xlb_test_rx_packets", "A counter without _total.", Counter)
	ms := NewFamily("xlb_test_latency_milliseconds", "Not a base unit.", Gauge)
	c := NewCollector([]*Family{bad, ms}, func(s Sink) { s.Add(bad, 1); s.Add(ms, 1) })
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) < 2 {
		t.Errorf("problems %v, want the missing _total and the milliseconds", problems)
	}
}

func TestRegistryRejectsMisuse(t *testing.T) {
	// A sample with the wrong number of labels, and one of an undeclared family.
	undeclared := NewFamily("xlb_test_other", "Not declared.", Gauge)
	for name, extra := range map[string]func(Sink){
		"labels":     func(s Sink) { s.Add(rx, 1, "0", "extra") },
		"undeclared": func(s Sink) { s.Add(undeclared, 1) },
	} {
		reg, err := NewRegistry(collector(extra))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Gather(); err == nil {
			t.Errorf("%s: gathered without an error", name)
		}
	}
	if _, err := NewRegistry(collector(nil), collector(nil)); err == nil {
		t.Error("a family registered twice")
	}
}

func TestHandler(t *testing.T) {
	reg, err := NewRegistry(collector(nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(reg, nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"xlb_test_up 1\n", "go_goroutines ", "process_cpu_seconds_total "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("GET /metrics: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	problems, err := promlint.New(strings.NewReader(string(body))).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("the scrape does not lint: %v %v", problems, err)
	}
	resp, err = http.Get(srv.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /other: %d, want 404", resp.StatusCode)
	}
}
