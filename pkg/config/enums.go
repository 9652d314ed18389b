package config

import "strings"

// The enums below are config's own typed values for the operator's
// strings; the names are the exact strings accepted in the TOML files.
// config imports no runtime package: package daemon maps each value to
// the runtime value of the package that acts on it, in one table per enum
// (pkg/daemon/enums.go), so neither side's numeric order matters.

// Protocol is a rule's protocol.
type Protocol uint8

const (
	ProtocolTCP       Protocol = iota // TCP
	ProtocolUDP                       // UDP
	ProtocolL3Default                 // L3_DEFAULT: every IP protocol, all ports
)

var protocolNames = []string{"TCP", "UDP", "L3_DEFAULT"}

func (p Protocol) String() string { return enumString(protocolNames, p) }

// Affinity is a rule's session_affinity.
type Affinity uint8

const (
	AffinityNone              Affinity = iota // NONE (default)
	AffinityClientIPPortProto                 // CLIENT_IP_PORT_PROTO
	AffinityClientIPProto                     // CLIENT_IP_PROTO
	AffinityClientIP                          // CLIENT_IP
)

var affinityNames = []string{"NONE", "CLIENT_IP_PORT_PROTO", "CLIENT_IP_PROTO", "CLIENT_IP"}

func (a Affinity) String() string { return enumString(affinityNames, a) }

// TrackingMode is connection_tracking.tracking_mode.
type TrackingMode uint8

const (
	PerConnection TrackingMode = iota // PER_CONNECTION (default)
	PerSession                        // PER_SESSION
)

var trackingModeNames = []string{"PER_CONNECTION", "PER_SESSION"}

func (m TrackingMode) String() string { return enumString(trackingModeNames, m) }

// Persistence is connection_tracking.persistence_on_unhealthy.
type Persistence uint8

const (
	PersistDefaultForProtocol Persistence = iota // DEFAULT_FOR_PROTOCOL (default)
	PersistNever                                 // NEVER_PERSIST
	PersistAlways                                // ALWAYS_PERSIST
)

var persistenceNames = []string{"DEFAULT_FOR_PROTOCOL", "NEVER_PERSIST", "ALWAYS_PERSIST"}

func (p Persistence) String() string { return enumString(persistenceNames, p) }

// LBPolicy is locality_lb_policy.
type LBPolicy uint8

const (
	Maglev         LBPolicy = iota // MAGLEV (default): equal shares
	WeightedMaglev                 // WEIGHTED_MAGLEV: shares from health-check weights
)

var lbPolicyNames = []string{"MAGLEV", "WEIGHTED_MAGLEV"}

func (p LBPolicy) String() string { return enumString(lbPolicyNames, p) }

// HealthCheckType is health_check.type.
type HealthCheckType uint8

const (
	HealthHTTP  HealthCheckType = iota // HTTP
	HealthHTTPS                        // HTTPS
	HealthTCP                          // TCP: connect (request, response)
	HealthNone                         // NONE: every backend counts as healthy
	HealthSSL                          // SSL: TLS handshake (request, response)
	HealthHTTP2                        // HTTP2: HTTP/2 over TLS (ALPN h2) or, tls = false, h2c
	HealthGRPC                         // GRPC: grpc.health.v1 Check
	HealthUDP                          // UDP: request datagram, answer (response)
)

var healthCheckTypeNames = []string{"HTTP", "HTTPS", "TCP", "NONE", "SSL", "HTTP2", "GRPC", "UDP"}

func (t HealthCheckType) String() string { return enumString(healthCheckTypeNames, t) }

// HTTPFamily reports whether the check reads an HTTP response (and so can
// carry the weight header and match a body).
func (t HealthCheckType) HTTPFamily() bool {
	return t == HealthHTTP || t == HealthHTTPS || t == HealthHTTP2
}

// ProxyHeader is health_check.proxy_header.
type ProxyHeader uint8

const (
	ProxyNone ProxyHeader = iota // NONE (default)
	ProxyV1                      // PROXY_V1: a PROXY protocol v1 line before the probe
)

