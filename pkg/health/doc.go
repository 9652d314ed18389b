// Package health probes backends and turns probe results into the health
// and weight the eligible-set engine (package failover) consumes: HTTP,
// HTTPS and TCP checks, the X-Load-Balancing-Endpoint-Weight header,
// rise/fall thresholds and jittered schedules (docs/design.md#health-checks,
// docs/design.md#weights).
//
// # Ownership and threading
//
// A Checker owns one goroutine per Target (a backend as seen by one rule:
// probes are per rule, since each rule may use its own port or path and
// the backend may report another weight for each). That goroutine alone
// runs the target's probes and its rise/fall tracker; a per-target mutex
// lets Checker.Status read the tracker from other goroutines. Set, Add,
// Remove and Stop are serialised by one mutex and wait for the goroutines
// they stop, so when they return no prober of a removed target runs and no
// OnChange call for it starts. OnChange calls are serialised across all
// targets (the callback needs no lock of its own) and ordered per target;
// it must be quick, may call Status, and must not call Set, Add, Remove or
// Stop. Nothing here is on the packet path: the daemon feeds each change
// into failover.Compute, which rebuilds tables off the path.
//
// # One probe
//
//	HTTP   connect backend:port → GET request_path HTTP/1.1, Host, Connection: close
//	       → status line and headers (≤ 16 KiB, body never read) → close
//	HTTPS  the same inside TLS (ALPN http/1.1, SNI = Host without port)
//	TCP    connect → close
//	NONE   no probe: HEALTHY, weight 1, at once
//
// Pass: HTTP(S) status exactly 200 (redirects are not followed, 204 fails);
// TCP connect succeeds. The timeout covers connect, handshake, request and
// response; it is the socket deadline, so it runs on real time even with a
// fake Clock. Probes dial backend:port with Options.Dial from the
// appliance's own stack, never the VIP: the XDP program redirects only
// VIP-addressed packets, so the replies reach the kernel (seeds-digest 28).
//
// # Weight header
//
//	any HTTP response   header missing        → MISSING_WEIGHT, weight 0
//	                    one decimal 0..1000   → OK, that weight
//	                    anything else         → INVALID_WEIGHT, weight 0
//	no response         (timeout, refused, reset, TLS failure)
//	                    → UNAVAILABLE_WEIGHT, weight 0, once the fall threshold is reached
//	TCP connected, NONE → OK, weight 1 (UnweightedWeight)
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
//     2/2, request path "/", port 80 (HTTP, TCP) or 443 (HTTPS).
//   - Host header: health_check.host, else the backend address, with
//     ":port" when the port is not the scheme's default and IPv6 in
//     brackets. SNI is the host without its port; an address is never sent
//     as SNI (RFC 6066), as crypto/tls does.
//   - HTTPS does not verify the backend's certificate by default (backends
//     rarely hold a certificate for their own address, and a probe is about
//     the service, not its identity). Options.TLS set to a verifying config
//     (with RootCAs; ServerName comes from the Host, else the backend
//     address) turns verification on.
//   - Each probe opens a fresh connection (Connection: close, no keep-alive),
//     so every probe also tests connection set-up, as GCP's and HAProxy's
//     do. The body is not read.
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
//   - TCP and NONE report weight 1 with state OK: they carry no weight and
//     every backend counts the same (config rejects WEIGHTED_MAGLEV with
//     them). NONE means no checks at all: HEALTHY at once, thresholds
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
//   - Reload (Set): unchanged targets go on untouched. A target whose check
//     changed restarts with a new offset and keeps its health, weight and
//     streaks (no dip to UNKNOWN at a reload); the new thresholds apply
//     from its next probe. A removed target is forgotten; the consumer
//     knows it removed it, so nothing is reported. A failing Set (invalid
//     or duplicate target) changes nothing.
//   - A probe cut short by Remove, Set or Stop is discarded, not counted.
//   - No logging here: the consumer logs the changes it receives.
package health
