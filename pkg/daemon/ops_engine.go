package daemon

import "github.com/xlbnet/xlb/pkg/dataplane"

// backendStats returns every worker's per-backend packet counters, or nil
// while the workers do not count per backend. Wiring (the lead's): a
// field `Backends dataplane.BackendStats` in dataplane.Worker, with
// `w.Backends.Count(dec.Rule, dec.Backend)` where a Tx decision's frame is
// handed to TX and `w.Backends.Flush()` next to `w.Counters.add` in
// Worker.Step; then this returns the queues' &q.worker.Backends.
func (e *Engine) backendStats() []*dataplane.BackendStats {
	return nil
}

// snapshotOrNil is Snapshot for an engine that may not have started.
func (e *Engine) snapshotOrNil() *dataplane.Snapshot {
	if e == nil {
		return nil
	}
	return e.Snapshot()
}
