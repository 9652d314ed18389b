// Package control is the appliance's control API: HTTP + JSON over the unix
// socket control_socket (docs/design.md#command-line). The daemon serves it
// (Serve with NewHandler over its API implementation); the xlb command line
// is its only client (Client).
//
// # Ownership and goroutines
//
// Serve runs an http.Server: every request is handled on its own
// goroutine. The handler only parses and checks requests; the API
// implementation (package daemon) runs every change on the daemon's
// control goroutine and reads the data plane through its off-path handles,
// so any number of concurrent requests is safe. Client is safe for
// concurrent use.
//
// # The socket
//
// Serve creates the socket's directory (0755) when missing, removes a
// stale socket left by a daemon that died (a path some process still
// answers on is refused: "is xlb already running?"; a path that is not a
// socket is never removed), makes the socket 0600 so only root can drive
// the appliance, and removes it when it returns. The refusal names the
// process that holds the socket (holders.go: its inode in /proc/net/unix,
// then the holders' descriptors), not the one the kernel's peer
// credentials name: that is the listener's maker, which after xlb
// restart's hand-over has exited. Where no holder is found (a socket of
// another network namespace, or not root) it names the maker and says
// whether it has exited.
//
// # Access levels (peer.go)
//
// As HAProxy's stats socket levels: ServeGroup shares the socket with a
// group (control_socket_group: owned by it, mode 0660), whose members may
// read; the http.Server asks the kernel who connected (SO_PEERCRED, once
// per connection) and puts the Peer (pid, uid, gid, level) in the
// request's context (PeerFrom). Root, or the user the daemon runs as, is
// admin and may do everything; anyone else who could connect is
// read-only: every GET is open to them (status, backends, conntrack list
// and count, lookup), every other method is refused with 403 naming the
// peer, and so is GET /v1/capture (packets carry the clients' data). A
// request whose credentials are unknown may change nothing. The
// daemon logs the peer of every change.
//
// # Endpoints
//
//	GET  /v1/status?rule=&vip=&backend=&offset=&limit=&summary=
//	                                       → Status (appliance, counters, the selected rules with their
//	                                         backends, or with summary the counts and the rules that need
//	                                         attention; events)
//	GET  /v1/backends?rule=&vip=&backend=&offset=&limit=
//	                                       → [Backend] of the selected rules (stream.go: written
//	                                         as produced, as the rules of a status are)
//	POST /v1/backend/mark     {rule, backend, role: "primary"|"failover"}  → BackendChangeResult
//	POST /v1/backend/drain    {rule, backend}                              → BackendChangeResult
//	POST /v1/backend/undrain  {rule, backend}                              → BackendChangeResult
//	POST /v1/backend/weight   {rule, backend, weight: 0..1000}             → BackendChangeResult
//	POST /v1/backend/reset    {rule, backend}                              → BackendChangeResult
//	POST /v1/reload           {force?}                                     → ReloadResult
//	GET  /v1/conntrack[?rule=R[&backend=B]][&limit=N]  → ConntrackResult (count and entries)
//	GET  /v1/conntrack/count[?rule=R[&backend=B]]      → ConntrackResult (count)
//	POST /v1/conntrack/flush  {rule?, backend?}                            → ConntrackResult (removed)
//	GET  /v1/lookup?[rule=R&]src=ADDR[:PORT][&dst=VIP][&proto=P][&dst_port=N][&syn=true] → LookupResult
//	POST /v1/restart  {config, binary?}                                    → RestartResult (lifecycle.go)
//	POST /v1/stop     {}                                                   → StopResult
//	GET  /v1/capture?[point=rx|tx|both][&rule=R][&backend=B][&verdict=V,…][&reason=R][&src=S][&dst=D]
//	     [&port=N][&proto=P][&count=N][&duration=D][&snaplen=N][&rate=N] → JSON lines (application/x-ndjson):
//	     {"packet": capture.Packet}… then {"done": CaptureDone} or {"error": "…"} (capture.go)
//
// The JSON field names are the struct tags of the types in api.go. A
// backend change is acknowledged (200) only after it is saved in
// state_file and the new snapshot is published.
//
// # Errors
//
// Every reply that is not 200 has the body
//
//	{"error": "one line", "issues": ["rules.d/web.toml:14: failover.ratio: 1.5 is outside [0, 1]", …]}
//
// with issues only where there is a list (a rejected reload). Statuses:
// 400 a request the server cannot parse (bad JSON, unknown fields or
// query parameters, a value out of range) or one naming a rule or backend
// that does not exist; 403 a change asked by a read-only peer; 409 a
// reload the guard rails refuse without force (no rule left, a rule left
// with drained backends only); 404 an unknown path or method, and an unknown
// backend action; 422 a reload rejected by validation (the running
// configuration keeps serving); 500 anything else, including a panic in
// a handler, which never takes the daemon down. The Client returns these
// as *Error.
//
// # Decisions where the design is silent
//
//   - Versioned paths (/v1/…): the CLI and daemon ship in one binary, but a
//     CLI of a newer release talking to an older daemon gets a clear 404.
//   - A wrong method on a known path is a 404 ("no endpoint POST
//     /v1/status"), not a plain-text 405: every error is JSON.
//   - An unclean path ("/v1//status", "/.") is a 404 rather than the
//     ServeMux's redirect.
//   - The capture stream sends its status line with its first packet, so a
//     capture refused before anything was captured (no such rule, another
//     capture running: 409) is an ordinary error reply; a capture ends
//     when the client goes away, so it needs no count or duration.
//   - A streamed answer's backend rows are encoded by hand (encode.go) into
//     one reused buffer, the rest of each rule by encoding/json: the same
//     bytes as encoding/json's, without reflection or garbage per row, so a
//     read of every rule does not grow the daemon's heap with the rules
//     (docs/design.md#read-commands-at-scale). A field added to Backend
//     needs its line in appendBackend (TestStreamedBytesAsEncodingJSON
//     fails without it).
//   - Request bodies are limited to 64 KiB and must be one JSON object with
//     no unknown fields, so a misspelt field is an error, not a silent
//     default.
package control
