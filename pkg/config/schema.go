package config

import (
	"net/netip"
	"time"
)

// Config is one validated appliance configuration: xlb.toml plus every rule
// file. Load returns it only when nothing is wrong; it is immutable after
// Load (the daemon shares it between goroutines without copying).
type Config struct {
	Path string // the xlb.toml that was loaded, as given to Load
	Dir  string // its directory; relative paths in the file are relative to it

	Interface   string
	Queues      Queues
	XDPMode     XDPMode
	BindMode    BindMode
	HashSeed    uint64
	HashSeedSet bool // false: the public default seed is in use (Load warns)
	// MaglevTableSize is every rule's table size when set; 0 (the
	// default): each rule's follows the backends its file lists (the
	// daemon uses hash.TableSizeFor).
	MaglevTableSize int
	RulesDir        string // resolved against Dir
	// ServicesDir holds the backend service files (service.go), resolved
	// against Dir; the default one may be absent (no services).
	ServicesDir   string
	StateFile     string // resolved against Dir
	ControlSocket string // resolved against Dir
	// ControlSocketGroup may read through the control socket ("" = root
	// only); a name or a numeric id.
	ControlSocketGroup string
	MetricsListen      string // host:port; "" disables the metrics endpoint
	PinDir             string // where the XDP link and maps are pinned (restart.go)
	// WorkerNice is the nice value of the worker threads (-20..19); 0, the
	// default, shares each worker's CPU evenly with the kernel's work for
	// its queue (doc.go "Worker priority").
	WorkerNice int
	// BusyPoll is how long one busy-poll call of a worker may spin
	// (SO_BUSY_POLL); 0, the default, leaves busy polling off.
	// BusyPollBudget is the packets one such call may handle (default 64).
	// Both are read at start (docs/design.md#busy-polling).
	BusyPoll       time.Duration
	BusyPollBudget int
	Conntrack      Conntrack
	BGP            *BGP // [bgp] (bgp.go); nil when absent: nothing is announced
	// Fleet is [fleet] (fleet.go); nil when absent: no flow state is shared.
	Fleet *Fleet
	// UnmatchedVIPTraffic: packets to a VIP address on a port or protocol
	// no rule claims are dropped and counted (default) or passed to the
	// appliance's own stack (sources.go).
	UnmatchedVIPTraffic UnmatchedVIPTraffic

	// HealthCheckPath is the probe path of the rules whose [health_check]
	// names none. Unset (HealthCheckPathSet false) it is ProbeDirect, as
	// before data-path probes, and the daemon logs which rules probe that
	// way (docs/design.md#data-path-probes).
	HealthCheckPath    ProbePath
	HealthCheckPathSet bool

	// Rules are sorted by file name. A Loader's next Config shares the
	// *Rule of every file that did not change (read-only once loaded).
	Rules []*Rule
	// Services are the backend service files of ServicesDir, sorted by
	// name (service.go); a rule with inline backends is its own service
	// and is not listed here.
	Services []Service
}

// Queues is the queues key: "all", a count (queues 0..Count-1) or a list.
type Queues struct {
	All   bool
	Count int
	List  []int // sorted, unique
}

// Conntrack is the [conntrack] table.
type Conntrack struct {
	MaxEntries int // whole appliance, split evenly over the queues
	// Flood defences (restart.go): new entries admitted per second and
	// queue (0: no limit) with bursts of NewEntriesBurst, and how long a
	// new entry lives until its flow's next packet confirms it.
	NewEntriesPerSecond int
	NewEntriesBurst     int
	UnconfirmedIdle     time.Duration
}

