package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// peerClientEnv makes the test binary act as a control client (run as
// another user by TestPeerCredentials): "SOCKET ACTION".
const peerClientEnv = "XLB_CONTROL_PEER_CLIENT"

func TestMain(m *testing.M) {
	if v := os.Getenv(peerClientEnv); v != "" {
		os.Exit(peerClient(v))
	}
	if v := os.Getenv(listenChildEnv); v != "" {
		os.Exit(listenChild(v))
	}
	os.Exit(m.Run())
}

// peerClient calls the socket and prints "ok" or "error STATUS MESSAGE".
func peerClient(arg string) int {
	path, action, _ := strings.Cut(arg, " ")
	c := NewClient(path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	switch action {
	case "status":
		_, err = c.Status(ctx, StatusQuery{})
	case "drain":
		_, err = c.ChangeBackend(ctx, BackendChange{Action: ActionDrain, Rule: "web", Backend: "192.0.2.1"})
	}
	var e *Error
	switch {
	case err == nil:
		fmt.Println("ok")
	case errors.As(err, &e):
		fmt.Printf("error %d %s\n", e.Status, e.Message)
	default:
		fmt.Printf("error %v\n", err)
	}
	return 0
}

// TestLevels: every GET is open to a read-only peer; every other method
// (a change, a reload, a flush, an appliance drain) needs admin, and a
// request without credentials is refused too.
func TestLevels(t *testing.T) {
	api := &fakeAPI{}
	h := NewHandler(api)
	reqs := []struct {
		method, target, body string
		change               bool
	}{
		{"GET", "/v1/status", "", false},
		{"GET", "/v1/backends?rule=web", "", false},
		{"GET", "/v1/conntrack/count", "", false},
		{"GET", "/v1/lookup?rule=web&src=198.51.100.7:40000", "", false},
		{"POST", "/v1/backend/drain", `{"rule":"web","backend":"192.0.2.1"}`, true},
		{"POST", "/v1/reload", `{}`, true},
		{"POST", "/v1/conntrack/flush", `{}`, true},
		{"POST", "/v1/appliance/drain", `{}`, true},
	}
	for _, level := range []Level{LevelNone, LevelReadOnly, LevelAdmin} {
		for _, r := range reqs {
			req := httptest.NewRequest(r.method, "http://xlb"+r.target, strings.NewReader(r.body))
			if level != LevelNone {
				req = req.WithContext(WithPeer(req.Context(), Peer{PID: 42, UID: 1000, Level: level}))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			want := http.StatusOK
			if r.change && level != LevelAdmin {
				want = http.StatusForbidden
			}
			if w.Code != want {
				t.Errorf("%s: %s %s: %d %s, want %d", level, r.method, r.target, w.Code, w.Body, want)
			}
			if w.Code == http.StatusForbidden && level == LevelReadOnly && !strings.Contains(w.Body.String(), "read-only access: uid 1000 (pid 42) may read the appliance but not change it") {
				t.Errorf("%s %s refused with %s", r.method, r.target, w.Body)
			}
		}
	}
	if n := len(api.changes) + len(api.applianceActions); n != 1+1 {
		t.Errorf("the API saw %d changes; want one drain and one appliance drain (the admin's)", n)
	}
}

// TestPeerCredentials drives the real socket as three users: root (admin),
// a member of control_socket_group (read-only: status yes, drain 403) and
// a user outside it (cannot connect at all). The kernel's SO_PEERCRED says
// who is who.
func TestPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to run clients as other users (run go test as root to include it)")
	}
	// A directory every user may enter, with a copy of this test binary
	// (go test's own directory is private).
	dir, err := os.MkdirTemp("", "xlb-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "control.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	const group = 64999 // a group id nobody else uses; only the test's client is in it
	path := filepath.Join(dir, "xlb.sock")
	api := &fakeAPI{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeGroup(ctx, path, fmt.Sprint(group), NewHandler(api)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	c := NewClient(path)
	defer c.Close()
	for i := 0; ; i++ {
		if _, err := c.Status(context.Background(), StatusQuery{}); err == nil {
			break
		}
		if i == 200 {
			t.Fatal("control socket never came up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || st.Gid != group {
		t.Fatalf("socket mode %v group %d, want 0660 group %d", fi.Mode().Perm(), st.Gid, group)
	}

	as := func(uid, gid uint32, groups []uint32, action string) string {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), peerClientEnv+"="+path+" "+action)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
		cmd.Stderr = io.Discard
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("client as uid %d: %v", uid, err)
		}
		return strings.TrimSpace(string(out))
	}
	member := func(action string) string { return as(65534, 65534, []uint32{group}, action) }
	if got := member("status"); got != "ok" {
		t.Errorf("status as a member of the group: %s", got)
	}
	if got := member("drain"); !strings.HasPrefix(got, "error 403 read-only access: uid 65534 (pid ") {
		t.Errorf("drain as a member of the group: %s; want 403 read-only", got)
	}
	if got := as(65533, 65533, nil, "status"); !strings.Contains(got, "permission denied") {
		t.Errorf("status as a user outside the group: %s; want permission denied", got)
	}
	if _, err := c.ChangeBackend(context.Background(), BackendChange{Action: ActionDrain, Rule: "web", Backend: "192.0.2.1"}); err != nil {
		t.Errorf("drain as root: %v", err)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.changes) != 1 {
		t.Errorf("the API saw %d changes; want root's drain only", len(api.changes))
	}
}