var proxyHeaderNames = []string{"NONE", "PROXY_V1"}

func (p ProxyHeader) String() string { return enumString(proxyHeaderNames, p) }

// ProbePath is how a health probe reaches a backend: health_check.path,
// and health_check_path in xlb.toml (the default of the rules that do not
// say; docs/design.md#data-path-probes).
type ProbePath uint8

const (
	// ProbeDirect: from the appliance's own stack to backend:port.
	ProbeDirect ProbePath = iota
	// ProbeDataPath: to the rule's VIP and the check's port, encapsulated
	// as the rule's traffic is; the answer returns by direct server return.
	ProbeDataPath
)

var probePathNames = []string{"DIRECT", "DATA_PATH"}

func (p ProbePath) String() string { return enumString(probePathNames, p) }

// EncapType is encap.type.
type EncapType uint8

const (
	EncapIPIP   EncapType = iota // IPIP (default): 4in4, 6in6, 4in6
	EncapGUE                     // GUE: UDP to gue_port + inner IP
	EncapGRE                     // GRE
	EncapDirect                  // DIRECT: L2 MAC rewrite, backend on-link
)

var encapTypeNames = []string{"IPIP", "GUE", "GRE", "DIRECT"}

func (t EncapType) String() string { return enumString(encapTypeNames, t) }

// Role is a group's (or, through the state overlay, a backend's) failover
// role.
type Role uint8

const (
	RolePrimary  Role = iota // primary (default)
	RoleFailover             // failover
)

var roleNames = []string{"primary", "failover"}

func (r Role) String() string { return enumString(roleNames, r) }

// ParseRole parses "primary" or "failover" (the CLI's --role).
func ParseRole(s string) (Role, bool) {
	r, ok := parseEnum[Role](roleNames, s)
	return r, ok
}

// ZonalMode is zonal_affinity.mode.
type ZonalMode uint8

const (
	ZonalDisabled       ZonalMode = iota // ZONAL_AFFINITY_DISABLED (default)
	ZonalSpillCrossZone                  // ZONAL_AFFINITY_SPILL_CROSS_ZONE
	ZonalStayWithinZone                  // ZONAL_AFFINITY_STAY_WITHIN_ZONE
)

var zonalModeNames = []string{"ZONAL_AFFINITY_DISABLED", "ZONAL_AFFINITY_SPILL_CROSS_ZONE", "ZONAL_AFFINITY_STAY_WITHIN_ZONE"}

func (m ZonalMode) String() string { return enumString(zonalModeNames, m) }

// XDPMode is xdp_mode.
type XDPMode uint8

const (
	XDPAuto    XDPMode = iota // auto (default): native, else generic
	XDPNative                 // native: driver mode, fail if unsupported
	XDPGeneric                // generic: skb mode
)

var xdpModeNames = []string{"auto", "native", "generic"}

func (m XDPMode) String() string { return enumString(xdpModeNames, m) }

// BindMode is bind_mode.
type BindMode uint8

const (
	BindAuto     BindMode = iota // auto (default): zero-copy, else copy
	BindZeroCopy                 // zerocopy: fail if unsupported
	BindCopy                     // copy
)

var bindModeNames = []string{"auto", "zerocopy", "copy"}

func (m BindMode) String() string { return enumString(bindModeNames, m) }

func enumString[E ~uint8](names []string, v E) string {
	if int(v) < len(names) {
		return names[v]
	}
	return "INVALID"
}

func parseEnum[E ~uint8](names []string, s string) (E, bool) {
	for k, n := range names {
		if n == s {
			return E(k), true
		}
	}
	return 0, false
}

// enumHint says what was wrong with s: a case mistake, or the allowed list.
func enumHint(names []string, s string) string {
	for _, n := range names {
		if strings.EqualFold(n, s) {
			return "is not allowed (write " + n + "; names are case-sensitive)"
		}
	}
	return "is not one of " + strings.Join(names, ", ")
}
