// Package metrics writes metrics in the Prometheus text exposition format
// (version 0.0.4) and serves them over HTTP. It is a small writer, not a
// registry: the daemon reads its counters when scraped and writes them
// here, so nothing on the packet path knows about metrics.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind is a metric type of the exposition format.
type Kind string

const (
	Counter Kind = "counter"
	Gauge   Kind = "gauge"
)

// Writer writes one scrape. Samples of one metric must be written
// together, after its Family line.
type Writer struct {
	w    *bufio.Writer
	seen map[string]bool
	err  error
}

// NewWriter returns a Writer on w; call Flush at the end.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriter(w), seen: map[string]bool{}}
}

// Family starts a metric: its HELP and TYPE lines. A name given twice is
// a bug in the caller and is reported by Flush.
func (w *Writer) Family(name string, kind Kind, help string) {
	if w.seen[name] && w.err == nil {
		w.err = fmt.Errorf("metrics: family %s written twice", name)
	}
	w.seen[name] = true
	fmt.Fprintf(w.w, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, kind)
}

// Sample writes one sample; labels alternate name, value.
func (w *Writer) Sample(name string, value float64, labels ...string) {
	if len(labels)%2 != 0 && w.err == nil {
		w.err = fmt.Errorf("metrics: %s: odd label list %q", name, labels)
		return
	}
	w.w.WriteString(name)
	if len(labels) > 0 {
		w.w.WriteByte('{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				w.w.WriteByte(',')
			}
			fmt.Fprintf(w.w, "%s=\"%s\"", labels[i], escapeValue(labels[i+1]))
		}
		w.w.WriteByte('}')
	}
	w.w.WriteByte(' ')
	w.w.WriteString(formatValue(value))
	w.w.WriteByte('\n')
}

// Flush writes out what is buffered and reports the first error.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return err
	}
	return w.err
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeValue(s string) string { return valueEscaper.Replace(s) }

// Handler serves GET /metrics with what write produces.
func Handler(write func(w *Writer)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w := NewWriter(rw)
		write(w)
		if err := w.Flush(); err != nil {
			// The header is gone already; the scrape shows a truncated body.
			fmt.Fprintf(rw, "# error: %v\n", err)
		}
	})
	return mux
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

// SortedKeys returns the keys of m in order, for stable output.
func SortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
