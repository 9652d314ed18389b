package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAPI records what it was asked and answers from its fields.
type fakeAPI struct {
	mu       sync.Mutex
	changes  []BackendChange
	lookups  []LookupQuery
	ct       []ConntrackQuery
	status   []StatusQuery
	backends []StatusQuery
	reject   bool

	applianceActions []ApplianceAction
}

func (f *fakeAPI) Status(ctx context.Context, q StatusQuery) (*Status, error) {
	f.mu.Lock()
	f.status = append(f.status, q)
	f.mu.Unlock()
	return &Status{Config: "/etc/xlb/xlb.toml", Queues: []int{0, 1}, Rules: []Rule{{Name: "web", VIP: "203.0.113.10"}}}, nil
}

func (f *fakeAPI) Backends(ctx context.Context, q StatusQuery) (RuleStream, error) {
	f.mu.Lock()
	f.backends = append(f.backends, q)
	f.mu.Unlock()
	if q.Rule == "nope" {
		return nil, BadRequest("no rule %q", q.Rule)
	}
	if q.Rule == "panic" {
		panic("boom")
	}
	return func(emit func(*Rule) error) error {
		return emit(&Rule{Name: "web", Backends: []Backend{{Rule: "web", Address: "192.0.2.1"}, {Rule: "web", Address: "192.0.2.2"}}})
	}, nil
}

func (f *fakeAPI) ChangeBackend(ctx context.Context, c BackendChange) (*BackendChangeResult, error) {
	f.mu.Lock()
	f.changes = append(f.changes, c)
	f.mu.Unlock()
	return &BackendChangeResult{Changed: true, Message: string(c.Action) + " " + c.Backend, Backend: Backend{Rule: c.Rule, Address: c.Backend, Role: c.Role}}, nil
}

func (f *fakeAPI) Reload(ctx context.Context, _ ReloadRequest) (*ReloadResult, error) {
	if f.reject {
		return nil, &Error{Status: http.StatusUnprocessableEntity, Message: "reload rejected", Issues: []string{"rules.d/web.toml:5: failover.ratio: 1.5 is outside [0, 1]"}}
	}
	return &ReloadResult{Rules: 3}, nil
}

func (f *fakeAPI) Conntrack(ctx context.Context, q ConntrackQuery) (*ConntrackResult, error) {
	f.mu.Lock()
	f.ct = append(f.ct, q)
	f.mu.Unlock()
	return &ConntrackResult{Count: 7}, nil
}

func (f *fakeAPI) ChangeAppliance(ctx context.Context, a ApplianceAction) (*ApplianceChangeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applianceActions = append(f.applianceActions, a)
	return &ApplianceChangeResult{Changed: true, Message: "appliance " + string(a), Appliance: Appliance{Drained: a == ApplianceDrain}}, nil
}

func (f *fakeAPI) Lookup(ctx context.Context, q LookupQuery) (*LookupResult, error) {
	f.mu.Lock()
	f.lookups = append(f.lookups, q)
	f.mu.Unlock()
	if q.Src == "fail" {
		return nil, errors.New("plain failure")
	}
	return &LookupResult{Rule: q.Rule, Flow: q.Src, Backend: "192.0.2.1", Verdict: "TX"}, nil
}

// serve starts Serve on a fresh socket and returns its path and client.
func serve(t *testing.T, api API) (string, *Client) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "xlb.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, path, NewHandler(api)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("socket left behind: %v", err)
		}
	})
	for i := 0; ; i++ {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			break
		}
		if i == 200 {
			t.Fatal("control socket never came up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := NewClient(path)
	t.Cleanup(c.Close)
	return path, c
}

// raw sends one hand-written HTTP request and returns status and body.
func raw(t *testing.T, path, req string) (int, string) {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response to %q: %v", req, err)
	}
	defer resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	if resp.StatusCode != http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("%q: status %d with a body that is not a JSON error: %v", req, resp.StatusCode, err)
		}
		if e.Error == "" {
			t.Fatalf("%q: status %d with an empty error message", req, resp.StatusCode)
		}
	}
	return resp.StatusCode, e.Error
}

func post(path, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: xlb\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", path, len(body), body)
}

func get(path string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: xlb\r\nConnection: close\r\n\r\n"
}

