package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// TestStatusStreamBesideReload: a streamed status of every rule whose
// client stops reading half-way holds nothing the control path needs: a
// reload completes while the reply is stalled, and the rules the reply
// yields after it show the reload (each chunk is copied when its turn
// comes). The reply ends complete once the client reads on.
func TestStatusStreamBesideReload(t *testing.T) {
	const n, m = 100, 80 // two chunks (streamChunk), megabytes of reply
	d, dir := scaleDaemon(t, n, m)
	// Small socket buffers on both sides, so the stalled reply stops the
	// daemon's writes within the first chunk whatever the kernel's
	// defaults.
	resp := smallBufferGet(t, control.NewHandler(&ops{d: d}), "/v1/status")
	dec := json.NewDecoder(resp.Body)
	if err := testutil.SeekJSONArray(dec, "rules"); err != nil {
		t.Fatal(err)
	}
	var first control.Rule
	if err := dec.Decode(&first); err != nil || first.Name != "r00000" {
		t.Fatalf("first rule %q, %v", first.Name, err)
	}
	// The client reads nothing more: the daemon's writes fill the
	// socket's buffers and block (the reply is megabytes).
	time.Sleep(300 * time.Millisecond)

	last := n - 1
	growRule(t, dir, last, m) // one backend more
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := (&ops{d: d}).Reload(ctx, control.ReloadRequest{}); err != nil {
		t.Fatalf("reload beside a stalled status: %v (after %v)", err, time.Since(start))
	}
	t.Logf("reload completed in %v while the status reply was stalled", time.Since(start).Round(time.Millisecond))

	got := 1
	for dec.More() {
		var r control.Rule
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("rule %d: %v", got, err)
		}
		if want := fmt.Sprintf("r%05d", got); r.Name != want {
			t.Fatalf("rule %d is %s, want %s", got, r.Name, want)
		}
		if got == last && len(r.Backends) != m+1 {
			t.Errorf("rule %s yielded after the reload has %d backends, want the reloaded %d", r.Name, len(r.Backends), m+1)
		}
		got++
	}
	if got != n {
		t.Errorf("%d rules, want %d", got, n)
	}
	// The rest of the object.
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		var skip json.RawMessage
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
}

// smallBuffers gives every accepted TCP connection a small send buffer.
// smallBufferGet serves h with small socket buffers on both sides and
// GETs path from it (without asking for gzip), so that a reply the test
// stops reading blocks the handler's writes within its first hundred
// kilobytes whatever the kernel's defaults.
func smallBufferGet(t *testing.T, h http.Handler, path string) *http.Response {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(64 << 10)
		}
		return c, err
	}}}
	resp, err := client.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// growRule writes scaleDaemon's rule i in dir with m+1 backends.
func growRule(t *testing.T, dir string, i, m int) {
	t.Helper()
	var bs []netip.Addr
	for j := range m + 1 {
		bs = append(bs, scaleBackend(i, j))
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.d", fmt.Sprintf("r%05d.toml", i)), []byte(scaleRuleFile(i, bs)), 0o644); err != nil {
		t.Fatal(err)
	}
}

type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		c.(*net.TCPConn).SetWriteBuffer(64 << 10)
	}
	return c, err
}

// discardWriter is an http.ResponseWriter that counts and drops the body.
type discardWriter struct {
	h http.Header
	n int64
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { w.n += int64(len(b)); return len(b), nil }

// BenchmarkStreamedAnswers is the daemon's side of `xlb status --json`
// and `xlb backend list --json` of every rule, through the control
// handler (rows copied, built and encoded) into a writer that drops the
// bytes, at 100 and 1000 rules of 100 backends. B/rule is what an answer
// allocates per rule: garbage the collector lets grow up to the live
// heap again (docs/design.md#read-commands-at-scale); flat in the rule
// count, it is a chunk's rows.
func BenchmarkStreamedAnswers(b *testing.B) {
	for _, n := range []int{100, 1000} {
		d, _ := scaleDaemon(b, n, 100)
		h := control.NewHandler(&ops{d: d})
		for _, path := range []string{"/v1/status", "/v1/backends"} {
			b.Run(fmt.Sprintf("%s/rules=%d", path[4:], n), func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				var bytes int64
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				for b.Loop() {
					w := &discardWriter{h: http.Header{}}
					h.ServeHTTP(w, req)
					bytes = w.n
				}
				runtime.ReadMemStats(&ms1)
				ops := float64(b.N)
				b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/ops/float64(n), "B/rule")
				b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/ops/float64(n), "allocs/rule")
				b.ReportMetric(float64(bytes)/float64(n), "answer-B/rule")
			})
		}
	}
}

