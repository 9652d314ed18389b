package metrics

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriterFormat(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	w.Family("xlb_rx_packets_total", Counter, "Packets received.\nPer queue.")
	w.Sample("xlb_rx_packets_total", 12, "queue", "0")
	w.Sample("xlb_rx_packets_total", 3.5e9, "queue", "1", "note", `a "b"\c`)
	w.Family("xlb_up", Gauge, "1")
	w.Sample("xlb_up", 1)
	w.Sample("xlb_up", math.Inf(1))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `# HELP xlb_rx_packets_total Packets received.\nPer queue.
# TYPE xlb_rx_packets_total counter
xlb_rx_packets_total{queue="0"} 12
xlb_rx_packets_total{queue="1",note="a \"b\"\\c"} 3.5e+09
# HELP xlb_up 1
# TYPE xlb_up gauge
xlb_up 1
xlb_up +Inf
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriterReportsMisuse(t *testing.T) {
	w := NewWriter(io.Discard)
	w.Family("a", Gauge, "x")
	w.Family("a", Gauge, "x")
	if w.Flush() == nil {
		t.Error("a family written twice was not reported")
	}
	w = NewWriter(io.Discard)
	w.Sample("b", 1, "odd")
	if w.Flush() == nil {
		t.Error("an odd label list was not reported")
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler(func(w *Writer) {
		w.Family("xlb_up", Gauge, "up")
		w.Sample("xlb_up", 1)
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "xlb_up 1\n") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Errorf("GET /metrics: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
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
