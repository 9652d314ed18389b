package daemon

import "github.com/xlbnet/xlb/pkg/dataplane"

// backendStats returns every worker's per-backend packet counters.
func (e *Engine) backendStats() []*dataplane.BackendStats {
	var out []*dataplane.BackendStats
	for _, q := range e.Stats() {
		if q.Backends != nil {
			out = append(out, q.Backends)
		}
	}
	return out
}

// snapshotOrNil is Snapshot for an engine that may not have started.
func (e *Engine) snapshotOrNil() *dataplane.Snapshot {
	if e == nil {
		return nil
	}
	return e.Snapshot()
}
