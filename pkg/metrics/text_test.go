package metrics

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// One family of each scope; labels not in name order, a help and label
// values that need escaping, values the encoder writes specially.
var (
	sInfo    = NewFamily("xlb_test_info", "Constant 1, labelled with a version.", Gauge, "version")
	sQueue   = NewFamily("xlb_test_queue_packets_total", "Packets, per queue.", Counter, "queue", "event").In(ScopeQueue)
	sRule    = NewFamily("xlb_test_rule_bytes_total", "Bytes \\ per rule,\nsaid on two lines.", Counter, "rule", "vip").In(ScopeRule)
	sBackend = NewFamily("xlb_test_backend_up", "1 while up.", Gauge, "rule", "backend_service", "backend").In(ScopeBackend)
	scoped4  = []*Family{sInfo, sQueue, sRule, sBackend}
)

// collectScoped writes every family, each family's samples together (in
// an order that is not the encoder's sorted one).
func collectScoped(s Sink) {
	s.Add(sInfo, 1, `v1 "quoted" \ back`+"\nnewline")
	for i, v := range []float64{12, 0, -1, 3.5e9, 0.1, math.Inf(1), math.Inf(-1), 1e-9} {
		s.Add(sQueue, v, strconv.Itoa(i%2), "e"+strconv.Itoa(i))
	}
	s.Add(sRule, 7, "web", "203.0.113.10")
	s.Add(sRule, 123456789012, "api", "2001:db8::1")
	s.Add(sRule, 2, "café", "198.51.100.1") // UTF-8 beyond ASCII, as is
	s.Add(sBackend, 1, "web", "web", "192.0.2.11")
	s.Add(sBackend, 0, "web", "web", "192.0.2.10")
	s.Add(sBackend, 1, "api", "pool", "192.0.2.10")
}

