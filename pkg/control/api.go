package control

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// API is what the daemon offers through the control socket. NewHandler
// turns it into HTTP; package daemon implements it (pkg/daemon/control.go).
// A method returns an *Error to choose the status and message the client
// sees; any other error is a 500 with the error's text.
type API interface {
	Status(ctx context.Context, q StatusQuery) (*Status, error)
	// Backends answers the selection and page q selects (as Status does;
	// Summary is ignored) with the backends of the selected rules.
	Backends(ctx context.Context, q StatusQuery) (RuleStream, error)
	ChangeBackend(ctx context.Context, c BackendChange) (*BackendChangeResult, error)
	Reload(ctx context.Context, r ReloadRequest) (*ReloadResult, error)
	Conntrack(ctx context.Context, q ConntrackQuery) (*ConntrackResult, error)
	Lookup(ctx context.Context, q LookupQuery) (*LookupResult, error)
	ChangeAppliance(ctx context.Context, a ApplianceAction) (*ApplianceChangeResult, error) // appliance.go
}

// Error is the body of every reply whose status is not 200, and the error
// the Client returns for it.
type Error struct {
	Status  int      `json:"-"`
	Message string   `json:"error"`
	Issues  []string `json:"issues,omitempty"` // e.g. the file:line: key: message of a rejected reload
	// Warnings are a reloaded configuration's warnings (validate's), also
	// when the reload is rejected.
	Warnings []string `json:"warnings,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the HTTP status code.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Status: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is Errorf(400, …): the request names something that does not
// exist or asks for something impossible.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, format, args...)
}

// StatusQuery selects the rules GET /v1/status describes (its query
// parameters rule, vip, backend, offset, limit and summary). The zero
// query selects every rule.
type StatusQuery struct {
	Rule    string // the rule of this name
	VIP     string // the rules of this VIP
	Backend string // the rules with this backend; their tables show only its row
	// Offset and Limit page the selected rules, in configuration order
	// (Limit 0: no limit).
	Offset, Limit int
	// Summary asks for the counts over every rule and the selected rules
	// that need attention (Summary.Attention, paged as Rules would be),
	// with no per-rule tables.
	Summary bool
}

// Status is GET /v1/status.
type Status struct {
	Config    string    `json:"config"`
	Loaded    time.Time `json:"loaded"` // last publication of the data plane
	XDPMode   string    `json:"xdp_mode"`
	ZeroCopy  bool      `json:"zerocopy"`
	Queues    []int     `json:"queues"`
	Conntrack int       `json:"conntrack_entries"` // per-queue tables, as of the workers' last batch
	Counters  Counters  `json:"counters"`
	Rules     []Rule    `json:"rules"`
	// RulesSelected is how many rules the query selected; Rules holds
	// those from RulesOffset on, at most the query's limit.
	RulesSelected int            `json:"rules_selected"`
	RulesOffset   int            `json:"rules_offset,omitempty"`
	Summary       *StatusSummary `json:"summary,omitempty"`
	Stale         []string       `json:"stale_overrides,omitempty"` // state overlay entries that match nothing
	Events        []RuleEvent    `json:"events,omitempty"`          // recent tier switches, newest last
	Rates         RateInterval   `json:"rates"`
	Appliance     Appliance      `json:"appliance"` // appliance.go
	// QueueStats are the served queues' packets, in the order of Queues.
	QueueStats []QueueStat `json:"queue_stats"`
	// Warnings are conditions an operator should look at (a bound queue
	// that stays idle under load), one line each.
	Warnings []string `json:"warnings,omitempty"`
	// Arenas are the conntrack tables' memory (stats.go): each queue's
	// table, then the shared session and fragment tables.
	Arenas []ArenaStat `json:"arenas,omitempty"`
	// ShmemTHP is the kernel's shmem transparent huge page mode (the
	// bracketed word of /sys/kernel/mm/transparent_hugepage/shmem_enabled):
	// the arenas get 2 MiB pages only under advise, always, within_size or
	// force. "" without THP.
	ShmemTHP string `json:"shmem_thp,omitempty"`

	Build // stats.go: version, start, uptime

	// Stream, when set, yields the selected rules in place of Rules: the
	// handler writes each one as it comes (stream.go), so the answer is
	// never whole in the daemon's memory.
	Stream RuleStream `json:"-"`
}

// RuleStream calls emit with each rule of an answer, in order, and stops
// at the first error emit returns. The rule emit is given, and all it
// points to, is the stream's until emit returns: a stream may build the
// next rule in the same memory (Rule.Clone keeps a copy).
type RuleStream func(emit func(*Rule) error) error

// Collect drains Stream into Rules (for callers in the daemon's process).
func (st *Status) Collect() error {
	if st.Stream == nil {
		return nil
	}
	err := st.Stream(func(r *Rule) error {
		st.Rules = append(st.Rules, r.Clone())
		return nil
	})
	st.Stream = nil
	return err
}

// Clone is a copy of r that shares no memory with it.
func (r *Rule) Clone() Rule {
	c := *r
	c.Backends = slices.Clone(r.Backends)
	for i := range c.Backends {
		b := &c.Backends[i]
		for _, t := range []**time.Time{&b.DrainedAt, &b.DrainUntil, &b.LastCheck, &b.HealthSince} {
			if *t != nil {
				v := **t
				*t = &v
			}
		}
	}
	return c
}

// StatusSummary counts every rule and backend of the appliance, whatever
// the query selected.
type StatusSummary struct {
	Rules int            `json:"rules"`
	Tiers map[string]int `json:"tiers"` // rules per eligible tier
	Cold  int            `json:"cold"`  // rules whose first round of health checks is not published
	// Backends counts (rule, backend) pairs, a backend removed by a
	// reload and still draining included; Health splits them by verdict.
	Backends int            `json:"backends"`
	Health   map[string]int `json:"health"`
	Drained  int            `json:"drained"`  // drained by the operator or a reload
	Eligible int            `json:"eligible"` // in their rule's eligible set
	// Attention lists the selected rules that are not in their PRIMARY
	// tier, are cold, or have a backend that is not healthy; at most the
	// query's limit, from its offset; AttentionTotal counts them all.
	Attention      []RuleLine `json:"attention,omitempty"`
	AttentionTotal int        `json:"attention_total"`
}

// RuleLine is one rule in a line: what status's summary lists.
type RuleLine struct {
	Name      string `json:"name"`
	VIP       string `json:"vip"`
	Tier      string `json:"tier"`
	Reason    string `json:"reason"`
	Backends  int    `json:"backends"`
	Eligible  int    `json:"eligible"`
	Unhealthy int    `json:"unhealthy"` // backends whose verdict is not HEALTHY
	Warm      bool   `json:"first_checks_done"`
}

// QueueStat is one served queue's packet counters and receive rate (over
// the estimator's window, Status.Rates).
type QueueStat struct {
	Queue     int     `json:"queue"`
	RXPackets uint64  `json:"rx_packets"`
	TXPackets uint64  `json:"tx_packets"`
	RXPerSec  float64 `json:"rx_per_second"`

	QueueTraffic // stats.go: tx/s, drops, XSK statistics
}

// RateInterval says over which window the per-second figures were
// measured. The daemon samples its counters every WindowSeconds (2, as
// ipvsadm's estimator) and a rate is the difference of the two latest
// samples: Seconds is their measured distance, At the later one. Seconds
// is 0 (and every rate 0) until the first window has ended.
type RateInterval struct {
	Seconds       float64   `json:"seconds"`
	WindowSeconds float64   `json:"window_seconds"`
	At            time.Time `json:"at,omitzero"`
}

// Counters are appliance-wide packet counters summed over queues.
type Counters struct {
	RX        uint64            `json:"rx_packets"`
	TX        uint64            `json:"tx_packets"`
	Tracked   uint64            `json:"tracked_hits"`
	Drops     map[string]uint64 `json:"drops,omitempty"`  // by reason, non-zero only
	Passes    map[string]uint64 `json:"passes,omitempty"` // frames not ours, by reason, non-zero only
	RXPerSec  float64           `json:"rx_per_second"`
	KernelRXD uint64            `json:"kernel_rx_dropped"`
}

// Rule is one forwarding rule in Status.
type Rule struct {
	Name string `json:"name"`
	// Service is the backend service the rule names ("" when the rule
	// carries its own backends).
	Service   string    `json:"backend_service,omitempty"`
	VIP       string    `json:"vip"`
	Protocol  string    `json:"protocol"`
	Ports     string    `json:"ports"`
	Affinity  string    `json:"session_affinity"`
	Tracking  string    `json:"tracking_mode"`
	Policy    string    `json:"locality_lb_policy"`
	Encap     string    `json:"encap"`
	Tier      string    `json:"tier"`
	Reason    string    `json:"reason"`
	Eligible  int       `json:"eligible"`
	Slot      int       `json:"slot"`
	Backends  []Backend `json:"backends"`
	TableSize uint32    `json:"maglev_table_size"`
	// TableDigest hashes the seed, the rule's Maglev table(s) and eligible
	// set: equal on appliances that place new flows alike.
	TableDigest string `json:"table_digest"`
	// FirstChecksDone: every backend's first health verdict is in the
	// published snapshot (or the warm-up deadline passed).
	FirstChecksDone bool `json:"first_checks_done"`
	// SessionActiveSeconds is set on a rule whose tracked entries are
	// PER_SESSION sessions of the shared table (a CLIENT_IP or
	// CLIENT_IP_PROTO affinity): they see no FIN or RST, so its active
	// connections are the sessions that carried a packet within this
	// many seconds, its inactive ones those kept for affinity only.
	SessionActiveSeconds float64 `json:"session_active_seconds,omitempty"`

	RuleTraffic // stats.go: packets, bytes, connections and their rates
}

// RuleEvent is one event of Status.Events: an eligible-set event of a
// rule (tier switch, …), a backend's health change ("health"), a change
// through the CLI ("cli"), a reload ("reload"), a VIP announced or
// withdrawn ("bgp") or a BGP session's state change ("bgp-session").
type RuleEvent struct {
	Rule   string    `json:"rule,omitempty"`
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	From   string    `json:"from,omitempty"`
	To     string    `json:"to,omitempty"`
	Group  string    `json:"group,omitempty"`
	Reason string    `json:"reason,omitempty"`

	Backend string `json:"backend,omitempty"` // health, cli: the backend; bgp: the VIP; bgp-session: the peer
	By      string `json:"by,omitempty"`      // cli: who asked (uid and pid)

	// Service is the backend service of Rule when it names one (health,
	// cli); Rules are the rules that take a health verdict, every rule of
	// the service that has the backend, of which Rule is the one whose
	// probe decided (docs/design.md#backend-services).
	Service string   `json:"backend_service,omitempty"`
	Rules   []string `json:"rules,omitempty"`
}

// Backend is one backend of one rule, with every value's source.
type Backend struct {
	Rule        string `json:"rule"`
	Address     string `json:"address"`
	Group       string `json:"group"`
	Role        string `json:"role"`        // effective: primary | failover
	RoleSource  string `json:"role_source"` // config | cli
	Admin       string `json:"admin"`       // IN_SERVICE | DRAINED | REMOVED
	AdminSource string `json:"admin_source"`
	// DrainedAt is when a CLI drain started; DrainUntil is when the
	// backend's tracked connections stop being honoured (drain, removal
	// or failover departure).
	DrainedAt  *time.Time `json:"drained_at,omitempty"`
	DrainUntil *time.Time `json:"drain_until,omitempty"`
	// Health is exactly HEALTHY, UNHEALTHY or UNKNOWN: what the
	// eligible set was computed with (UNKNOWN also while the next hop is
	// unresolved), or the prober's verdict while the rule's first round is
	// held back; HealthDetail says why (the last probe error, the hold).
	Health       string `json:"health"`
	HealthDetail string `json:"health_detail,omitempty"`
	// WeightState is why the effective weight is what it is, on
	// WEIGHTED_MAGLEV rules only: OK, MISSING_WEIGHT, INVALID_WEIGHT or
	// UNAVAILABLE_WEIGHT (then the weight is 0).
	WeightState string `json:"weight_state,omitempty"`
	// WeightConfigured is the static or CLI weight (-1: none, the health
	// check reports it or weights are not used); WeightSource says which.
	WeightConfigured int    `json:"weight_configured"`
	WeightSource     string `json:"weight_source"`
	// WeightEffective is the weight in the Maglev table (0: not eligible).
	WeightEffective uint32  `json:"weight_effective"`
	Share           float64 `json:"share"` // of the rule's Maglev slots, 0..1
	Eligible        bool    `json:"eligible"`
	Tier            string  `json:"tier"` // the rule's tier
	Usable          bool    `json:"usable"`
	Slot            uint32  `json:"slot"` // rule-scoped backend slot
	// Connections counts the backend's tracked entries over every queue
	// that still decide (per-queue tables; PER_SESSION sessions of the
	// shared table are SessionEntries, and Active/InactiveConnections
	// count both: Rule.SessionActiveSeconds). -1: not counted.
	Connections    int `json:"connections"`
	SessionEntries int `json:"session_entries"`
	// Packets is the packets sent to the backend since start and
	// PacketsPerSec their rate; -1 when the workers do not count per
	// backend.
	Packets       int64   `json:"packets"`
	PacketsPerSec float64 `json:"packets_per_second"`
	NextHop       string  `json:"next_hop,omitempty"` // "" when resolved; the error otherwise

	Traffic   // stats.go: bytes, connections and their rates
	CheckInfo // stats.go: last check, probe latency, last health change
}

// BackendChange is POST /v1/backend/{mark,drain,undrain,weight,reset}.
type BackendChange struct {
	Action  BackendAction `json:"-"` // from the path
	Rule    string        `json:"rule"`
	Backend string        `json:"backend"`
	Role    string        `json:"role,omitempty"`   // mark: primary | failover
	Weight  *int          `json:"weight,omitempty"` // weight: 0..1000
}

// BackendAction is what a BackendChange does; its value is the last
// element of the request's path.
type BackendAction string

// Backend change actions.
const (
	ActionMark    BackendAction = "mark"
	ActionDrain   BackendAction = "drain"
	ActionUndrain BackendAction = "undrain"
	ActionWeight  BackendAction = "weight"
	ActionReset   BackendAction = "reset"
)

// BackendChangeResult acknowledges a change once it is saved in the state
// file and published.
type BackendChangeResult struct {
	Changed bool    `json:"changed"` // false: it was already so
	Message string  `json:"message"`
	Backend Backend `json:"backend"`
}

// ReloadRequest is POST /v1/reload's body. Force applies a configuration
// the guard rails refuse (no rules left, a rule left with drained backends
// only); it never applies one with errors.
type ReloadRequest struct {
	Force bool `json:"force,omitempty"`
}

// ReloadResult is POST /v1/reload when the configuration was accepted.
// A rejected one is an *Error (422) whose Issues are the file:line: key:
// messages.
type ReloadResult struct {
	Config   string   `json:"config"`
	Rules    int      `json:"rules"`
	Warnings []string `json:"warnings,omitempty"`
}

// ConntrackQuery selects entries for GET /v1/conntrack (list), GET
// /v1/conntrack/count and POST /v1/conntrack/flush.
type ConntrackQuery struct {
	Op      ConntrackOp `json:"-"` // from the path
	Rule    string      `json:"rule,omitempty"`
	Backend string      `json:"backend,omitempty"` // needs Rule
	Limit   int         `json:"limit,omitempty"`   // list: most entries returned (default 1000)
}

// ConntrackOp is what a ConntrackQuery does; the endpoint chooses it.
type ConntrackOp string

// Conntrack operations.
const (
	ConntrackList  ConntrackOp = "list"
	ConntrackCount ConntrackOp = "count"
	ConntrackFlush ConntrackOp = "flush"
)

// ConntrackResult answers a ConntrackQuery. Count is the matching entries
// (list, count) or the removed ones (flush), over every queue and the
// shared session table.
type ConntrackResult struct {
	Count   int            `json:"count"`
	Entries []ConntrackRow `json:"entries,omitempty"`
}

// ConntrackRow is one tracked flow.
type ConntrackRow struct {
	Queue       int    `json:"queue"` // -1: the shared PER_SESSION table
	Rule        string `json:"rule"`
	Key         string `json:"key"` // e.g. "TCP 198.51.100.7:40000 → 203.0.113.10:80" or a 2/3-tuple
	Backend     string `json:"backend"`
	Unconfirmed bool   `json:"unconfirmed,omitempty"`
	// Stale: the entry no longer decides (its backend was drained or
	// removed past the deadline, went unhealthy without persistence, or
	// the rule was flushed); the next packet re-selects.
	Stale     bool   `json:"stale,omitempty"`
	ExpiresIn string `json:"expires_in"`
}

// LookupQuery is GET /v1/lookup: where would this flow go? Rule is
// optional: it gives the defaults (VIP, protocol, first port); without it
// Dst is required. The answer names the rule the packet matches.
type LookupQuery struct {
	Rule    string `json:"rule,omitempty"`
	Src     string `json:"src"`                // client addr:port (or addr for port-less protocols)
	Dst     string `json:"dst,omitempty"`      // default: the rule's VIP
	Proto   string `json:"proto,omitempty"`    // TCP | UDP | ICMP | ESP | GRE | number; default: the rule's protocol (TCP for L3_DEFAULT)
	DstPort int    `json:"dst_port,omitempty"` // default: the rule's first port
	SYN     bool   `json:"syn,omitempty"`      // ask for a new connection's SYN instead of an established packet
}

// LookupResult explains the placement of one flow.
type LookupResult struct {
	Rule          string `json:"rule"`
	Service       string `json:"backend_service,omitempty"` // the rule's backend service, if it names one
	Flow          string `json:"flow"`
	SelectionKey  string `json:"selection_key"`
	SelectionHash string `json:"selection_hash"`
	TrackingKey   string `json:"tracking_key"` // "" when the flow is not tracked
	Trackable     bool   `json:"trackable"`
	SharedTable   bool   `json:"shared_table"` // PER_SESSION 2/3-tuple: looked up in the shared table
	NewConnection bool   `json:"new_connection"`
	// EntryFound: a tracked entry exists; EntryValid: it still decides.
	// EntryChecked is false when the tables were too large to search.
	EntryChecked bool   `json:"entry_checked"`
	EntryFound   bool   `json:"entry_found"`
	EntryValid   bool   `json:"entry_valid"`
	EntryBackend string `json:"entry_backend,omitempty"`
	// EntryFromPeer: the entry is a fleet peer's exception, a copy the peer
	// sent or a queue's entry made from one when the flow moved here
	// ([fleet]); EntryPeer names the peer whose copy this appliance holds.
	EntryFromPeer bool   `json:"entry_from_peer,omitempty"`
	EntryPeer     string `json:"entry_peer,omitempty"`
	Tier          string `json:"tier"`
	Eligible      int    `json:"eligible"`
	MaglevSlot    uint32 `json:"maglev_slot"`
	MaglevBackend string `json:"maglev_backend,omitempty"`
	Verdict       string `json:"verdict"` // TX | DROP | PASS (no rule: to the kernel)
	Backend       string `json:"backend,omitempty"`
	Why           string `json:"why"`
}
