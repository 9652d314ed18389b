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
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
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
	srv := httptest.NewUnstartedServer(control.NewHandler(&ops{d: d}))
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(64 << 10)
		}
		return c, err
	}}}
	resp, err := client.Get(srv.URL + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
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
	var bs []netip.Addr
	for j := range m + 1 {
		bs = append(bs, scaleBackend(last, j))
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.d", fmt.Sprintf("r%05d.toml", last)), []byte(scaleRuleFile(last, bs)), 0o644); err != nil {
		t.Fatal(err)
	}
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
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		c.(*net.TCPConn).SetWriteBuffer(64 << 10)
	}
	return c, err
}