func scopedRegistry(t *testing.T, collect func(Sink)) *Registry {
	t.Helper()
	reg, err := NewRegistry(NewCollector(scoped4, collect))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// get scrapes h with the given Accept and Accept-Encoding and returns the
// response and its body, ungzipped.
func get(t *testing.T, h http.Handler, target, accept, encoding string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest("GET", target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = gz
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// xlbOnly keeps the lines of the xlb_ families (the runtime's values move
// between two scrapes).
func xlbOnly(text string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(l, "xlb_") || strings.HasPrefix(l, "# HELP xlb_") || strings.HasPrefix(l, "# TYPE xlb_") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// TestTextAsClientGolang: the text the handler writes is what
// client_golang's registry gathers and its encoder writes: the same
// families, help, types, label pairs and values, and byte for byte the
// same lines once both are put in the encoder's order.
func TestTextAsClientGolang(t *testing.T) {
	reg := scopedRegistry(t, collectScoped)
	resp, body := get(t, Handler(reg, nil), "/metrics", "", "")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q", ct)
	}
	// Parsed and compared as client_golang's tests compare.
	var names []string
	for _, f := range scoped4 {
		names = append(names, f.Name)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(xlbOnly(body)), names...); err != nil {
		t.Error(err)
	}
	// And line by line: the handler's lines sorted within each family
	// are the encoder's.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "xlb_") {
			if _, err := expfmt.MetricFamilyToText(&want, mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := sortedWithinFamilies(xlbOnly(body)); got != sortedWithinFamilies(want.String()) {
		t.Errorf("the handler's text:\n%s\nclient_golang's:\n%s", got, want.String())
	}
	for _, must := range []string{
		`xlb_test_backend_up{backend="192.0.2.10",backend_service="pool",rule="api"} 1` + "\n", // label pairs in name order
		`# HELP xlb_test_rule_bytes_total Bytes \\ per rule,\nsaid on two lines.` + "\n",
		`xlb_test_info{version="v1 \"quoted\" \\ back\nnewline"} 1` + "\n",
		`xlb_test_queue_packets_total{event="e5",queue="1"} +Inf` + "\n",
		`xlb_test_queue_packets_total{event="e3",queue="1"} 3.5e+09` + "\n",
		`xlb_test_rule_bytes_total{rule="api",vip="2001:db8::1"} 1.23456789012e+11` + "\n",
	} {
		if !strings.Contains(body, must) {
			t.Errorf("the text lacks %q", must)
		}
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// sortedWithinFamilies puts a text in the encoder's order: families by
// name, each family's samples sorted (client_golang sorts them by label
// values; the handler writes them as they are collected).
func sortedWithinFamilies(text string) string {
	var families []string
	var help string
	var samples []string
	end := func() {
		if help != "" {
			slices.Sort(samples)
			families = append(families, help+strings.Join(samples, ""))
		}
		help, samples = "", nil
	}
	for _, l := range strings.SplitAfter(text, "\n") {
		switch {
		case strings.HasPrefix(l, "# HELP "):
			end()
			help = l
		case strings.HasPrefix(l, "#"):
			help += l
		case l != "":
			samples = append(samples, l)
		}
	}
	end()
	slices.Sort(families)
	return strings.Join(families, "")
}

func TestParseScope(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   Scope
		err    bool
	}{
		{nil, AllScopes, false},
		{[]string{"queue"}, ScopeQueue, false},
		{[]string{"appliance", "rule"}, ScopeAppliance | ScopeRule, false},
		{[]string{"queue, rule", "backend"}, ScopeQueue | ScopeRule | ScopeBackend, false},
		{[]string{""}, 0, false},
		{[]string{"rule", "rules"}, 0, true},
		{[]string{"Backend"}, 0, true},
	} {
		got, err := ParseScope(tc.values)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseScope(%q) = %v, %v; want %v (error %v)", tc.values, got, err, tc.want, tc.err)
		}
	}
	if s := (ScopeQueue | ScopeBackend).String(); s != "queue,backend" {
		t.Errorf("String %q", s)
	}
}

// familiesOf lists the families of a text or protobuf body.
func familiesOf(t *testing.T, body string, format expfmt.Format) []string {
	t.Helper()
	dec := expfmt.NewDecoder(strings.NewReader(body), format)
	var names []string
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode: %v", err)
		}
		names = append(names, mf.GetName())
	}
	slices.Sort(names)
	return names
}

// TestScrapeScope: a scrape with scope parameters has exactly the
// families of those scopes (the Go and process ones with appliance), in
// text and in protobuf; its collect function is told what is asked; an
// unknown scope is refused whole.
func TestScrapeScope(t *testing.T) {
	var asked []Scope
	reg := scopedRegistry(t, func(s Sink) {
		var sc Scope
		for i := range len(scopeNames) {
			if s.Wants(1 << i) {
				sc |= 1 << i
			}
		}
		asked = append(asked, sc)
		collectScoped(s)
	})
	h := Handler(reg, nil)
	proto := `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`
	for _, tc := range []struct {
		query string
		want  Scope
	}{
		{"", AllScopes}, {"?scope=queue", ScopeQueue}, {"?scope=appliance&scope=rule", ScopeAppliance | ScopeRule},
		{"?scope=queue,rule,backend", ScopeQueue | ScopeRule | ScopeBackend}, {"?scope=", 0},
	} {
		var want []string
		for _, f := range scoped4 {
			if f.Scope&tc.want != 0 {
				want = append(want, f.Name)
			}
		}
		for _, accept := range []string{"", proto} {
			asked = nil
			resp, body := get(t, h, "/metrics"+tc.query, accept, "gzip")
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", tc.query, resp.StatusCode, body)
			}
			format := expfmt.ResponseFormat(resp.Header)
			if (accept == proto) != (format.FormatType() == expfmt.TypeProtoDelim) {
				t.Errorf("%s, Accept %q: answered in %s", tc.query, accept, format)
			}
			got := familiesOf(t, body, format)
			var xlb []string
			runtime := false
			for _, n := range got {
				if strings.HasPrefix(n, "xlb_") {
					xlb = append(xlb, n)
				}
				runtime = runtime || n == "go_goroutines" || n == "process_cpu_seconds_total"
			}
			slices.Sort(want)
			if !slices.Equal(xlb, want) {
				t.Errorf("%s, Accept %q: families %v, want %v", tc.query, accept, xlb, want)
			}
			if runtime != (tc.want&ScopeAppliance != 0) {
				t.Errorf("%s, Accept %q: Go and process families %v, want them only with appliance", tc.query, accept, runtime)
			}
			if len(asked) != 1 || asked[0] != tc.want {
				t.Errorf("%s, Accept %q: collect was asked for %v", tc.query, accept, asked)
			}
		}
	}
	resp, body := get(t, h, "/metrics?scope=queue&scope=servers", "", "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `scope "servers"`) || !strings.Contains(body, "appliance, queue, rule, backend") {
		t.Errorf("an unknown scope: %d %q", resp.StatusCode, body)
	}
}

// TestGzip: a scraper that accepts gzip gets gzip (Prometheus asks for
// it); one that does not, or refuses it, gets the text as is.
func TestGzip(t *testing.T) {
	h := Handler(scopedRegistry(t, collectScoped), nil)
	for _, tc := range []struct {
		encoding string
		gzip     bool
	}{{"gzip", true}, {"deflate, gzip;q=0.5", true}, {"gzip;q=0", false}, {"", false}, {"identity", false}} {
		resp, body := get(t, h, "/metrics?scope=rule", "", tc.encoding)
		if got := resp.Header.Get("Content-Encoding") == "gzip"; got != tc.gzip || !strings.Contains(body, "xlb_test_rule_bytes_total{") {
			t.Errorf("Accept-Encoding %q: gzip %v, body %q", tc.encoding, got, body)
		}
	}
}

// TestTextRefuses: the text writer refuses, logs and leaves out what the
// pedantic registry would refuse, and a family whose samples come in two
// runs (a second group would not parse); the scrape goes on.
func TestTextRefuses(t *testing.T) {
	undeclared := NewFamily("xlb_test_other", "Not declared.", Gauge)
	for name, tc := range map[string]struct {
		collect func(Sink)
		logged  string
	}{
		"labels":     {func(s Sink) { s.Add(sRule, 1, "web") }, "1 label values for 2 labels"},
		"undeclared": {func(s Sink) { s.Add(undeclared, 1) }, "xlb_test_other: a family its collector does not declare"},
		"utf8":       {func(s Sink) { s.Add(sRule, 1, "web\xff", "x") }, "not UTF-8"},
		"two runs": {func(s Sink) {
			s.Add(sRule, 1, "a", "x")
			s.Add(sBackend, 1, "a", "a", "192.0.2.1")
			s.Add(sRule, 2, "b", "y")
		}, "xlb_test_rule_bytes_total: a sample after another family's"},
	} {
		var log bytes.Buffer
		reg := scopedRegistry(t, func(s Sink) { tc.collect(s); s.Add(sInfo, 1, "after") })
		_, body := get(t, Handler(reg, slog.New(slog.NewTextHandler(&log, nil))), "/metrics", "", "")
		if !strings.Contains(log.String(), tc.logged) {
			t.Errorf("%s: logged %q, want %q", name, log.String(), tc.logged)
		}
		if !strings.Contains(body, `xlb_test_info{version="after"} 1`) {
			t.Errorf("%s: the scrape stopped at the refused sample:\n%s", name, body)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		if _, err := parser.TextToMetricFamilies(strings.NewReader(body)); err != nil {
			t.Errorf("%s: the scrape does not parse: %v", name, err)
		}
	}
}

// TestHeldFamiliesInAnyOrder: the appliance's and queues' families may
// come in any order (a collect function writes them per queue or per
// peer): they are held and written whole, each family's lines together.
func TestHeldFamiliesInAnyOrder(t *testing.T) {
	var log bytes.Buffer
	reg := scopedRegistry(t, func(s Sink) {
		for q := range 3 {
			s.Add(sQueue, float64(q), strconv.Itoa(q), "rx")
			s.Add(sInfo, 1, "v"+strconv.Itoa(q))
			s.Add(sRule, float64(q), "r"+strconv.Itoa(q), "203.0.113.1")
			s.Add(sQueue, float64(q), strconv.Itoa(q), "tx")
		}
	})
	_, body := get(t, Handler(reg, slog.New(slog.NewTextHandler(&log, nil))), "/metrics", "", "")
	if log.Len() > 0 {
		t.Errorf("logged: %s", log.String())
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(xlbOnly(body)), sQueue.Name, sInfo.Name, sRule.Name); err != nil {
		t.Error(err)
	}
	if n := strings.Count(body, "# TYPE xlb_test_queue_packets_total"); n != 1 {
		t.Errorf("%d groups of the queue family:\n%s", n, body)
	}
}

// TestTextAllocs: writing a sample allocates nothing.
func TestTextAllocs(t *testing.T) {
	c := NewCollector(scoped4, nil)
	w := newTextWriter(bufio.NewWriter(io.Discard), c)
	s := Sink{text: w, scope: AllScopes}
	rule, service, backend := "web", "pool", "192.0.2.10"
	s.Add(sBackend, 1, rule, service, backend)
	if n := testing.AllocsPerRun(1000, func() { s.Add(sBackend, 1234.5, rule, service, backend) }); n != 0 {
		t.Errorf("%.1f allocations a sample", n)
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
}

// BenchmarkScrape: a scrape of 100 000 samples of one family, written
// as text by the handler's writer and, for reference, gathered as const
// metrics and encoded by client_golang (the daemon's scrape before).
func BenchmarkScrape(b *testing.B) {
	const n = 100000
	rules, backends := make([]string, n/100), make([]string, n)
	for i := range rules {
		rules[i] = fmt.Sprintf("r%05d", i)
	}
	for i := range backends {
		backends[i] = fmt.Sprintf("198.19.%d.%d", i/256%256, i%256)
	}
	collect := func(s Sink) {
		for i := range n {
			s.Add(sBackend, float64(i), rules[i/100], rules[i/100], backends[i])
		}
	}
	reg, err := NewRegistry(NewCollector(scoped4, collect))
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"text", "client_golang"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if path == "text" {
					reg.serveText(discardResponse{http.Header{}}, httptest.NewRequest("GET", "/metrics?scope=backend", nil), ScopeBackend, expfmt.NewFormat(expfmt.TypeTextPlain), nil)
					continue
				}
				g, _ := reg.gatherer(ScopeBackend)
				mfs, err := g.Gather()
				if err != nil {
					b.Fatal(err)
				}
				enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
				for _, mf := range mfs {
					enc.Encode(mf)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
		})
	}
}

type discardResponse struct{ h http.Header }

func (d discardResponse) Header() http.Header         { return d.h }
func (d discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d discardResponse) WriteHeader(int)             {}

var _ prometheus.Collector = (*Collector)(nil)
