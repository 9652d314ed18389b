package control

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestServeListenerClosedByOwner: closing the listener (what a daemon does
// once its successor accepts on the socket) stops the accepting at once,
// while the request in flight is still answered and the server runs on
// until its context ends.
func TestServeListenerClosedByOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "answered")
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- ServeListener(ctx, ln, h) }()

	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: dial}, Timeout: 10 * time.Second}
	answer := make(chan string, 1)
	go func() {
		resp, err := client.Get("http://xlb/")
		if err != nil {
			answer <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	<-entered
	ln.Close()
	select {
	case err := <-served:
		t.Fatalf("ServeListener returned when its listener closed, before its context ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		t.Errorf("the socket still accepts after its listener closed")
	}
	close(release)
	if got := <-answer; got != "answered" {
		t.Errorf("the request in flight got %q, want its answer", got)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeListener after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeListener did not return after its context ended")
	}
}