func TestBadRequests(t *testing.T) {
	api := &fakeAPI{}
	path, _ := serve(t, api)
	for _, tc := range []struct {
		name, req string
		status    int
		msg       string
	}{
		{"garbage body", post("/v1/backend/drain", "{not json"), 400, "request body"},
		{"two values", post("/v1/backend/drain", `{"rule":"web","backend":"192.0.2.1"} {}`), 400, "more than one"},
		{"unknown field", post("/v1/backend/drain", `{"rule":"web","backend":"192.0.2.1","bogus":1}`), 400, "unknown field"},
		{"wrong type", post("/v1/backend/weight", `{"rule":"web","backend":"192.0.2.1","weight":"heavy"}`), 400, "request body"},
		{"no rule", post("/v1/backend/drain", `{"backend":"192.0.2.1"}`), 400, "rule is required"},
		{"mark without role", post("/v1/backend/mark", `{"rule":"web","backend":"192.0.2.1"}`), 400, "want primary or failover"},
		{"weight out of range", post("/v1/backend/weight", `{"rule":"web","backend":"192.0.2.1","weight":1001}`), 400, "outside [0, 1000]"},
		{"weight missing", post("/v1/backend/weight", `{"rule":"web","backend":"192.0.2.1"}`), 400, "weight is required"},
		{"role on drain", post("/v1/backend/drain", `{"rule":"web","backend":"192.0.2.1","role":"failover"}`), 400, "only for mark"},
		{"unknown action", post("/v1/backend/explode", `{"rule":"web","backend":"192.0.2.1"}`), 404, "no backend action"},
		{"huge body", post("/v1/reload", `"`+strings.Repeat("x", maxBody)+`"`), 400, "larger than"},
		{"reload body", post("/v1/reload", `[1,2]`), 400, "request body"},
		{"unknown param", get("/v1/status?verbose=1"), 400, "unknown query parameter"},
		{"repeated param", get("/v1/backends?rule=a&rule=b"), 400, "given 2 times"},
		{"negative offset", get("/v1/status?offset=-1"), 400, "must not be negative"},
		{"bad summary", get("/v1/status?summary=perhaps"), 400, "not a boolean"},
		{"bad limit", get("/v1/conntrack?limit=lots"), 400, "not an integer"},
		{"negative limit", get("/v1/conntrack?limit=-1"), 400, "negative"},
		{"backend without rule", get("/v1/conntrack/count?backend=192.0.2.1"), 400, "needs a rule"},
		{"bad port", get("/v1/lookup?rule=web&src=1.2.3.4:5&dst_port=70000"), 400, "outside [0, 65535]"},
		{"bad syn", get("/v1/lookup?rule=web&src=1.2.3.4:5&syn=maybe"), 400, "not a boolean"},
		{"lookup without src", get("/v1/lookup?rule=web"), 400, "src is required"},
		{"api says no", get("/v1/backends?rule=nope"), 400, `no rule "nope"`},
		{"unknown path", get("/v2/everything"), 404, "no endpoint"},
		{"wrong method", post("/v1/status", "{}"), 404, "no endpoint POST /v1/status"},
		{"api panics", get("/v1/backends?rule=panic"), 500, "internal error: boom"},
		{"plain error", get("/v1/lookup?rule=web&src=fail"), 500, "plain failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := raw(t, path, tc.req)
			if status != tc.status || !strings.Contains(msg, tc.msg) {
				t.Errorf("got %d %q, want %d containing %q", status, msg, tc.status, tc.msg)
			}
		})
	}
	// A garbage request line is refused by net/http itself; the server
	// lives on.
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("\x00\x01 not http at all\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	conn.Close()
	if err != nil || resp.StatusCode != 400 {
		t.Errorf("binary garbage: %v, %v; want a 400", resp, err)
	}
	if status, _ := raw(t, path, get("/v1/status")); status != 200 {
		t.Errorf("status after garbage: %d", status)
	}
	if len(api.changes) != 0 {
		t.Errorf("bad requests reached the API: %+v", api.changes)
	}
}

