// Package metrics exports xlb's metrics: a Collector over a fixed set of
// declared families whose samples a function writes at scrape time, a
// Registry with github.com/prometheus/client_golang's Go and process
// collectors beside it, and the HTTP handler and server. Nothing on the
// packet path knows about metrics: the collect function reads the
// workers' counters (atomics) when Prometheus scrapes, on the scraping
// goroutine (one per scrape, net/http's).
//
// A scrape asks for scopes (scope.go: appliance, queue, rule, backend;
// ?scope=queue&scope=rule, or none for all); the collect function is
// told which (Sink.Wants) and skips the work of the others. In the text
// format the handler writes the samples to the response as they are
// collected (text.go: a family's lines in client_golang's text, gzip at
// BestSpeed when asked); a scraper that prefers protobuf gets
// client_golang's answer, gathered from the same collect function.
//
// # Adding a metric
//
//  1. Declare its Family where the code that knows the value lives. In
//     package daemon that is a package-level var made with its family
//     helper (which registers it with the daemon's collector), in the file
//     of the concern: metrics.go for the data plane, rules, backends and
//     conntrack (e.g. restart's flood counters: per queue, beside
//     mCTEvents, or as new events of xlb_conntrack_events_total),
//     appliance.go for BGP. Name it xlb_<what>_<unit>: counters end in
//     _total, units are base units (seconds, bytes), labels are
//     snake_case, an _info gauge is constant 1; the help says what one
//     sample counts and per what. Put it in its scope with In (the
//     default is ScopeAppliance): per queue ScopeQueue, per rule
//     ScopeRule, per rule and backend ScopeBackend.
//  2. Emit its samples in the collect function of that file (collectQueues,
//     collectRules, collectBGP in package daemon) with Sink.Add, label
//     values in the family's label order. A family of ScopeRule or
//     ScopeBackend is written to the response as it comes, so all its
//     samples come together, one such family after another (collectRules
//     makes a pass per family); the others are held until the scrape's
//     end and may come in any order.
//  3. Run the daemon's TestMetricsLint and TestMetricsTextAsGathered: a
//     scrape must pass client_golang's linter (promlint: the checks
//     promtool check metrics makes), the text written as collected must
//     equal what client_golang gathers, and both must equal
//     testdata/scrape.golden (go test -update rewrites it: read the
//     diff). The pedantic
//     registry and the text writer refuse (and log) a sample of an
//     undeclared family, one with the wrong number of labels, and a
//     streamed family whose samples come apart; a family declared twice
//     fails the registry. The lab's TestEndToEndStatistics lints a live
//     scrape.
//
// # Decisions
//
//   - Custom collector with samples written at scrape time, not
//     prometheus.Counter objects: the counters live in the workers (summed
//     per batch), and a scrape reads them; keeping a second copy in
//     client_golang's counters would need a goroutine to copy them and
//     could only be staler.
//   - The text is written by this package, not through client_golang's
//     const metrics: at 1000 rules × 100 backends a scrape is 700 000
//     samples (1.1 million with health checks), and a const metric each
//     (label pairs, a dto.Metric, checked, sorted, then encoded) cost
//     ~8 µs and ~0.8 KB a sample, 5-6 s of CPU and +700 MiB of peak RSS
//     a scrape; written as collected they cost ~0.3 µs and nothing held
//     (bench/README.md §6). The text is client_golang's byte for
//     byte but for the order of a family's samples (client_golang sorts
//     them by label values, the text has them in rule and backend order,
//     which the format leaves free) and of the families (declaration
//     order, the Go and process families first). Protobuf (asked for by
//     a Prometheus with native histograms) stays client_golang's: the
//     same samples, at the old cost.
//   - Scopes are chosen by the scraper with a query parameter, as
//     HAProxy's exporter takes ?scope=, not by a configuration key: a
//     Prometheus scrape config sets it in params, so the operator who
//     does not want the per-backend series leaves them out where they
//     would be stored, and one Prometheus may scrape the backends every
//     minute and the rest every 15 s as two jobs; a key would make every
//     scraper of the appliance take the same choice and change with a
//     reload. No parameter is every scope, so the endpoint answers as it
//     did. An unknown scope name is 400 Bad Request naming the scopes (a
//     typo would otherwise drop series unseen); ?scope= asks for nothing.
//     The Go and process families are in the appliance scope.
//   - Gzip at BestSpeed (the scraper's Accept-Encoding decides): the full
//     text at 1000 × 100 is ~50 MB, whose label values repeat; BestSpeed
//     sends ~25 % more bytes than client_golang's default level at a
//     fraction of its CPU.
//   - A scrape holds no lock the control path needs while it works. The
//     daemon's collect function takes d.mu for a copy of the published
//     status, reads the workers' counters (atomics), asks each queue's
//     worker for its conntrack statistics and, for the backend scope, a
//     tally of its table (through its mailbox, as status does), and per
//     backend takes the health checker's lock and, for a rule of a
//     backend service, the probers' lock, each for one map lookup; the
//     BGP runtime's lock for a copy of its VIP decisions; the fleet node
//     answers from its own goroutine. Nothing is held while the text is
//     written: a reload and a CLI change complete beside a scrape whose
//     client stopped reading (the daemon's TestScrapeBesideReload).
//   - The registry is the package's own (NewRegistry), not the global
//     default one, so tests build as many as they like.
//   - A collect error (a sample with the wrong labels) does not fail the
//     scrape: the handler serves what it gathered and logs the error
//     (promhttp's ContinueOnError), as the hand-written writer did.
package metrics
