package control

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Appliance is the appliance-wide part of Status: its drain (the state
// overlay) and, with [bgp], its announcements to the routers.
type Appliance struct {
	Drained   bool       `json:"drained"`
	DrainedAt *time.Time `json:"drained_at,omitempty"`
	BGP       *BGP       `json:"bgp,omitempty"`   // nil without [bgp]
	Fleet     *Fleet     `json:"fleet,omitempty"` // nil without [fleet]
}

// Fleet is the state of flow-state sharing with the fleet's other
// appliances ([fleet], pkg/fleet).
type Fleet struct {
	Address string `json:"address"` // this appliance's fleet address and port
	// Joined: the appliance has its peers' exceptions (or the join timed
	// out); its VIPs wait for it. JoinSeconds is the last join's duration
	// (the current one's so far while joining).
	Joined       bool     `json:"joined"`
	JoinSeconds  float64  `json:"join_seconds"`
	JoinTimedOut bool     `json:"join_timed_out"`
	JoinTimeouts uint64   `json:"join_timeouts"`
	JoinPending  []string `json:"join_pending,omitempty"` // peers not answered (joining, or when it timed out)
	// Owned exceptions this appliance sends; Queued records waiting for the
	// send rate; Held exceptions held from peers, in a table of Capacity.
	Owned    int `json:"exceptions_owned"`
	Queued   int `json:"records_queued"`
	Held     int `json:"exceptions_held"`
	Capacity int `json:"capacity"`
	// Stored is the peer table's live entries as of its last presence
	// rebuild (start, then every 30 s).
	Stored int `json:"table_entries"`
	// PresenceFill is the share of the peer table's presence filter set:
	// the chance that a worker's miss reads the table.
	PresenceFill float64 `json:"presence_fill"`
	PeerHits     uint64  `json:"peer_hits"`    // packets placed by an entry a peer sent
	HandoffFull  uint64  `json:"handoff_full"` // a worker's ring to the node was full (the scan waited)
	Backlog      uint64  `json:"backlog_drops"`
	// Drops are datagrams from no configured peer, by reason.
	Drops map[string]uint64 `json:"drops,omitempty"`
	Peers []FleetPeer       `json:"peers"`
	Error string            `json:"error,omitempty"` // the node did not answer
}

// FleetPeer is one other appliance as this one sees it.
type FleetPeer struct {
	Address string `json:"address"`
	// State: silent (nothing heard for three heartbeats, or never),
	// unverified (heard, its epoch not proven yet), syncing (a join waits
	// for its exceptions), synced.
	State      string     `json:"state"`
	LagSeconds float64    `json:"lag_seconds"` // since its last datagram; -1: never
	LastHeard  *time.Time `json:"last_heard,omitempty"`
	Owned      uint32     `json:"exceptions_owned"` // what it says it owns
	Held       int        `json:"exceptions_held"`  // held from it

	RecordsSent       uint64            `json:"records_sent"`
	RecordsReceived   uint64            `json:"records_received"`
	DatagramsSent     uint64            `json:"datagrams_sent"`
	DatagramsReceived uint64            `json:"datagrams_received"`
	BytesSent         uint64            `json:"bytes_sent"`
	BytesReceived     uint64            `json:"bytes_received"`
	SendErrors        uint64            `json:"send_errors"`
	Drops             map[string]uint64 `json:"drops,omitempty"` // by reason
}

// BGP is the speaker's state.
type BGP struct {
	LocalAS          uint32            `json:"local_as"`
	RouterID         string            `json:"router_id"`
	HoldTimeSeconds  int               `json:"hold_time_seconds"`
	WithdrawDelaySec float64           `json:"withdraw_delay_seconds"`
	Peers            []BGPPeer         `json:"peers"`
	VIPs             []VIPAnnouncement `json:"vips"`
}

// BGPPeer is one router session.
type BGPPeer struct {
	Address     string     `json:"address"`
	PeerAS      uint32     `json:"peer_as"`
	State       string     `json:"state"` // idle, connect, active, opensent, openconfirm, established
	Since       *time.Time `json:"since,omitempty"`
	Announced   []string   `json:"announced"` // prefixes sent on this session
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	BFD         string     `json:"bfd,omitempty"` // down, init, up, admin_down; absent without BFD
}

// VIPAnnouncement is the announce decision for one VIP and its reason.
type VIPAnnouncement struct {
	VIP       string    `json:"vip"`
	Announced bool      `json:"announced"`
	Reason    string    `json:"reason"`
	Since     time.Time `json:"since"`
}

// ApplianceAction is POST /v1/appliance/{drain,undrain}.
type ApplianceAction string

// Appliance actions.
const (
	ApplianceDrain   ApplianceAction = "drain"
	ApplianceUndrain ApplianceAction = "undrain"
)

// ApplianceChangeResult acknowledges a drain or undrain once it is saved in
// the state file and the announcements follow it.
type ApplianceChangeResult struct {
	Changed   bool      `json:"changed"` // false: it was already so
	Message   string    `json:"message"`
	Appliance Appliance `json:"appliance"`
}

func handleAppliance(mux *http.ServeMux, api API) {
	mux.HandleFunc("POST /v1/appliance/{action}", func(w http.ResponseWriter, r *http.Request) {
		if err := decodeBody(r, &struct{}{}); err != nil {
			writeError(w, err)
			return
		}
		a := ApplianceAction(r.PathValue("action"))
		if a != ApplianceDrain && a != ApplianceUndrain {
			writeError(w, Errorf(http.StatusNotFound, "unknown appliance action %q (drain, undrain)", a))
			return
		}
		reply(w)(api.ChangeAppliance(r.Context(), a))
	})
}

// ChangeAppliance drains or undrains the appliance (withdraws every VIP
// from the routers, or lets them be announced again); it returns once the
// change is saved and the announcements follow it.
func (c *Client) ChangeAppliance(ctx context.Context, a ApplianceAction) (*ApplianceChangeResult, error) {
	var r ApplianceChangeResult
	return &r, c.call(ctx, http.MethodPost, "/v1/appliance/"+url.PathEscape(string(a)), nil, struct{}{}, &r)
}