// Rule is one forwarding rule (one file in rules_dir).
type Rule struct {
	File string // as shown in messages, e.g. "rules.d/web.toml"

	Name     string
	VIP      netip.Addr
	Protocol Protocol
	Ports    Ports
	// Service is the backend service the rule names (backend_service = "web"),
	// whose keys below are copied from its file (service.go); "" for a
	// rule that carries its own backends and is its own service, named
	// after it (ServiceName).
	Service string

	SessionAffinity           Affinity
	LocalityLBPolicy          LBPolicy
	ConnectionDrainingTimeout time.Duration
	FragmentTracking          bool
	AutoCapacityDrain         bool

	ConnectionTracking ConnectionTracking
	Failover           Failover
	HealthCheck        HealthCheck
	Encap              Encap
	ZonalAffinity      ZonalAffinity
	// SourceRanges are the client prefixes the rule admits (sources.go);
	// empty admits every source.
	SourceRanges []netip.Prefix

	Groups []Group // in file order

	// src is the parse this rule came from, when a Loader made it
	// (SameSource); rules of one parse share their slices, so a Rule is
	// read-only once loaded. svc is the parse of the service it names,
	// when a Loader made it.
	src *parsedRule
	svc *parsedService
}

// Ports is a rule's port set: All, or a list of inclusive ranges.
type Ports struct {
	All    bool
	Ranges []PortRange // sorted, non-overlapping
}

// PortRange is an inclusive range; First == Last for a single port.
type PortRange struct{ First, Last uint16 }

// Contains reports whether port p is in the set.
func (ps Ports) Contains(p uint16) bool {
	if ps.All {
		return true
	}
	for _, r := range ps.Ranges {
		if p >= r.First && p <= r.Last {
			return true
		}
	}
	return false
}

// ConnectionTracking is the [connection_tracking] table.
type ConnectionTracking struct {
	TrackingMode           TrackingMode
	PersistenceOnUnhealthy Persistence
	IdleTimeout            time.Duration
}

// Failover is the [failover] table.
type Failover struct {
	Ratio                     float64
	DropTrafficIfUnhealthy    bool
	ConnectionDrainOnFailover bool
	FailoverDrainTimeout      time.Duration
	FailbackDelay             time.Duration
}

// HealthCheck is the [health_check] table.
type HealthCheck struct {
	Type               HealthCheckType
	Port               uint16
	TLS                bool        // HTTP2 (default true; false = h2c) and GRPC (default false)
	RequestPath        string      // HTTP, HTTPS, HTTP2
	Host               string      // HTTP Host (:authority) / TLS SNI; "" = the backend's address
	Request            string      // TCP, SSL, UDP: bytes sent once connected (request or request_hex)
	Response           string      // TCP, SSL, UDP: the answer's first bytes; HTTP kinds: text in the body's first 1024 bytes
	ProxyHeader        ProxyHeader // TCP-based types: PROXY_V1 sends a PROXY protocol v1 line first
	GRPCServiceName    string      // GRPC: the service asked about; "" = the whole server
	Path               ProbePath   // DATA_PATH: to the VIP through the rule's encapsulation; DIRECT: to backend:port
	Interval           time.Duration
	Timeout            time.Duration
	HealthyThreshold   int
	UnhealthyThreshold int
}

// Encap is the [encap] table.
type Encap struct {
	Type    EncapType
	GUEPort uint16
}

// ZonalAffinity is the [zonal_affinity] table.
type ZonalAffinity struct {
	Mode           ZonalMode
	SpilloverRatio float64
	Clients        []ClientZone // sorted by prefix; longest prefix wins at run time
}

// ClientZone maps clients whose source address is in Prefix to Zone.
type ClientZone struct {
	Prefix netip.Prefix
	Zone   string
}

// Group is one [[group]] element.
type Group struct {
	Name           string
	Role           Role
	Zone           string
	CapacityScaler float64
	Preferred      bool
	Backends       []Backend
}

// Backend is one backend address with an optional static weight.
type Backend struct {
	Addr      netip.Addr
	Weight    uint16 // static weight 0..MaxWeight, when HasWeight
	HasWeight bool
}

