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
	BGP       *BGP       `json:"bgp,omitempty"` // nil without [bgp]
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
