package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Kind is a family's metric type.
type Kind = prometheus.ValueType

// Metric types.
const (
	Counter = prometheus.CounterValue
	Gauge   = prometheus.GaugeValue
)

// Family is one metric family: name, help, type and label names.
type Family struct {
	Name   string
	Help   string
	Kind   Kind
	Labels []string
	desc   *prometheus.Desc
}

// NewFamily declares a family.
func NewFamily(name, help string, kind Kind, labels ...string) *Family {
	return &Family{Name: name, Help: help, Kind: kind, Labels: labels, desc: prometheus.NewDesc(name, help, labels, nil)}
}

// Sink takes one scrape's samples.
type Sink struct {
	ch chan<- prometheus.Metric
}

// Add sends a sample of f; labelValues follow f.Labels. A sample that does
// not fit its family is reported by the registry (and logged by Handler).
func (s Sink) Add(f *Family, value float64, labelValues ...string) {
	m, err := prometheus.NewConstMetric(f.desc, f.Kind, value, labelValues...)
	if err != nil {
		m = prometheus.NewInvalidMetric(f.desc, fmt.Errorf("%s: %w", f.Name, err))
	}
	s.ch <- m
}

// Collector is a prometheus.Collector of a fixed list of families whose
// samples collect writes at each scrape.
type Collector struct {
	families []*Family
	collect  func(Sink)
}

// NewCollector returns a collector of families, filled by collect.
func NewCollector(families []*Family, collect func(Sink)) *Collector {
	return &Collector{families: families, collect: collect}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families {
		ch <- f.desc
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) { c.collect(Sink{ch: ch}) }

// NewRegistry returns a registry with the Go runtime and process
// collectors and cs. It is pedantic: a sample of a family its collector
// did not declare is an error of the scrape (a few microseconds per
// scrape, to catch a metric added without its Family).
func NewRegistry(cs ...prometheus.Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewPedanticRegistry()
	all := append([]prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}, cs...)
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return reg, nil
}

// Handler serves GET /metrics from g (text or protobuf, as the scraper
// asks); a collect error is logged to log and the scrape carries on.
func Handler(g prometheus.Gatherer, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{log},
		ErrorHandling: promhttp.ContinueOnError,
	}))
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
