// Package metrics exports xlb's metrics with
// github.com/prometheus/client_golang: a Collector over a fixed set of
// declared families whose samples a function writes at scrape time, a
// registry with the Go and process collectors beside it, and the HTTP
// handler and server. Nothing on the packet path knows about metrics: the
// collect function reads the workers' counters (atomics) when Prometheus
// scrapes.
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
//     sample counts and per what.
//  2. Emit its samples in the collect function of that file (collectQueues,
//     collectRules, collectBGP in package daemon) with Sink.Add, label
//     values in the family's label order.
//  3. Run the daemon's TestMetricsLint: it gathers a scrape and runs
//     client_golang's linter (promlint: the checks promtool check metrics
//     makes) over every family, so a bad name, type or unit fails it; the
//     (pedantic) registry rejects a sample of an undeclared family, one
//     with the wrong number of labels, and a family declared twice. The
//     lab's TestEndToEndStatistics lints a live scrape the same way.
//
// # Decisions
//
//   - Custom collector with const metrics, not prometheus.Counter objects:
//     the counters live in the workers (summed per batch), and a scrape
//     reads them; keeping a second copy in client_golang's counters would
//     need a goroutine to copy them and could only be staler.
//   - The registry is the package's own (NewRegistry), not the global
//     default one, so tests build as many as they like.
//   - A collect error (a sample with the wrong labels) does not fail the
//     scrape: promhttp serves what it gathered and logs the error
//     (ContinueOnError), as the hand-written writer did.
package metrics
