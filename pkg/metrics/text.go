package metrics

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// serveText answers a scrape in the text format: the Go and process
// families through client_golang's encoder, then the collectors' samples
// (textWriter). Its cost is the samples asked for, and its memory a
// buffer and the appliance's and queues' few samples, not a copy of the
// scrape.
func (r *Registry) serveText(w http.ResponseWriter, req *http.Request, scope Scope, format expfmt.Format, log *slog.Logger) {
	h := w.Header()
	h.Set("Content-Type", string(format))
	var out io.Writer = w
	if acceptsGzip(req.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		gz := gzipPool.Get().(*gzip.Writer)
		gz.Reset(w)
		defer func() { gz.Close(); gzipPool.Put(gz) }()
		out = gz
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	defer bw.Flush()
	fail := func(err error) {
		if log != nil {
			log.Error("metrics", "err", err)
		}
	}
	if scope&ScopeAppliance != 0 {
		mfs, err := r.runtime.Gather()
		if err != nil {
			fail(err) // what was gathered is written, as promhttp's ContinueOnError does
		}
		enc := expfmt.NewEncoder(bw, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				fail(fmt.Errorf("metrics: encode %s: %w", mf.GetName(), err))
				return
			}
		}
	}
	for _, c := range r.collectors {
		t := newTextWriter(bw, c)
		c.collect(Sink{text: t, scope: scope})
		t.end()
		if t.err != nil {
			fail(t.err)
		}
	}
}

// gzipPool holds the writers of gzip-compressed scrapes. BestSpeed: a
// scrape of every backend at 1000 × 100 is ~50 MB of text, which the
// default level compresses at about 1 s of CPU; the text's label values
// repeat, so the fastest level loses little of the ratio
// (docs/design.md#observability).
var gzipPool = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return gz
}}

// acceptsGzip says whether an Accept-Encoding header names gzip (without
// q=0), as a Prometheus server's does.
func acceptsGzip(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
				continue
			}
		}
		return true
	}
	return false
}

// streamed are the scopes whose families grow with the configuration:
// textWriter writes their samples to the response as they come, so a
// collect function writes each such family's samples together, one
// family after another. The others' (a few hundred samples at most) are
// held until collect returns, in any order.
const streamed = ScopeRule | ScopeBackend

// textWriter writes samples in the text exposition format (version 0.0.4),
// as client_golang's encoder would write them: label pairs in name order,
// values as its writeFloat formats them, HELP and label values escaped
// the same way. A family's HELP and TYPE come before its first sample.
type textWriter struct {
	out  *bufio.Writer
	c    *Collector
	cur  *Family            // the streamed family being written
	done map[*Family]bool   // streamed families whose lines have ended
	held map[*Family][]byte // the other families' lines, until end
	line []byte
	err  error // the samples refused
}

func newTextWriter(out *bufio.Writer, c *Collector) *textWriter {
	return &textWriter{out: out, c: c, done: map[*Family]bool{}, held: map[*Family][]byte{}}
}

// add writes one sample, or refuses it (and joins why to t.err): a family
// its collector did not declare, a streamed family's sample after
// another streamed family's (a second group of the same name would not
// parse), label values that do not fit.
func (t *textWriter) add(f *Family, v float64, labelValues []string) {
	if !t.c.declared[f] {
		t.refuse(fmt.Errorf("metrics: %s: a family its collector does not declare", f.Name))
		return
	}
	if len(labelValues) != len(f.Labels) {
		t.refuse(fmt.Errorf("metrics: %s: %d label values for %d labels", f.Name, len(labelValues), len(f.Labels)))
		return
	}
	for _, v := range labelValues {
		if !plain(v) && !utf8.ValidString(v) {
			t.refuse(fmt.Errorf("metrics: %s: a label value that is not UTF-8", f.Name))
			return
		}
	}
	if f.Scope&streamed == 0 {
		b, ok := t.held[f]
		if !ok {
			b = appendHeader(b, f)
		}
		t.held[f] = appendSample(b, f, v, labelValues)
		return
	}
	if f != t.cur {
		if t.done[f] {
			t.refuse(fmt.Errorf("metrics: %s: a sample after another family's: a collect function writes each family of scope %s together", f.Name, f.Scope))
			return
		}
		if t.cur != nil {
			t.done[t.cur] = true
		}
		t.cur = f
		t.line = appendHeader(t.line[:0], f)
		t.out.Write(t.line)
	}
	t.line = appendSample(t.line[:0], f, v, labelValues)
	t.out.Write(t.line)
}

// end writes the held families, in the order the collector declares them.
func (t *textWriter) end() {
	for _, f := range t.c.families {
		if b, ok := t.held[f]; ok {
			t.out.Write(b)
		}
	}
}

// appendHeader appends f's HELP and TYPE lines.
func appendHeader(b []byte, f *Family) []byte {
	b = append(b, "# HELP "...)
	b = append(b, f.Name...)
	b = append(b, ' ')
	b = appendEscaped(b, f.Help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.Name...)
	b = append(b, ' ')
	b = append(b, kindName(f.Kind)...)
	return append(b, '\n')
}

// appendSample appends a sample's line.
func appendSample(b []byte, f *Family, v float64, labelValues []string) []byte {
	b = append(b, f.Name...)
	for n, i := range f.order {
		if n == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = append(b, f.Labels[i]...)
		b = append(b, '=', '"')
		b = appendEscaped(b, labelValues[i], true)
		b = append(b, '"')
	}
	if len(f.order) > 0 {
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}

func (t *textWriter) refuse(err error) {
	t.err = errors.Join(t.err, err)
}

func kindName(k Kind) string {
	switch k {
	case prometheus.CounterValue:
		return "counter"
	case prometheus.GaugeValue:
		return "gauge"
	}
	return "untyped"
}

// plain says whether s is ASCII without a backslash, newline or double
// quote: valid UTF-8 that needs no escaping, as rule names and addresses
// are (one pass over the bytes, where a check for each took two).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || c == '\\' || c == '\n' || c == '"' {
			return false
		}
	}
	return true
}

// appendEscaped appends s with backslash and newline escaped (and the
// double quote, in a label value).
func appendEscaped(b []byte, s string, quote bool) []byte {
	if plain(s) {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat formats v as the text format's encoder does.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case v == 1:
		return append(b, '1')
	case v == 0:
		return append(b, '0')
	case v == -1:
		return append(b, "-1"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
