// Package health probes backends and turns probe results into the health
// and weight the eligible-set engine (package failover) consumes: HTTP,
// HTTPS, HTTP2, TCP, SSL, GRPC and UDP checks with response matching and
// PROXY v1 headers, the X-Load-Balancing-Endpoint-Weight header,
// rise/fall thresholds and jittered schedules (docs/design.md#health-checks,
// docs/design.md#weights).
//
// # Ownership and threading
//
// A Checker probes Targets (a backend as seen by one rule: probes are per
// rule, since each rule may use its own port or path and the backend may
// report another weight for each). One scheduler goroutine owns the
// schedule: a heap of the targets' next due times. It sleeps until the
// earliest, and in each round starts every probe that is due, up to a
// bound on the probes in flight (Options.MaxInFlight; the others wait for
// the next round): a connect-only TCP probe that goes direct (Check.Direct, or no
// Options.Dial) with the real clock on the scheduler itself, through the
// connector (a non-blocking connect whose end it takes from one epoll
// instance in the same or a later round); every other probe on a goroutine
// of its own that ends with it. A target has at most one probe in flight.
// The goroutine or round that ends a probe feeds the target's rise/fall
// tracker, reports a change and queues the next probe; a per-target mutex
// lets Checker.Status read the tracker from other goroutines. Set, SetRules,
// Add, Remove and Stop are serialised by one mutex and wait for the probes in
// flight of the targets they stop, so when they return no probe of a
// removed target runs and no OnChange call for it starts. OnChange calls
// are serialised across all targets (the callback needs no lock of its
// own) and ordered per target; it must be quick (it may run on the
// scheduler), may call Status, and must not call Set, Add, Remove or Stop.
// Nothing here is on the packet path: the daemon feeds each change into
// failover.Compute, which rebuilds tables off the path.
//
// # One probe
//
// Every probe opens a fresh connection from Options.Dial (the dialer seam:
// DirectDial, the appliance's own socket to backend:port, unless the
// daemon passes another) and closes it; proxy_header PROXY_V1 sends
// "PROXY TCP4|TCP6 src dst sport dport\r\n" with the connection's own
// addresses first, on every kind but UDP and NONE.
//
//	HTTP   GET request_path HTTP/1.1, Host, Connection: close → status and headers
//	       (≤ 16 KiB); the body only when response is set (its first 1024 bytes)
//	HTTPS  the same inside TLS (ALPN http/1.1, SNI = Host without port)
//	HTTP2  one GET over HTTP/2 on a new connection: TLS with ALPN h2 (the server
//	       must choose h2), or h2c with tls = false; :authority = Host
//	TCP    connect; send request; read until response's length, failing at the
//	       first byte that differs (no request/response: connect and close)
//	SSL    connect, TLS handshake (no ALPN), then as TCP inside TLS
//	GRPC   grpc.health.v1.Health/Check for grpc_service_name on a new client
//	       connection (plaintext, or TLS with ALPN h2)
//	UDP    one request datagram on a connected socket; the first answer decides
//	NONE   no probe: HEALTHY, weight 1, at once
//
// Pass: HTTP kinds on status exactly 200 (redirects are not followed, 204
// fails) and, with response, the text in the body's first 1024 bytes;
// TCP and SSL on connect (and handshake) and, with response, an answer
// that begins with its bytes; GRPC on SERVING; UDP on an answer that
// begins with response (any answer without one). The timeout covers
// connect, handshake, request and response; it is the socket deadline
// (HTTP2, GRPC: the request's context; the connector: its rounds, up to
// 20 ms late), so it runs on real time even with a fake Clock. Probes go to backend:port as far as this package knows;
// the dialer decides how they get there: the daemon's sends the checks of
// data-path rules to the VIP through the rule's encapsulation
// (pkg/probepath), and their answers, from the VIP to the appliance, pass
// the XDP program (it redirects packets addressed to a VIP) to the kernel.
// How, in short: a probe's socket is an ordinary kernel socket, bound and
// marked so that a policy rule routes its packets into the daemon's TUN;
// the daemon encapsulates each with the template the workers use for that
// backend and sends it on the interface, so the appliance needs no tunnel
// module and the workers do nothing for probes, not even a branch. What it
// costs is the appliance's CPU per probe, a few more system calls than a
// direct probe's (the TUN's read, the packet socket's write): measured
// against direct probes by BenchmarkProbes, figures in bench/README.md.
// Every check kind works either way, since only the dialer differs
// (docs/design.md#data-path-probes).
//
// # Weight header
//
//	any HTTP response   header missing        → MISSING_WEIGHT, weight 0
//	                    one decimal 0..1000   → OK, that weight
//	                    anything else         → INVALID_WEIGHT, weight 0
//	no response         (timeout, refused, reset, TLS failure)
//	                    → UNAVAILABLE_WEIGHT, weight 0, once the fall threshold is reached
//	TCP, SSL, GRPC, UDP passing, NONE → OK, weight 1 (UnweightedWeight)
//
// # Rise and fall (per target)
//
//	                  healthy_threshold passes in a row
//	UNKNOWN (start) ─────────────────────────────────────▶ HEALTHY
//	      │                                                 │    ▲
//	      │ unhealthy_threshold                             │    │
//	      │ failures in a row                               │    │
//	      ▼                                                 │    │
//	UNHEALTHY ◀──── unhealthy_threshold failures in a row ──┘    │
//	      │                                                      │
//	      └──────────── healthy_threshold passes in a row ───────┘
//
// A pass resets the failure streak and a failure the pass streak, so a
// backend that alternates never changes state with thresholds ≥ 2. UNKNOWN
// counts as not healthy (failover.HealthUnknown). Status.Changes counts
// health changes: a flap counter for metrics and alerts.
//
// # Decisions (where the design and the seeds are silent)
//
//   - A target's check is this package's own type (Check, Kind), not the
//     configuration's: the daemon converts [health_check] (pkg/daemon
//     health.go checkOf, and the healthKinds table in enums.go), so this
//     package does not import pkg/config.
//   - Defaults are config's (GCP's): interval 5 s, timeout 5 s, thresholds
//     2/2, request path "/", port 80 (HTTP, TCP) or 443 (HTTPS, SSL,
//     HTTP2); GRPC and UDP have none (config requires the port).
//   - The kinds follow Google Cloud's health checks (TCP, SSL, HTTP,
//     HTTPS, HTTP2, GRPC with its TLS variant, request/response,
//     proxyHeader); UDP is not one of them, and follows TCP's request and
//     response. Payloads may be binary (request_hex, response_hex in the
//     configuration), since UDP services (DNS, games) speak binary.
//   - HTTP2 runs on net/http's HTTP/2 client (the bundled
//     golang.org/x/net/http2): x/net's own Transport.NewClientConn is
//     deprecated in favour of net/http's Transport.NewClientConn and
//     Protocols, which are used here with the prober's own dialers, so the
//     dialer seam and the PROXY line apply. GRPC runs on grpc-go's client
//     and the grpc_health_v1 stubs. Both build a new connection per probe
//     (no pooling), like the other kinds.
//   - HTTP2 over TLS fails unless the server chooses h2 in ALPN; there is
//     no fall-back to HTTP/1.1 (that would be the HTTPS check).
//   - GRPC over TLS takes its :authority from the TLS server name (Host
//     without port), as gRPC insists; in plaintext it is Host (with port).
//   - A UDP probe sends one datagram per probe, no retry within the
//     timeout: the thresholds absorb a lost datagram, as they do a lost
//     SYN. An ICMP port unreachable fails the probe at once ("connection
//     refused" on the connected socket).
//   - A wrong answer fails at once, not at the timeout: TCP and SSL stop
//     reading at the first byte that differs.
//   - An unweighted kind learns no weight from a failure: the last weight
//     stands until the fall threshold, as with an HTTP check that gets no
//     answer.
//   - Host header: health_check.host, else the backend address, with
//     ":port" when the port is not the scheme's default and IPv6 in
//     brackets. SNI is the host without its port; an address is never sent
//     as SNI (RFC 6066), as crypto/tls does.
//   - TLS kinds (HTTPS, SSL, HTTP2, GRPC with tls) do not verify the
//     backend's certificate by default (backends rarely hold a certificate
//     for their own address, and a probe is about the service, not its
//     identity). Options.TLS set to a verifying config (with RootCAs;
//     ServerName comes from the Host, else the backend address) turns
//     verification on.
//   - Each probe opens a fresh connection (Connection: close, no keep-alive),
//     so every probe also tests connection set-up, as GCP's and HAProxy's
//     do. The body is read only to match response.
//   - Weights are integers in decimal, 0..1000, as the GCP guide says;
//     "1.5" and "1.0" are INVALID_WEIGHT (the API's wording about floats is
//     not followed). Leading zeros and surrounding blanks are accepted;
//     signs, exponents, hex and several header lines are not.
//   - A weight in any HTTP answer counts at once, also with a failing
//     status: a backend may shed load with weight 0 while passing, or stay
//     preferred while failing (seeds 000.8: non-zero weight is preferred
//     whatever the health). Without an answer the last weight stands until
//     the fall threshold, then it becomes UNAVAILABLE_WEIGHT with weight 0:
//     one lost probe moves no traffic. Before the first answer the state is
//     UNAVAILABLE_WEIGHT.
//   - Oscillating weights: every change of weight or weight state is
//     reported at once (no quantisation, no hold). Damping belongs to the
//     consumer, which sees all rules: the daemon coalesces changes and
//     rebuilds a rule's tables at most once per rebuild period, so a header
//     that flips every probe costs one rebuild per period at worst, and
//     conntrack keeps established flows where they are.
//   - TCP, SSL, GRPC, UDP and NONE report weight 1 with state OK when they
//     pass: they carry no weight and every backend counts the same (config
//     rejects WEIGHTED_MAGLEV with them). NONE means no checks at all: HEALTHY at once, thresholds
//     ignored.
//   - Only changes of health, weight or weight state are reported; a new
//     error text alone is not (Status shows it). The first report of a
//     target is its first change, typically its first weight; the initial
//     state (UNKNOWN, UNAVAILABLE_WEIGHT, weight 0) is not reported: the
//     consumer assumes it or reads it from Status right after Set.
//   - Schedule: the first probe of a target is at a uniformly random offset
//     in [0, interval) after it is added, so a thousand targets added at
//     once spread over one interval; later probes follow one period after
//     the previous due time, each period interval ± 10 % (JitterFraction),
//     so probes that happen to align drift apart. A probe that outlasts its
//     period is followed at once by the next. The random stream of a target
//     is seeded by Options.Seed and the target's key, so a schedule does
//     not depend on the order targets were added in; Seed 0 is random.
//   - Rounds: after a round that started probes the scheduler sleeps at
//     least 20 ms (schedulerTick), so probes start in rounds (at 2000
//     probes/s, 50 rounds of about 40) and at most 20 ms late. A wake-up
//     of the process costs about what a probe's system calls cost (on the
//     measured virtual machine, bench/README.md): a round per probe, or a
//     goroutine and a timer per target, cost several times the probes.
//   - Scale: one goroutine for the schedule and none per target, so 10 000
//     targets cost a heap and their probers (1–2 KiB each), not
//     10 000 goroutines and timers. Connect-only TCP checks, the common
//     case at scale, take the connector: socket, two setsockopt, connect,
//     getsockopt TCP_INFO and close per probe, made as raw system calls
//     (they never block; the runtime's bookkeeping of a system call would
//     wake its monitor thread after every idle spell). TCP_INFO, read at
//     the end of the round that started the connect, says whether it is
//     done (most are, on a local network) and the round trip the kernel
//     measured, reported as the probe's latency; only a connect still in
//     flight then joins the epoll instance (epoll_ctl, and a share of one
//     epoll_pwait per round until it ends or times out). A backend farther
//     than the round takes to start (a round of 40 probes spans about
//     2 ms) pays that TCP_INFO on top of the epoll path; reading it a round
//     later instead would spare that, but held every socket 20 ms longer
//     and cost more per probe in BenchmarkCheckerScale (53 µs against
//     43-49, two runs each at load 11-14), so it was not kept. Every other
//     kind, and every probe with a custom dialer or a fake Clock, runs on
//     a goroutine through the DialFunc (net.Dialer's dozen system calls,
//     a context and a timer). BenchmarkCheckerScale measures the whole at
//     10 000 backends beside a raw connect and a net.Dialer connect
//     (bench/README.md).
//   - Descriptors: every probe in flight holds a socket (the connector's
//     from the start of its round to the round that ends it, the others
//     for their goroutine's life), and a scheduler that fell behind (a
//     busy machine, a stall) finds a whole stretch of the schedule due at
//     once. So the probes in flight are bounded, by default to half the
//     process's open-file limit (RLIMIT_NOFILE's soft limit at New, which
//     Go raises to the hard one; 512 if it cannot be read): the other
//     half is the daemon's, whose own descriptors (control connections,
//     rule files read at a reload, netlink, AF_XDP, BGP, a hand-over's
//     copies) are a few hundred at most, and whose control plane must
//     keep working however the probes fare. Without it, 100 000 targets
//     whose connects hung took every descriptor of a daemon limited to
//     20 000, and reload and backend undrain failed with "too many open
//     files" (bench/README.md). NONE holds no socket and is not counted.
//     A due probe over the bound waits for the next round, earliest due
//     first: late, not lost, not failed, and its timeout runs from its
//     start, so the wait changes no verdict; its next due time follows
//     from the one it missed, as for a probe that outlasted its period.
//     The bound is of probes, not rate: while it holds, each target is
//     probed less often than its interval. That shows: Checker.Late
//     counts the probes that started after a round that held them back,
//     and Options.OnLate hears of them at once, then at most once a
//     minute (the daemon logs a warning).
//   - A connect-only probe ends SYN, SYN-ACK, RST: its socket delays the
//     handshake's last ACK (TCP_QUICKACK off before connect; the kernel
//     holds it up to 200 ms) and closes with a zero linger, which sends a
//     reset instead. The backend's kernel drops the half-open connection,
//     so its application never accepts a probe (no log line, no worker
//     woken), neither end walks the FIN exchange, and the appliance keeps
//     no TIME_WAIT socket (a FIN close kept one per probe for 60 s:
//     120 000 at 2000 probes/s). What the probe proves is unchanged: the
//     backend's kernel completes a handshake on the port, which it stops
//     doing when the listener is gone or its accept queue is full. HAProxy's
//     plain TCP check does the same (delayed ACK, then a reset); Envoy's
//     TCP check instead keeps its connection between checks by default,
//     which stops testing connection set-up; Google Cloud's documentation
//     asks only that the handshake complete. Probes that send a request,
//     and the other kinds, close as their protocol does.
//   - Direct (Check) overrides Options.Dial for one target: the daemon
//     dials only the checks of data-path rules itself and marks the
//     others direct, so they keep the connector.
//   - Reload (Set): unchanged targets go on untouched. A target whose check
//     changed restarts with a new offset and keeps its health, weight and
//     streaks (no dip to UNKNOWN at a reload); the new thresholds apply
//     from its next probe. A removed target is forgotten; the consumer
//     knows it removed it, so nothing is reported. A failing Set (invalid
//     or duplicate target) changes nothing. SetRules is Set for the
//     targets of some rules only: the others are not looked at beyond a
//     pass over the keys, so a reload of one rule costs that rule's
//     targets, not every target's (a Set of 100 000 targets is a tenth of
//     a second and a hundred thousand allocations).
//   - A probe cut short by Remove, Set or Stop is discarded, not counted.
//   - No logging here: the consumer logs the changes it receives.
package health