func TestClientRoundTrip(t *testing.T) {
	api := &fakeAPI{}
	_, c := serve(t, api)
	ctx := context.Background()

	st, err := c.Status(ctx, StatusQuery{})
	if err != nil || st.Config != "/etc/xlb/xlb.toml" || len(st.Rules) != 1 || st.Rules[0].VIP != "203.0.113.10" {
		t.Fatalf("status: %+v, %v", st, err)
	}
	q := StatusQuery{Rule: "web", VIP: "203.0.113.10", Backend: "192.0.2.1", Offset: 20, Limit: 10, Summary: true}
	if _, err := c.Status(ctx, q); err != nil || len(api.status) != 2 || api.status[0] != (StatusQuery{}) || api.status[1] != q {
		t.Fatalf("status queries: %+v, %v", api.status, err)
	}
	bq := StatusQuery{Rule: "web", VIP: "203.0.113.10", Backend: "192.0.2.1", Offset: 1, Limit: 2}
	bs, err := c.Backends(ctx, bq)
	if err != nil || len(bs) != 2 || bs[1].Address != "192.0.2.2" || len(api.backends) != 1 || api.backends[0] != bq {
		t.Fatalf("backends: %+v, %v (API asked %+v)", bs, err, api.backends)
	}
	w := 250
	res, err := c.ChangeBackend(ctx, BackendChange{Action: ActionWeight, Rule: "web", Backend: "192.0.2.1", Weight: &w})
	if err != nil || !res.Changed || res.Message != "weight 192.0.2.1" {
		t.Fatalf("weight: %+v, %v", res, err)
	}
	if got := api.changes[0]; got.Action != ActionWeight || got.Weight == nil || *got.Weight != 250 || got.Rule != "web" {
		t.Errorf("API got %+v", got)
	}
	if _, err := c.ChangeBackend(ctx, BackendChange{Action: ActionMark, Rule: "web", Backend: "192.0.2.1", Role: "failover"}); err != nil {
		t.Fatal(err)
	}
	if got := api.changes[1]; got.Role != "failover" {
		t.Errorf("mark: API got %+v", got)
	}
	// Usage mistakes come back as *Error with the status.
	_, err = c.ChangeBackend(ctx, BackendChange{Action: ActionMark, Rule: "web", Backend: "192.0.2.1", Role: "spare"})
	var e *Error
	if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "primary or failover") {
		t.Errorf("bad role: %v", err)
	}

	for _, op := range []ConntrackOp{ConntrackList, ConntrackCount, ConntrackFlush} {
		r, err := c.Conntrack(ctx, ConntrackQuery{Op: op, Rule: "web", Backend: "192.0.2.1"})
		if err != nil || r.Count != 7 {
			t.Errorf("%s: %+v, %v", op, r, err)
		}
	}
	for i, op := range []ConntrackOp{ConntrackList, ConntrackCount, ConntrackFlush} {
		if q := api.ct[i]; q.Op != op || q.Rule != "web" || q.Backend != "192.0.2.1" {
			t.Errorf("conntrack %s reached the API as %+v", op, q)
		}
	}
	lr, err := c.Lookup(ctx, LookupQuery{Rule: "web", Src: "198.51.100.7:40000", Proto: "TCP", DstPort: 80, SYN: true})
	if err != nil || lr.Backend != "192.0.2.1" {
		t.Fatalf("lookup: %+v, %v", lr, err)
	}
	if q := api.lookups[0]; q != (LookupQuery{Rule: "web", Src: "198.51.100.7:40000", Proto: "TCP", DstPort: 80, SYN: true}) {
		t.Errorf("lookup reached the API as %+v", q)
	}

	rr, err := c.Reload(ctx, ReloadRequest{})
	if err != nil || rr.Rules != 3 {
		t.Fatalf("reload: %+v, %v", rr, err)
	}
	api.reject = true
	_, err = c.Reload(ctx, ReloadRequest{})
	if !errors.As(err, &e) || e.Status != http.StatusUnprocessableEntity || len(e.Issues) != 1 || !strings.Contains(e.Issues[0], "rules.d/web.toml:5: failover.ratio") {
		t.Errorf("rejected reload: %#v", err)
	}
}

func TestConcurrentRequests(t *testing.T) {
	api := &fakeAPI{}
	_, c := serve(t, api)
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := fmt.Sprintf("198.51.100.%d:%d", i%250, 40000+i)
			r, err := c.Lookup(context.Background(), LookupQuery{Rule: "web", Src: src})
			if err == nil && r.Flow != src {
				err = fmt.Errorf("asked %s, answer is about %s", src, r.Flow)
			}
			if err == nil {
				_, err = c.ChangeBackend(context.Background(), BackendChange{Action: ActionDrain, Rule: "web", Backend: src})
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if len(api.lookups) != n || len(api.changes) != n {
		t.Errorf("API saw %d lookups and %d changes, want %d each", len(api.lookups), len(api.changes), n)
	}
}

func TestSocketSetup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "xlb.sock")

	// A stale socket (its server died) is replaced.
	os.MkdirAll(filepath.Dir(path), 0o755)
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("no stale socket to test with: %v", err)
	}
	ln, err := Listen(path)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	// A live one is not.
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second daemon on a live socket: %v", err)
	}
	ln.Close()

	// A regular file is never removed.
	file := filepath.Join(dir, "file.sock")
	os.WriteFile(file, []byte("mine"), 0o644)
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "mine" {
		t.Error("the regular file was touched")
	}

	// The client says plainly that nothing serves the socket.
	c := NewClient(filepath.Join(dir, "none.sock"))
	_, err = c.Status(context.Background(), StatusQuery{})
	if err == nil || !strings.Contains(err.Error(), "is xlb running?") {
		t.Errorf("no daemon: %v", err)
	}
}
