package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"
)

// maxBody bounds a request body: every request is a few hundred bytes.
const maxBody = 64 << 10

// NewHandler serves api over HTTP + JSON (the endpoints in the package
// doc). Requests it cannot parse get 400, unknown paths 404, a wrong
// method 405, all with a JSON Error body; a panic in api is a 500, never a
// crash of the daemon.
func NewHandler(api API) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		q, err := statusQuery(r.URL.Query())
		if err != nil {
			writeError(w, err)
			return
		}
		st, err := api.Status(r.Context(), q)
		writeStatus(w, st, err) // stream.go
	})
	mux.HandleFunc("GET /v1/backends", func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		if v.Has("summary") {
			writeError(w, BadRequest("unknown query parameter %q", "summary"))
			return
		}
		q, err := statusQuery(v)
		if err != nil {
			writeError(w, err)
			return
		}
		rules, err := api.Backends(r.Context(), q)
		writeBackends(w, rules, err) // stream.go
	})
	mux.HandleFunc("POST /v1/backend/{action}", func(w http.ResponseWriter, r *http.Request) {
		var c BackendChange
		if err := decodeBody(r, &c); err != nil {
			writeError(w, err)
			return
		}
		c.Action = BackendAction(r.PathValue("action"))
		if err := c.Check(); err != nil {
			writeError(w, err)
			return
		}
		reply(w)(api.ChangeBackend(r.Context(), c))
	})
	handleAppliance(mux, api)
	handleCapture(mux, api) // capture.go
	mux.HandleFunc("POST /v1/reload", func(w http.ResponseWriter, r *http.Request) {
		var req ReloadRequest
		if err := decodeBody(r, &req); err != nil {
			writeError(w, err)
			return
		}
		reply(w)(api.Reload(r.Context(), req))
	})
	conntrack := func(op ConntrackOp) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var q ConntrackQuery
			var err error
			if r.Method == http.MethodPost {
				err = decodeBody(r, &q)
			} else {
				q, err = conntrackQuery(r.URL.Query())
			}
			if err == nil {
				q.Op = op
				err = q.Check()
			}
			if err != nil {
				writeError(w, err)
				return
			}
			reply(w)(api.Conntrack(r.Context(), q))
		}
	}
	mux.HandleFunc("GET /v1/conntrack", conntrack(ConntrackList))
	mux.HandleFunc("GET /v1/conntrack/count", conntrack(ConntrackCount))
	mux.HandleFunc("POST /v1/conntrack/flush", conntrack(ConntrackFlush))
	mux.HandleFunc("GET /v1/lookup", func(w http.ResponseWriter, r *http.Request) {
		q, err := lookupQuery(r.URL.Query())
		if err == nil {
			err = q.Check()
		}
		if err != nil {
			writeError(w, err)
			return
		}
		reply(w)(api.Lookup(r.Context(), q))
	})
	registerLifecycle(mux, api)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Also a known path with the wrong method: the mux prefers this
		// catch-all to its own plain-text 405.
		writeError(w, Errorf(http.StatusNotFound, "no endpoint %s %s", r.Method, r.URL.Path))
	})
	return guard(authorize(mux))
}

// guard turns a panic into a 500 with an Error body, so a client always
// gets JSON and a bug in one request never takes the daemon down.
func guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				writeError(w, Errorf(http.StatusInternalServerError, "internal error: %v", p))
			}
		}()
		// ServeMux would redirect an unclean path (a plain 301/307); no
		// client of ours sends one.
		if r.URL.Path == "" || path.Clean(r.URL.Path) != r.URL.Path {
			writeError(w, Errorf(http.StatusNotFound, "no endpoint %s %q", r.Method, r.URL.Path))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// reply writes v as JSON or err as an Error body.
func reply(w http.ResponseWriter) func(v any, err error) {
	return func(v any, err error) { writeReply(w, v, err) }
}

func writeReply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		writeError(w, Errorf(http.StatusInternalServerError, "encode reply: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b.Bytes())
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = Errorf(http.StatusInternalServerError, "%s", err.Error())
	}
	if e.Status == 0 {
		e.Status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(e)
}

// decodeBody reads one JSON object with no unknown fields; an empty body
// is an empty object.
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return BadRequest("read request body: %v", err)
	}
	if len(body) > maxBody {
		return BadRequest("request body larger than %d bytes", maxBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return BadRequest("request body: %v", err)
	}
	if dec.More() {
		return BadRequest("request body: more than one JSON value")
	}
	return nil
}

// noParams rejects query parameters other than the allowed ones, and
// repeated ones.
func noParams(q url.Values, allowed ...string) error {
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return BadRequest("unknown query parameter %q", k)
		}
		if len(vs) > 1 {
			return BadRequest("query parameter %q given %d times", k, len(vs))
		}
	}
	return nil
}

func intParam(q url.Values, key string, dst *int) error {
	s := q.Get(key)
	if s == "" {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return BadRequest("%s: %q is not an integer", key, s)
	}
	*dst = n
	return nil
}

func statusQuery(q url.Values) (StatusQuery, error) {
	var s StatusQuery
	if err := noParams(q, "rule", "vip", "backend", "offset", "limit", "summary"); err != nil {
		return s, err
	}
	s.Rule, s.VIP, s.Backend = q.Get("rule"), q.Get("vip"), q.Get("backend")
	if v := q.Get("summary"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, BadRequest("summary: %q is not a boolean", v)
		}
		s.Summary = b
	}
	if err := intParam(q, "offset", &s.Offset); err != nil {
		return s, err
	}
	if err := intParam(q, "limit", &s.Limit); err != nil {
		return s, err
	}
	if s.Offset < 0 || s.Limit < 0 {
		return s, BadRequest("offset and limit must not be negative")
	}
	return s, nil
}

