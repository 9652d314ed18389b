// Package daemon runs the appliance: the data plane (Engine) and the
// control plane that feeds it.
//
// # Goroutines
//
//   - One worker per served queue (Engine), locked to its OS thread and
//     pinned to CPU queue mod NumCPU: RX batch → parse → decide → encap →
//     TX on the queue's AF_XDP socket. Workers read the published snapshot
//     once per batch and never wait for anything else.
//   - The control goroutine (Run) owns every piece of control-plane state:
//     the configuration, the CLI overlay, each rule's failover.State, the
//     health verdicts, the next hops and the slot registry. Everything that
//     changes them runs on it: signals, health changes, timers, and
//     requests from other goroutines (do).
//   - Health probers (pkg/health) run on their own goroutines and park
//     their changes for the control goroutine.
//
// # From configuration to packets
//
//	config.Load + state overlay ──▶ config.View (effective backends, with sources)
//	health verdicts, next hops  ──▶ failover.Compute per rule (prev State kept)
//	failover.State              ──▶ dataplane.BuildRule (Maglev, generations, deadlines)
//	neigh next hop per backend  ──▶ encap.Template per backend
//	rules                       ──▶ dataplane.NewSnapshot ──▶ Engine.Publish
//	                                 (atomic snapshot swap + XDP VIP set)
//
// A new snapshot is published at start, on every health or weight change
// (at most every 250 ms, so an oscillating weight header cannot rebuild
// tables per probe), when a next hop changes (resolved every 5 s), when a
// rule's timers are due (failback delay, undrain hold, drain deadlines:
// failover.State.NextCompute), on reload, and on every CLI change.
//
// # Decisions where the design is silent
//
//   - Slots: rule slots (by rule name) and backend slots (by rule and
//     address) are handed out once per process and never reused, so a
//     conntrack entry can never name another rule or backend than its own.
//   - A backend whose next hop (MAC) is unresolved counts as UNKNOWN health
//     for the eligible-set engine: it cannot receive anything, and its
//     flows fall under the persistence rules like those of any backend
//     that stopped answering. It is logged when that changes.
//   - Role overrides from the CLI are per backend while failover groups
//     carry roles: a backend marked with another role than its group's is
//     placed in a group of its own, "<group>~<ROLE>", with the group's zone,
//     capacity scaler and preference.
//   - Backends removed by a reload stay in the rule's failover input as
//     removed (entries honoured for connection_draining_timeout) and are
//     forgotten once their drain deadline plus the idle timeout has passed.
//   - Reload refuses to change the interface or the queues (restart
//     instead); any configuration error rejects the whole reload and the
//     running configuration keeps serving.
//   - The outer source address is the kernel's preferred source towards
//     the backend, else the interface's first global address of the family.
//   - Health checks of type NONE make every backend healthy; other checks
//     start UNKNOWN (not healthy) until the first verdict, as GCP does.
package daemon
