package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/metrics"
)

// TestMetricsLint gathers a scrape of a daemon with a published rule and
// runs client_golang's linter (the checks of promtool check metrics) over
// every family; it also checks that the families are the declared ones
// and that drops and passes are apart.
func TestMetricsLint(t *testing.T) {
	d := &daemon{started: time.Now().Add(-time.Minute)}
	st := &failover.State{Tier: failover.TierPrimary, Backends: []failover.BackendState{
		{Name: "192.0.2.10", ID: 0, Health: failover.HealthHealthy, WeightState: failover.WeightMissing, Eligible: true},
		{Name: "192.0.2.11", ID: 1, Health: failover.HealthUnhealthy, WeightState: failover.WeightMissing},
	}}
	d.status = publishedStatus{XDPMode: "native", Queues: []int{0, 1}, Rules: []*ruleStatus{{Name: "web", VIP: addr("203.0.113.10"), Tier: "PRIMARY", State: st}}}
	reg, err := d.metricsRegistry()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, want := range []string{"xlb_build_info", "xlb_start_time_seconds", "xlb_rule_tier", "xlb_rule_packets_total", "xlb_backend_healthy",
		"xlb_backend_bytes_total", "xlb_backend_connections_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !got[want] {
			t.Errorf("scrape lacks %s", want)
		}
	}
	declared := map[string]bool{}
	for _, f := range metricFamilies {
		if declared[f.Name] {
			t.Errorf("%s declared twice", f.Name)
		}
		declared[f.Name] = true
		if !strings.HasPrefix(f.Name, "xlb_") {
			t.Errorf("%s: not in the xlb_ namespace", f.Name)
		}
	}
	if !declared["xlb_drop_packets_total"] || !declared["xlb_pass_packets_total"] {
		t.Error("drops and passes are not two families")
	}
}

// scrapeDaemon is a daemon (no data plane, health NONE: no probe leaves)
// with a rule of its own backends, one drained, and two rules of a
// backend service.
func scrapeDaemon(t *testing.T) *daemon {
	t.Helper()
	b := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 9, 0, byte(i)}) }
	service := "name = \"s\"\n[health_check]\ntype = \"NONE\"\n[encap]\ntype = \"IPIP\"\n[[group]]\nname = \"g\"\nbackends = [\"10.9.0.1\", \"10.9.0.2\"]\n"
	named := func(name, vip string) string {
		return fmt.Sprintf("name = %q\nvip = %q\nports = [\"80\"]\nbackend_service = \"s\"\n", name, vip)
	}
	d, _ := testDaemon(t, map[string]string{
		"services.d/s.toml": service,
		"rules.d/a.toml":    named("a", "198.18.16.1"),
		"rules.d/b.toml":    named("b", "198.18.16.2"),
		"rules.d/c.toml":    scaleRuleFile(3, []netip.Addr{b(1), b(3)}),
	}, []netip.Addr{b(1), b(2), b(3)})
	o := &ops{d: d}
	if _, err := o.ChangeBackend(context.Background(), control.BackendChange{Action: control.ActionDrain, Rule: "r00003", Backend: b(3).String()}); err != nil {
		t.Fatal(err)
	}
	return d
}