func (q StatusQuery) values() url.Values {
	v := url.Values{}
	set(v, "rule", q.Rule)
	set(v, "vip", q.VIP)
	set(v, "backend", q.Backend)
	if q.Offset != 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Summary {
		v.Set("summary", "true")
	}
	return v
}

func conntrackQuery(q url.Values) (ConntrackQuery, error) {
	var c ConntrackQuery
	if err := noParams(q, "rule", "backend", "limit"); err != nil {
		return c, err
	}
	c.Rule, c.Backend = q.Get("rule"), q.Get("backend")
	return c, intParam(q, "limit", &c.Limit)
}

func (q ConntrackQuery) values() url.Values {
	v := url.Values{}
	set(v, "rule", q.Rule)
	set(v, "backend", q.Backend)
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

func lookupQuery(q url.Values) (LookupQuery, error) {
	var l LookupQuery
	if err := noParams(q, "rule", "src", "dst", "proto", "dst_port", "syn"); err != nil {
		return l, err
	}
	l.Rule, l.Src, l.Dst, l.Proto = q.Get("rule"), q.Get("src"), q.Get("dst"), q.Get("proto")
	if s := q.Get("syn"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return l, BadRequest("syn: %q is not a boolean", s)
		}
		l.SYN = b
	}
	return l, intParam(q, "dst_port", &l.DstPort)
}

func (l LookupQuery) values() url.Values {
	v := url.Values{}
	set(v, "rule", l.Rule)
	set(v, "src", l.Src)
	set(v, "dst", l.Dst)
	set(v, "proto", l.Proto)
	if l.DstPort != 0 {
		v.Set("dst_port", strconv.Itoa(l.DstPort))
	}
	if l.SYN {
		v.Set("syn", "true")
	}
	return v
}

func set(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

// Check validates the shape of a change (the daemon checks that the rule
// and backend exist).
func (c BackendChange) Check() error {
	if c.Rule == "" {
		return BadRequest("%s: rule is required", c.Action)
	}
	if c.Backend == "" {
		return BadRequest("%s: backend is required", c.Action)
	}
	switch c.Action {
	case ActionMark:
		if c.Role != "primary" && c.Role != "failover" {
			return BadRequest("mark: role %q: want primary or failover", c.Role)
		}
	case ActionWeight:
		if c.Weight == nil {
			return BadRequest("weight: weight is required")
		}
		if *c.Weight < 0 || *c.Weight > 1000 {
			return BadRequest("weight: %d is outside [0, 1000]", *c.Weight)
		}
	case ActionDrain, ActionUndrain, ActionReset:
	default:
		return Errorf(http.StatusNotFound, "no backend action %q (want mark, drain, undrain, weight or reset)", c.Action)
	}
	if c.Action != ActionMark && c.Role != "" {
		return BadRequest("%s: role is only for mark", c.Action)
	}
	if c.Action != ActionWeight && c.Weight != nil {
		return BadRequest("%s: weight is only for weight", c.Action)
	}
	return nil
}

// Check validates the shape of a conntrack query.
func (q ConntrackQuery) Check() error {
	if q.Backend != "" && q.Rule == "" {
		return BadRequest("conntrack %s: a backend filter needs a rule", q.Op)
	}
	if q.Limit < 0 {
		return BadRequest("conntrack %s: limit %d is negative", q.Op, q.Limit)
	}
	if q.Op != ConntrackList && q.Limit != 0 {
		return BadRequest("conntrack %s: limit is only for list", q.Op)
	}
	return nil
}

// Check validates the shape of a lookup.
func (l LookupQuery) Check() error {
	if l.Rule == "" && l.Dst == "" {
		return BadRequest("lookup: give rule or dst (the VIP)")
	}
	if l.Src == "" {
		return BadRequest("lookup: src is required")
	}
	if l.DstPort < 0 || l.DstPort > 65535 {
		return BadRequest("lookup: dst_port %d is outside [0, 65535]", l.DstPort)
	}
	return nil
}

// Serve listens on the unix socket path and serves h until ctx ends. It
// creates the socket's directory (0755) when missing, removes a stale
// socket left by a daemon that died, refuses to start when another
// process still answers on path, makes the socket 0600 (root only: the
// socket changes the appliance's forwarding), and removes it on return.
// It returns nil when ctx ends and the error otherwise.
func Serve(ctx context.Context, path string, h http.Handler) error {
	return ServeGroup(ctx, path, "", h)
}

// ServeGroup is Serve with the socket shared with group for read-only
// access (ShareWithGroup); "" keeps it root only.
func ServeGroup(ctx context.Context, path, group string, h http.Handler) error {
	ln, err := Listen(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	if group != "" {
		if err := ShareWithGroup(path, group); err != nil {
			ln.Close()
			return err
		}
	}
	return ServeListener(ctx, ln, h)
}

// Listen prepares the control socket as Serve does and returns its
// listener (for callers that run their own http.Server).
func Listen(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("control socket: no path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control socket %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			who := servingWho(path, peerOf(c).PID)
			c.Close()
			return nil, fmt.Errorf("control socket %s: %s is serving it (is xlb already running?)", path, who)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("control socket: remove stale socket: %w", err)
		}
	}
	// The socket is created with the umask's mode (0755 under the usual
	// 022: nobody else may connect, as connecting needs write permission)
	// and tightened to 0600 before Serve accepts anything.
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}
