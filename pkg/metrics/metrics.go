package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Kind is a family's metric type.
type Kind = prometheus.ValueType

// Metric types.
const (
	Counter = prometheus.CounterValue
	Gauge   = prometheus.GaugeValue
)

// Family is one metric family: name, help, type, label names, and the
// scope a scrape asks for it by.
type Family struct {
	Name   string
	Help   string
	Kind   Kind
	Labels []string
	Scope  Scope
	desc   *prometheus.Desc
	order  []int // Labels' indexes in name order: the text's order, as client_golang writes it
}

// NewFamily declares a family of ScopeAppliance.
func NewFamily(name, help string, kind Kind, labels ...string) *Family {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return labels[order[i]] < labels[order[j]] })
	return &Family{Name: name, Help: help, Kind: kind, Labels: labels, Scope: ScopeAppliance, desc: prometheus.NewDesc(name, help, labels, nil), order: order}
}

// In puts f in scope s and returns it.
func (f *Family) In(s Scope) *Family {
	f.Scope = s
	return f
}

// Sink takes one scrape's samples: into client_golang's const metrics
// (Collector.Collect: the registry's answer) or straight into the text
// exposition (Handler).
type Sink struct {
	ch    chan<- prometheus.Metric
	text  *textWriter
	scope Scope
}

// Wants says whether the scrape asks for any family of scope s: a collect
// function skips the work of the families it would leave out.
func (s Sink) Wants(sc Scope) bool { return s.scope&sc != 0 }

// Add writes a sample of f; labelValues follow f.Labels. A sample of a
// family the scrape did not ask for is left out. A sample that does not
// fit its family is reported by the registry (and logged by Handler).
func (s Sink) Add(f *Family, value float64, labelValues ...string) {
	if s.scope&f.Scope == 0 {
		return
	}
	if s.text != nil {
		s.text.add(f, value, labelValues)
		return
	}
	// A copy: const metrics keep their values, and labelValues stays on
	// the caller's stack for the text writer.
	lv := slices.Clone(labelValues)
	m, err := prometheus.NewConstMetric(f.desc, f.Kind, value, lv...)
	if err != nil {
		m = prometheus.NewInvalidMetric(f.desc, fmt.Errorf("%s: %w", f.Name, err))
	}
	s.ch <- m
}

// Collector is a prometheus.Collector of a fixed list of families whose
// samples collect writes at each scrape.
type Collector struct {
	families []*Family
	declared map[*Family]bool
	collect  func(Sink)
}

// NewCollector returns a collector of families, filled by collect.
func NewCollector(families []*Family, collect func(Sink)) *Collector {
	declared := make(map[*Family]bool, len(families))
	for _, f := range families {
		declared[f] = true
	}
	return &Collector{families: families, declared: declared, collect: collect}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families {
		ch <- f.desc
	}
}

// Collect implements prometheus.Collector: every scope.
func (c *Collector) Collect(ch chan<- prometheus.Metric) { c.collect(Sink{ch: ch, scope: AllScopes}) }

// scoped is a collector that writes the families of one scope only.
type scoped struct {
	*Collector
	scope Scope
}

func (c scoped) Collect(ch chan<- prometheus.Metric) { c.collect(Sink{ch: ch, scope: c.scope}) }

// Registry is the collectors' families with the Go runtime and process
// collectors. Its prometheus.Registry gathers them all through
// client_golang (the protobuf answer, and the tests' reference); Handler
// writes their text itself.
type Registry struct {
	*prometheus.Registry
	runtime    *prometheus.Registry   // the Go and process collectors alone
	runtimeCs  []prometheus.Collector // and them, for a registry of some scopes
	collectors []*Collector
}

// NewRegistry returns a registry with the Go runtime and process
// collectors and cs. It is pedantic: a sample of a family its collector
// did not declare is an error of the scrape (a few microseconds per
// scrape, to catch a metric added without its Family).
func NewRegistry(cs ...*Collector) (*Registry, error) {
	r := &Registry{Registry: prometheus.NewPedanticRegistry(), runtime: prometheus.NewPedanticRegistry(), collectors: cs,
		runtimeCs: []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}}
	for _, c := range r.runtimeCs {
		if err := r.runtime.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	all := slices.Clone(r.runtimeCs)
	for _, c := range cs {
		all = append(all, c)
	}
	for _, c := range all {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return r, nil
}

// gatherer gathers the families of scope through client_golang.
func (r *Registry) gatherer(scope Scope) (prometheus.Gatherer, error) {
	if scope == AllScopes {
		return r.Registry, nil
	}
	reg := prometheus.NewPedanticRegistry()
	var cs []prometheus.Collector
	if scope&ScopeAppliance != 0 {
		cs = append(cs, r.runtimeCs...)
	}
	for _, c := range r.collectors {
		cs = append(cs, scoped{c, scope})
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return reg, nil
}

// Handler serves GET /metrics from r: the scopes the scrape's scope
// parameters name (every scope without one; a name it does not know is
// 400 Bad Request), in the text format written as collected (text.go)
// unless the scraper prefers protobuf, which client_golang writes. A
// collect error is logged to log and the scrape carries on.
func Handler(r *Registry, log *slog.Logger) http.Handler {
	opts := promhttp.HandlerOpts{ErrorLog: slogPrinter{log}, ErrorHandling: promhttp.ContinueOnError}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, req *http.Request) {
		scope, err := ParseScope(req.URL.Query()["scope"])
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		format := expfmt.Negotiate(req.Header)
		if format.FormatType() == expfmt.TypeTextPlain {
			r.serveText(w, req, scope, format, log)
			return
		}
		g, err := r.gatherer(scope)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		promhttp.HandlerFor(g, opts).ServeHTTP(w, req)
	})
	return mux
}

// slogPrinter is promhttp's error log on a slog.Logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	if p.log != nil {
		p.log.Error("metrics", "err", errors.New(fmt.Sprint(v...)))
	}
}

// Serve listens on addr and serves h until the returned stop is called.
func Serve(addr string, h http.Handler) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	return ServeListener(ln, h), nil
}

// ServeListener serves h on ln (a listener the caller opened, or one a
// predecessor process handed over) until stop is called.
func ServeListener(ln net.Listener, h http.Handler) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }
}