// xlbLines keeps the lines of the xlb_ families (the runtime's values
// move between two scrapes).
func xlbLines(text string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(l, "xlb_") || strings.HasPrefix(l, "# HELP xlb_") || strings.HasPrefix(l, "# TYPE xlb_") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// scrapeServer serves h on a loopback port until the test ends and
// returns its /metrics URL.
func scrapeServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

func scrapeText(t *testing.T, h http.Handler, query string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics"+query, nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics%s: %d %s", query, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestMetricsTextAsGathered: the daemon's scrape, written as text as it
// is collected, has the families, help, types, labels and values that
// client_golang gathers from the same collector, and those are the
// scrape's before the text was written as collected
// (testdata/scrape.golden: client_golang's gather of the daemon's
// collector at the commit before, its families but the build's and the
// start time; go test -update rewrites it); it lints.
func TestMetricsTextAsGathered(t *testing.T) {
	d := scrapeDaemon(t)
	reg, err := d.metricsRegistry()
	if err != nil {
		t.Fatal(err)
	}
	body := scrapeText(t, metrics.Handler(reg, d.log), "")
	var names, fixed []string
	for _, f := range metricFamilies {
		names = append(names, f.Name)
		if f != mBuildInfo && f != mStarted {
			fixed = append(fixed, f.Name)
		}
	}
	text := xlbLines(body)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(text), names...); err != nil {
		t.Error(err)
	}
	golden := filepath.Join("testdata", "scrape.golden")
	if *updateGolden {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		for _, mf := range mfs {
			if slices.Contains(fixed, mf.GetName()) {
				if _, err := expfmt.MetricFamilyToText(&out, mf); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.ScrapeAndCompare(scrapeServer(t, metrics.Handler(reg, d.log)), bytes.NewReader(want), fixed...); err != nil {
		t.Errorf("the scrape differs from %s: %v", golden, err)
	}
	for _, must := range []string{
		`xlb_backend_healthy{backend="10.9.0.1",backend_service="s",rule="a"} 1`,
		`xlb_backend_eligible{backend="10.9.0.3",rule="r00003"} 0`,
		`xlb_rule_backend_service{backend_service="s",rule="b"} 1`,
		`xlb_rule_packets_total{rule="r00003"} 0`,
	} {
		if !strings.Contains(text, must+"\n") {
			t.Errorf("the scrape lacks %s", must)
		}
	}
	if problems, err := promlint.New(strings.NewReader(body)).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestMetricsScope: a scrape of some scopes has exactly the families of
// those scopes that the whole scrape has, with the same samples.
func TestMetricsScope(t *testing.T) {
	d := scrapeDaemon(t)
	reg, err := d.metricsRegistry()
	if err != nil {
		t.Fatal(err)
	}
	h := metrics.Handler(reg, d.log)
	whole := familyLines(xlbLines(scrapeText(t, h, "")))
	for _, scope := range []metrics.Scope{metrics.ScopeAppliance, metrics.ScopeQueue, metrics.ScopeRule, metrics.ScopeBackend,
		metrics.ScopeAppliance | metrics.ScopeQueue | metrics.ScopeRule} {
		want := map[string]string{}
		for _, f := range metricFamilies {
			if f.Scope&scope != 0 && whole[f.Name] != "" {
				want[f.Name] = whole[f.Name]
			}
		}
		got := familyLines(xlbLines(scrapeText(t, h, "?scope="+scope.String())))
		if !maps.Equal(got, want) {
			t.Errorf("scope %s: families %v, want %v", scope, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		if len(want) == 0 && scope != metrics.ScopeQueue { // no data plane: no queues
			t.Errorf("scope %s: nothing to compare", scope)
		}
	}
}

// familyLines maps each family of a text to its lines.
func familyLines(text string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.SplitAfter(text, "\n") {
		if rest, ok := strings.CutPrefix(l, "# HELP "); ok {
			name, _, _ := strings.Cut(rest, " ")
			out[name] = ""
		}
		for name := range out {
			if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") || strings.HasPrefix(l, "# HELP "+name+" ") || strings.HasPrefix(l, "# TYPE "+name+" ") {
				out[name] += l
			}
		}
	}
	return out
}

// TestScrapeBesideReload: a scrape whose client stops reading half-way
// (its writes blocked in the middle of the backend families) holds
// nothing the control path needs: a reload and a CLI drain complete
// beside it, and the scrape then ends whole.
func TestScrapeBesideReload(t *testing.T) {
	const n, m = 100, 80 // 8000 backends: megabytes of text
	d, dir := scaleDaemon(t, n, m)
	reg, err := d.metricsRegistry()
	if err != nil {
		t.Fatal(err)
	}
	resp := smallBufferGet(t, metrics.Handler(reg, d.log), "/metrics") // reads_test.go
	head := make([]byte, 16<<10)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	scraping := func() bool {
		buf := make([]byte, 1<<20)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "metrics.(*textWriter).add")
	}
	// The handler's writes fill the buffers and block; a loaded machine
	// may take a while to run it that far.
	for deadline := time.Now().Add(10 * time.Second); !scraping(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the scrape is not blocked in its writes within 10 s: nothing to test beside")
		}
	}

	growRule(t, dir, n-1, m) // reads_test.go: one backend more
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := &ops{d: d}
	if _, err := o.Reload(ctx, control.ReloadRequest{}); err != nil {
		t.Fatalf("reload beside a stalled scrape: %v", err)
	}
	if _, err := o.ChangeBackend(ctx, control.BackendChange{Action: control.ActionDrain, Rule: "r00001", Backend: scaleBackend(1, 0).String()}); err != nil {
		t.Fatalf("drain beside a stalled scrape: %v", err)
	}
	if !scraping() {
		t.Fatal("the scrape ended before the reload and the drain: they were not beside it")
	}

	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(append(head, rest...)))
	if err != nil {
		t.Fatalf("the scrape after the stall does not parse: %v", err)
	}
	if got := len(mfs["xlb_backend_healthy"].GetMetric()); got < n*m {
		t.Errorf("%d samples of xlb_backend_healthy, want at least %d", got, n*m)
	}
}
