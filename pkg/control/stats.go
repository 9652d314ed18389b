package control

import "time"

// The statistics operators look at first (docs/design.md#observability),
// kept apart from the
// shapes they are part of: every rate is over the daemon's estimator
// window (Status.Rates), every total since the daemon started.

// Build says which xlb is running and since when.
type Build struct {
	Version       string    `json:"version"`        // module version and VCS revision, as xlb --version prints
	Started       time.Time `json:"started"`        // when this daemon process started
	UptimeSeconds float64   `json:"uptime_seconds"` // since Started
}

// Traffic is what a rule or backend carried besides packets.
type Traffic struct {
	Bytes       int64   `json:"bytes"` // IP bytes as received, before encapsulation
	BytesPerSec float64 `json:"bytes_per_second"`
	// NewConnections counts tracked flows placed by the Maglev table (a
	// SYN, a first packet, a re-selection); untracked traffic opens none.
	NewConnections       int64   `json:"new_connections"`
	NewConnectionsPerSec float64 `json:"new_connections_per_second"`
	// Active connections are tracked entries that still decide and have
	// seen neither FIN nor RST; inactive ones saw one (or are a SYN not
	// yet answered), as IPVS's ActiveConn and InActConn. A rule tracked
	// in the shared session table counts its sessions instead, active by
	// their last packet (Rule.SessionActiveSeconds). -1: not counted.
	ActiveConnections   int `json:"active_connections"`
	InactiveConnections int `json:"inactive_connections"`
}

// RuleTraffic is a rule's traffic: the sum over its backends of what was
// sent to them.
type RuleTraffic struct {
	Packets       int64   `json:"packets"`
	PacketsPerSec float64 `json:"packets_per_second"`
	Traffic
}

// CheckInfo is a backend's health-check history.
type CheckInfo struct {
	LastCheck           *time.Time `json:"last_check,omitempty"`   // when the last probe ended
	ProbeLatencySeconds float64    `json:"probe_latency_seconds"`  // how long it took
	HealthSince         *time.Time `json:"health_since,omitempty"` // when the health last changed
	HealthChanges       uint64     `json:"health_changes"`         // changes since the check started: flaps
	// ProbeRule is the rule whose probe decides the backend's health when
	// the rule names a backend service (one probe per backend of a
	// service), or when another rule with its own backends and an equal
	// direct check probes the backend for both; "" when the rule's own
	// probe decides and it names no service.
	ProbeRule string `json:"probe_rule,omitempty"`
}

// QueueTraffic is one queue's load beyond its RX count.
type QueueTraffic struct {
	TXPerSec    float64 `json:"tx_per_second"`
	Drops       uint64  `json:"drops"`  // packets dropped, every reason
	Passes      uint64  `json:"passes"` // packets passed (not ours)
	DropsPerSec float64 `json:"drops_per_second"`
	XSK         XSK     `json:"xsk"`
}

// XSK is the kernel's XDP_STATISTICS of a queue's AF_XDP socket.
type XSK struct {
	RXDropped       uint64 `json:"rx_dropped"`
	RXInvalidDescs  uint64 `json:"rx_invalid_descs"`
	TXInvalidDescs  uint64 `json:"tx_invalid_descs"`
	RXRingFull      uint64 `json:"rx_ring_full"`
	RXFillRingEmpty uint64 `json:"rx_fill_ring_empty"`
	TXRingEmpty     uint64 `json:"tx_ring_empty"`
}

// AddBackend counts a backend's traffic into its rule's (Backend rows with
// unknown figures, -1, leave the rule's unknown too).
func (r *Rule) AddBackend(b *Backend) {
	if b.Packets >= 0 {
		r.Packets += b.Packets
		r.PacketsPerSec += b.PacketsPerSec
		r.Bytes += b.Bytes
		r.BytesPerSec += b.BytesPerSec
		r.NewConnections += b.NewConnections
		r.NewConnectionsPerSec += b.NewConnectionsPerSec
	}
	if b.ActiveConnections < 0 || r.ActiveConnections < 0 {
		r.ActiveConnections, r.InactiveConnections = -1, -1
		return
	}
	r.ActiveConnections += b.ActiveConnections
	r.InactiveConnections += b.InactiveConnections
}

// ArenaStat is one conntrack table's arena: its size and how much of it
// 2 MiB pages map (from /proc/self/smaps, read at most every few seconds:
// the figures may be that old).
type ArenaStat struct {
	Table     string `json:"table"` // queue-N, sessions or fragments
	Queue     int    `json:"queue"` // -1: a shared table
	Bytes     int64  `json:"bytes"`
	HugeBytes int64  `json:"huge_page_bytes"` // -1: smaps could not be read (Status.Warnings says why)
}
