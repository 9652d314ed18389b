package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"
)

// Lifecycle is the part of the control API that replaces or stops the
// daemon itself. NewHandler serves it when the API implements it:
//
//	POST /v1/restart  {config, binary?}  → RestartResult (the successor serves)
//	POST /v1/stop     {}                 → StopResult (program detached, pins removed)
type Lifecycle interface {
	Restart(ctx context.Context, r RestartRequest) (*RestartResult, error)
	Stop(ctx context.Context, r StopRequest) (*StopResult, error)
}

// RestartRequest asks the daemon to hand its work to a successor process:
// the same executable (`xlb restart`) or another one (`xlb upgrade`).
type RestartRequest struct {
	Config string `json:"config"`           // the configuration the successor loads (absolute)
	Binary string `json:"binary,omitempty"` // the successor's executable (absolute); "" = the running one
}

// Check validates the request.
func (r RestartRequest) Check() error {
	if r.Config == "" || !filepath.IsAbs(r.Config) {
		return BadRequest("restart: config %q is not an absolute path", r.Config)
	}
	if r.Binary != "" && !filepath.IsAbs(r.Binary) {
		return BadRequest("restart: binary %q is not an absolute path", r.Binary)
	}
	return nil
}

// RestartResult describes a completed hand-over. The daemon that answers
// exits right after; the successor serves the same socket.
type RestartResult struct {
	PID          int       `json:"pid"`           // the successor
	Build        string    `json:"build"`         // its build (a digest of its executable)
	StateVersion int       `json:"state_version"` // of the state document it took (0: none)
	Queues       int       `json:"queues"`        // sockets handed over
	PauseMS      float64   `json:"pause_ms"`      // workers stopped → successor serving
	CutoverAt    time.Time `json:"cutover_at"`    // when the workers stopped
	Notes        []string  `json:"notes,omitempty"`
}

// StopRequest asks the daemon to stop for good: detach the program,
// remove the pins, close everything.
type StopRequest struct{}

// StopResult is the reply to a stop, sent once everything is removed.
type StopResult struct {
	Detached bool   `json:"detached"`
	PinDir   string `json:"pin_dir"` // the directory removed
}

// registerLifecycle adds the lifecycle endpoints when api offers them.
func registerLifecycle(mux *http.ServeMux, api API) {
	lc, ok := api.(Lifecycle)
	if !ok {
		return
	}
	mux.HandleFunc("POST /v1/restart", func(w http.ResponseWriter, r *http.Request) {
		var q RestartRequest
		if err := decodeBody(r, &q); err != nil {
			writeError(w, err)
			return
		}
		if err := q.Check(); err != nil {
			writeError(w, err)
			return
		}
		reply(w)(lc.Restart(r.Context(), q))
	})
	mux.HandleFunc("POST /v1/stop", func(w http.ResponseWriter, r *http.Request) {
		var q StopRequest
		if err := decodeBody(r, &q); err != nil {
			writeError(w, err)
			return
		}
		reply(w)(lc.Stop(r.Context(), q))
	})
}

// Restart hands the daemon's work to a successor and returns once the
// successor serves (or the daemon gave up and keeps serving: an *Error
// with the reason).
func (c *Client) Restart(ctx context.Context, r RestartRequest) (*RestartResult, error) {
	var res RestartResult
	return &res, c.call(ctx, http.MethodPost, "/v1/restart", nil, r, &res)
}

// Stop stops the daemon for good and returns once the program is
// detached and the pins are gone.
func (c *Client) Stop(ctx context.Context) (*StopResult, error) {
	var res StopResult
	return &res, c.call(ctx, http.MethodPost, "/v1/stop", nil, StopRequest{}, &res)
}

// ServeListener serves h on ln until ctx ends, then shuts down gracefully
// (requests in flight, such as the restart that ends this daemon, are
// answered). Closing ln stops the accepting at once; what was accepted is
// still answered until ctx ends. It removes nothing: the caller owns ln's path, which a
// successor process may be serving next.
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       peerContext, // peer.go: who may change what
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("control socket %s: %w", ln.Addr(), err)
		}
		// Closed by its owner (a hand-over: the successor accepts on the
		// socket now): the connections already accepted are still
		// answered, until ctx ends.
		<-ctx.Done()
		done <- nil
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-done
	return nil
}