// TestStreamedRowsShareNothingVisible: an answer of every rule, whose
// rows are built chunk after chunk and rule after rule in reused storage,
// is the answer built with fresh storage for each rule (ruleInfo): rules
// of different sizes, in two chunks, with a drained backend in each chunk
// (a time field) and a backend removed by a reload and still draining,
// leave nothing of one rule in the next.
func TestStreamedRowsShareNothingVisible(t *testing.T) {
	const n = streamChunk + 6
	files := map[string]string{}
	var addrs []netip.Addr
	for i := range n {
		var bs []netip.Addr
		for j := range 1 + (i*7)%5 {
			bs = append(bs, scaleBackend(i, j))
		}
		files[fmt.Sprintf("rules.d/r%05d.toml", i)] = scaleRuleFile(i, bs)
		addrs = append(addrs, bs...)
	}
	d, dir := testDaemon(t, files, addrs)
	o := &ops{d: d}
	ctx := context.Background()
	for _, i := range []int{1, streamChunk + 2} {
		if _, err := o.ChangeBackend(ctx, control.BackendChange{Action: control.ActionDrain, Rule: fmt.Sprintf("r%05d", i), Backend: scaleBackend(i, 0).String()}); err != nil {
			t.Fatal(err)
		}
	}
	removed := 3 // 1 + 21%5 = 2 backends: one is removed, and drains
	if err := os.WriteFile(filepath.Join(dir, "rules.d", fmt.Sprintf("r%05d.toml", removed)), []byte(scaleRuleFile(removed, []netip.Addr{scaleBackend(removed, 0)})), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Reload(ctx, control.ReloadRequest{}); err != nil {
		t.Fatal(err)
	}

	st, err := o.Status(ctx, control.StatusQuery{})
	if err == nil {
		err = st.Collect()
	}
	if err != nil {
		t.Fatal(err)
	}
	rows, err := o.rowsOf(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := d.statsInputs(ctx, nil)
	if len(st.Rules) != n || len(rows) != n {
		t.Fatalf("%d rules streamed, %d rows; want %d", len(st.Rules), len(rows), n)
	}
	drained, gone := 0, 0
	for i := range rows {
		want := o.ruleInfo(rows[i], in)
		if got := st.Rules[i]; !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Errorf("rule %d streamed:\n%s\nbuilt alone:\n%s", i, g, w)
		}
		for _, b := range st.Rules[i].Backends {
			if b.DrainedAt != nil {
				drained++
			}
			if b.Admin == "REMOVED" {
				gone++
			}
		}
	}
	if drained != 2 || gone != 1 {
		t.Errorf("%d drained and %d removed rows; want 2 and 1", drained, gone)
	}
}

// TestRuleBuilderAllocs: a rule's row costs the same few allocations
// whatever its backends (its VIP's and ports' strings), once the
// builder's storage has grown: a row takes none.
func TestRuleBuilderAllocs(t *testing.T) {
	d, _ := scaleDaemon(t, 2, 100)
	o := &ops{d: d}
	ctx := context.Background()
	rows, err := o.rowsOf(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := d.statsInputs(ctx, nil)
	var b ruleBuilder
	b.build(o, &rows[0], in) // grow the storage; the digest is computed once
	b.build(o, &rows[1], in)
	allocs := testing.AllocsPerRun(100, func() {
		b.build(o, &rows[0], in)
		b.build(o, &rows[1], in)
	})
	if per := allocs / 2; per > 4 {
		t.Errorf("%.1f allocations per rule of 100 backends; want at most 4 (none per row)", per)
	}
	if got := b.rule.Backends; len(got) != 100 || got[99].Address != scaleBackend(1, 99).String() || got[0].Rule != "r00001" {
		t.Errorf("rows %d, last %+v", len(got), got[len(got)-1])
	}
}

// TestTableDigestGolden: table_digest is compared across the appliances
// of a fleet, whatever their version: the bytes it hashes never change.
// Digests of tables of 251 and 5003 slots (several of the slot buffer's
// flushes), taken before the digest was computed with less garbage, in
// a few allocations whatever the table.
func TestTableDigestGolden(t *testing.T) {
	for _, tc := range []struct {
		size     uint32
		backends int
		want     string
	}{
		{251, 3, "a89554cbacb718d3"},
		{5003, 40, "f928ee0f18c7768e"},
	} {
		groups := []failover.Group{{Name: "a", CapacityScaler: 1}}
		var bs []failover.Backend
		for i := range tc.backends {
			bs = append(bs, failover.Backend{Name: fmt.Sprintf("192.0.2.%d", i+1), ID: uint32(tc.backends - i), Group: "a", Health: failover.HealthHealthy, Weight: uint32(1 + i%3)})
		}
		st, err := failover.Compute(failover.DefaultPolicy(), groups, bs, nil, time.Unix(1e9, 0))
		if err != nil {
			t.Fatal(err)
		}
		r, err := dataplane.BuildRule(dataplane.RuleConfig{Name: "web", TableSize: tc.size}, st, 0x5eed1ab, fixedClock{})
		if err != nil {
			t.Fatal(err)
		}
		if got := tableDigest(0x5eed1ab, r); got != tc.want {
			t.Errorf("table of %d slots, %d backends: digest %s, want %s", tc.size, tc.backends, got, tc.want)
		}
		// The members' copy, the slot index, the hash, its sum and the
		// string: none per member or slot.
		if allocs := testing.AllocsPerRun(10, func() { tableDigest(0x5eed1ab, r) }); allocs > 6 {
			t.Errorf("table of %d slots, %d backends: %.0f allocations, want at most 6", tc.size, tc.backends, allocs)
		}
	}
}

// TestKeepNewest: trimming the selected rules' events as they are
// collected (Status) keeps what sorting them all would: the newest
// shownEvents, ties in the order they came, merged with the event log.
func TestKeepNewest(t *testing.T) {
	base := time.Unix(1e9, 0)
	var all, trimmed []control.RuleEvent
	for i := range 2000 {
		// Few distinct times: many ties, some out of order.
		ev := control.RuleEvent{Rule: fmt.Sprintf("r%05d", i), At: base.Add(time.Duration((i*7919)%97) * time.Second)}
		all = append(all, ev)
		trimmed = append(trimmed, ev)
		if len(trimmed) >= 4*shownEvents {
			trimmed = keepNewest(trimmed)
		}
	}
	log := []control.RuleEvent{{Kind: "reload", At: base.Add(96 * time.Second)}, {Kind: "cli", At: base.Add(50 * time.Second)}}
	want, got := newestEvents(all, log), newestEvents(trimmed, log)
	if !reflect.DeepEqual(got, want) || len(got) != shownEvents {
		t.Errorf("trimmed as collected: %d events %v…; all sorted: %d %v…", len(got), got[:3], len(want), want[:3])
	}
}