// Limits and defaults. The defaults follow docs/design.md#configuration
// and, where the design is silent, GCP's documented defaults.
const (
	DefaultHashSeed     = 0x5eed
	MaxMaglevTableSize  = 1 << 24 // a table per rule and zone view: bound the memory
	MaglevBackendFactor = 100     // table size ≥ 100 × backends keeps shares within ~1 %
	DefaultMaxEntries   = 1 << 20
	MinMaxEntries       = 1024
	MaxMaxEntries       = 1 << 30
	MaxQueues           = 1024

	// Busy polling's limits: ring.BusyPoll checks the same ones.
	MaxBusyPoll           = time.Millisecond
	DefaultBusyPollBudget = 64
	MaxBusyPollBudget     = 1024

	DefaultIdleTimeout          = 60 * time.Second
	MinIdleTimeout              = time.Second
	MaxIdleTimeout              = 24 * time.Hour
	DefaultFailoverDrainTimeout = 10 * time.Minute
	MaxFailoverDrainTimeout     = time.Hour
	MaxFailbackDelay            = time.Hour
	MaxDrainingTimeout          = 3600 * time.Second

	DefaultInterval    = 5 * time.Second
	DefaultTimeout     = 5 * time.Second
	MinProbeTime       = time.Second
	MaxProbeTime       = 300 * time.Second
	DefaultThreshold   = 2
	MaxThreshold       = 10
	DefaultRequestPath = "/"
	MaxProbePayload    = 1024 // bytes of health_check request and response, as Google's checks

	DefaultGUEPort   = 6080
	MaxWeight        = 1000 // as the weight header (X-Load-Balancing-Endpoint-Weight)
	MaxGroupsPerRole = 50

	DefaultRulesDir      = "rules.d"
	DefaultServicesDir   = "services.d"
	DefaultStateFile     = "/var/lib/xlb/state.toml"
	DefaultControlSocket = "/run/xlb/xlb.sock"
	DefaultMetricsListen = "127.0.0.1:9641"
)

// Default returns the appliance settings used for every key xlb.toml leaves
// out. Interface has no default (it is required).
func Default() Config {
	return Config{
		Queues:         Queues{All: true},
		XDPMode:        XDPAuto,
		BindMode:       BindAuto,
		HashSeed:       DefaultHashSeed,
		RulesDir:       DefaultRulesDir,
		ServicesDir:    DefaultServicesDir,
		StateFile:      DefaultStateFile,
		ControlSocket:  DefaultControlSocket,
		MetricsListen:  DefaultMetricsListen,
		PinDir:         DefaultPinDir,
		BusyPollBudget: DefaultBusyPollBudget,
		Conntrack:      Conntrack{MaxEntries: DefaultMaxEntries, NewEntriesPerSecond: DefaultNewEntriesPerSecond, NewEntriesBurst: DefaultNewEntriesPerSecond / 4, UnconfirmedIdle: DefaultUnconfirmedIdle},
	}
}

// DefaultRule returns the values of every optional rule key: its
// service's defaults (DefaultService) and protocol TCP. Name, VIP, ports,
// the health check type and the groups have no default.
func DefaultRule() Rule {
	r := Rule{Protocol: ProtocolTCP}
	s := DefaultService()
	r.useService(&s, nil)
	return r
}

// DefaultGroup returns the values of a [[group]]'s optional keys.
func DefaultGroup() Group {
	return Group{Role: RolePrimary, CapacityScaler: 1.0}
}

// Backends returns every backend of the rule with its group, in file order.
func (r *Rule) Backends() []GroupBackend {
	var out []GroupBackend
	for gi := range r.Groups {
		for bi := range r.Groups[gi].Backends {
			out = append(out, GroupBackend{Group: &r.Groups[gi], Backend: r.Groups[gi].Backends[bi]})
		}
	}
	return out
}

// BackendCount is len(r.Backends()) without building the list.
func (r *Rule) BackendCount() int {
	n := 0
	for gi := range r.Groups {
		n += len(r.Groups[gi].Backends)
	}
	return n
}

// GroupBackend is a backend with the group it belongs to.
type GroupBackend struct {
	Group *Group
	Backend
}

// Rule returns the rule with the given name, or nil.
func (c *Config) Rule(name string) *Rule {
	for _, r := range c.Rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}
