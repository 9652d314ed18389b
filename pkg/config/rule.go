package config

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

func validName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '_' && c != '.') {
			return false
		}
	}
	return true
}

// parseAddr parses a VIP or backend address: no zone, not unspecified or
// multicast; an IPv4-mapped IPv6 address is taken as IPv4.
func parseAddr(s string) (netip.Addr, string) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, "is not an IPv4 or IPv6 address"
	}
	if a.Zone() != "" {
		return netip.Addr{}, "must not carry a zone"
	}
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return netip.Addr{}, "is the unspecified address"
	case a.IsMulticast():
		return netip.Addr{}, "is a multicast address"
	case a == limitedBroadcast:
		return netip.Addr{}, "is the broadcast address"
	}
	return a, ""
}

var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

func readRule(t *table, stem string) *ruleSrc {
	rs := &ruleSrc{rule: DefaultRule(), f: t.f}
	r := &rs.rule

	r.Name = stem
	if t.str("name", &r.Name) || !t.has("name") {
		if !validName(r.Name) {
			t.errorf("name", "%q is not a valid rule name (letters, digits, '-', '_', '.'; at most 63; starts with a letter or digit)", r.Name)
		}
	}

	var vip string
	if t.str("vip", &vip) {
		a, why := parseAddr(vip)
		if why == "" && a.IsLoopback() {
			why = "is a loopback address: a VIP is reached over the network"
		}
		if why != "" {
			t.errorf("vip", "%q %s", vip, why)
		} else {
			r.VIP, rs.vipOK = a, true
		}
	} else if !t.has("vip") {
		t.errorf("vip", "missing (the forwarding rule's address)")
	}

	protoOK := enum(t, "protocol", protocolNames, &r.Protocol) || !t.has("protocol")
	rs.portsOK = readPorts(t, r) && protoOK
	rs.rangesSet = t.has("source_ranges")

	if t.str("backend_service", &r.Service) && !validName(r.Service) {
		t.errorf("backend_service", "%q is not a valid backend service name (letters, digits, '-', '_', '.'; at most 63; starts with a letter or digit)", r.Service)
	}
	if t.has("backend_service") {
		// The backend service's file holds its keys (service.go).
		if r.Service == "" {
			r.Service = "-" // written with the wrong type: never resolved
		}
		refuseServiceKeys(t, r.Service)
		readSourceRanges(t, r.VIP, &r.SourceRanges)
		t.done()
		return rs
	}

	s := &svcSrc{svc: DefaultService(), f: t.f, inline: true}
	s.svc.Name = r.Name
	readServiceKeys(t, s)
	rs.probePathSet = s.probePathSet
	r.useService(&s.svc, s.svc.Groups)
	readSourceRanges(t, r.VIP, &r.SourceRanges)
	t.done()
	if s.groupsOK {
		checkFamilies(rs, s, r.Groups, nil)
	}
	if rs.portsOK {
		checkFragments(rs, s)
	}
	return rs
}

// readServiceKeys reads the keys of a backend service from t: those of a
// service file, or of a rule file with its own backends. It checks what
// lies within the service (weights and checks, groups, zones); what needs
// a rule's VIP and protocol is checked per rule (checkFamilies,
// checkFragments).
func readServiceKeys(t *table, s *svcSrc) {
	r := &s.svc
	enum(t, "session_affinity", affinityNames, &r.SessionAffinity)
	enum(t, "locality_lb_policy", lbPolicyNames, &r.LocalityLBPolicy)
	t.duration("connection_draining_timeout", 0, MaxDrainingTimeout, &r.ConnectionDrainingTimeout)
	t.boolean("fragment_tracking", &r.FragmentTracking)
	t.boolean("auto_capacity_drain", &r.AutoCapacityDrain)

	ct := t.sub("connection_tracking")
	modeOK := enum(ct, "tracking_mode", trackingModeNames, &r.ConnectionTracking.TrackingMode)
	persistOK := enum(ct, "persistence_on_unhealthy", persistenceNames, &r.ConnectionTracking.PersistenceOnUnhealthy)
	ct.duration("idle_timeout", MinIdleTimeout, MaxIdleTimeout, &r.ConnectionTracking.IdleTimeout)
	ct.done()
	if persistOK && (modeOK || !ct.has("tracking_mode")) &&
		r.ConnectionTracking.PersistenceOnUnhealthy == PersistAlways && r.ConnectionTracking.TrackingMode == PerSession {
		ct.errorf("persistence_on_unhealthy", "ALWAYS_PERSIST is invalid with tracking_mode = PER_SESSION (use DEFAULT_FOR_PROTOCOL or NEVER_PERSIST, or PER_CONNECTION)")
	}

	fo := t.sub("failover")
	fo.ratio("ratio", &r.Failover.Ratio)
	fo.boolean("drop_traffic_if_unhealthy", &r.Failover.DropTrafficIfUnhealthy)
	fo.boolean("connection_drain_on_failover", &r.Failover.ConnectionDrainOnFailover)
	fo.duration("failover_drain_timeout", 0, MaxFailoverDrainTimeout, &r.Failover.FailoverDrainTimeout)
	fo.duration("failback_delay", 0, MaxFailbackDelay, &r.Failover.FailbackDelay)
	fo.rejected("failover_health_threshold", whyNoHealthThreshold)
	fo.done()

	hct := t.sub("health_check")
	s.probePathSet = hct.has("path")
	hcOK := readHealthCheck(hct, &r.HealthCheck)

	en := t.sub("encap")
	enum(en, "type", encapTypeNames, &r.Encap.Type)
	en.port("gue_port", &r.Encap.GUEPort)
	en.done()

	readZonal(t.sub("zonal_affinity"), &r.ZonalAffinity)
	s.groupsOK = readGroups(t, s)

	// Checks between keys of one service.
	if r.LocalityLBPolicy == WeightedMaglev && hcOK && !r.HealthCheck.Type.HTTPFamily() {
		t.errorf("locality_lb_policy", "WEIGHTED_MAGLEV needs an HTTP, HTTPS or HTTP2 health check (weights come from its X-Load-Balancing-Endpoint-Weight header); health_check.type is %s", r.HealthCheck.Type)
	}
	if s.groupsOK {
		checkGroups(t, s, fo.present && len(fo.m) > 0)
		checkZones(t, r)
	}
}

// whyNoHealthThreshold is the answer to Cloud Service Mesh's
// failoverHealthThreshold (seed 001), in [failover] or a [[group]]: the
// rule-wide ratio covers "fail over when too few primaries are healthy",
// and a per-group partial shift would mix primary and failover backends in
// one eligible set, which draining on failover cannot describe (doc.go).
const whyNoHealthThreshold = "xlb fails over with failover.ratio, the share of usable primaries of the whole rule (a threshold of 70 % is ratio = 0.7); a per-group partial shift to failover backends would mix primary and failover backends in one eligible set, where a switch between them, and so draining on failover, is no longer defined"

// readPorts reads ports; it reports whether r.Ports is valid.
func readPorts(t *table, r *Rule) bool {
	v, ok := t.get("ports")
	if !ok {
		if r.Protocol == ProtocolL3Default {
			r.Ports = Ports{All: true}
			return true
		}
		t.errorf("ports", "missing (a list like [\"80\", \"8000-8099\"], or \"ALL\")")
		return false
	}
	if s, ok := v.(string); ok {
		if s != "ALL" {
			t.errorf("ports", "%q: write \"ALL\" or a list like [%q]", s, s)
			return false
		}
		r.Ports = Ports{All: true}
		return true
	}
	if r.Protocol == ProtocolL3Default {
		t.errorf("ports", "an L3_DEFAULT rule matches every port: write ports = \"ALL\" or leave ports out")
		return false
	}
	list, ok := v.([]any)
	if !ok {
		t.wrongType("ports", "a list of ports or \"ALL\"", v)
		return false
	}
	if len(list) == 0 {
		t.errorf("ports", "the list is empty")
		return false
	}
	good := true
	var ranges []PortRange
	var where []int
	for i, e := range list {
		key := joinIndex(t.key("ports"), i)
		pr, msg := parsePortRange(e)
		if msg != "" {
			t.f.errorf(key, "%s", msg)
			good = false
			continue
		}
		for k, o := range ranges {
			if pr.First <= o.Last && o.First <= pr.Last {
				t.f.errorf(key, "%s overlaps ports[%d] (%s)", pr, where[k], o)
				good = false
			}
		}
		ranges = append(ranges, pr)
		where = append(where, i)
	}
	if !good {
		return false
	}
	slices.SortFunc(ranges, func(a, b PortRange) int { return int(a.First) - int(b.First) })
	r.Ports = Ports{Ranges: ranges}
	return true
}

func (p PortRange) String() string {
	if p.First == p.Last {
		return strconv.Itoa(int(p.First))
	}
	return strconv.Itoa(int(p.First)) + "-" + strconv.Itoa(int(p.Last))
}

func (ps Ports) String() string {
	if ps.All {
		return "ALL"
	}
	s := make([]string, len(ps.Ranges))
	for i, r := range ps.Ranges {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

func parsePortRange(e any) (PortRange, string) {
	var s string
	switch x := e.(type) {
	case string:
		s = x
	case int64:
		s = strconv.FormatInt(x, 10)
	default:
		return PortRange{}, "want a port string like \"80\" or \"8000-8099\", got " + typeName(e)
	}
	if s == "ALL" {
		return PortRange{}, "\"ALL\" cannot be part of a list: write ports = \"ALL\""
	}
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	a, errA := strconv.ParseUint(strings.TrimSpace(lo), 10, 32)
	b, errB := strconv.ParseUint(strings.TrimSpace(hi), 10, 32)
	switch {
	case errA != nil || errB != nil:
		return PortRange{}, fmt.Sprintf("%q is not a port or a range like \"8000-8099\"", s)
	case a < 1 || a > 65535 || b < 1 || b > 65535:
		return PortRange{}, fmt.Sprintf("%q is outside [1, 65535]", s)
	case a > b:
		return PortRange{}, fmt.Sprintf("%q: the range is reversed", s)
	}
	return PortRange{First: uint16(a), Last: uint16(b)}, ""
}

// readHealthCheck reads [health_check]; it reports whether Type is known.
// Keys that mean nothing for the type are refused with the reason (new
// keys) or warned about as ignored (request_path, host, port of NONE).
func readHealthCheck(t *table, hc *HealthCheck) bool {
	typeOK := enum(t, "type", healthCheckTypeNames, &hc.Type)
	if !typeOK && !t.has("type") {
		t.errorf("type", "missing (choose HTTP, HTTPS, HTTP2, TCP, SSL, GRPC, UDP or NONE)")
	}
	switch hc.Type {
	case HealthHTTPS, HealthSSL, HealthHTTP2:
		hc.Port = 443
	case HealthNone, HealthGRPC, HealthUDP:
		hc.Port = 0
	default:
		hc.Port = 80
	}
	hc.TLS = hc.Type == HealthHTTP2
	t.port("port", &hc.Port)
	if typeOK && !t.has("port") && (hc.Type == HealthGRPC || hc.Type == HealthUDP) {
		t.errorf("port", "missing: a %s check has no default port", hc.Type)
	}
	var path string
	if t.str("request_path", &path) {
		if !strings.HasPrefix(path, "/") || strings.ContainsFunc(path, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
			t.errorf("request_path", "%q must start with / and contain no spaces or control characters", path)
		} else {
			hc.RequestPath = path
		}
		if typeOK && !hc.Type.HTTPFamily() {
			t.warnf("request_path", "ignored: health_check.type is %s", hc.Type)
		}
	}
	if t.str("host", &hc.Host) && typeOK && (hc.Type == HealthTCP || hc.Type == HealthUDP) {
		t.warnf("host", "ignored: a %s check sends no host name (SSL, GRPC and the HTTP types do)", hc.Type)
	}
	if t.boolean("tls", &hc.TLS) && typeOK && hc.Type != HealthHTTP2 && hc.Type != HealthGRPC {
		t.errorf("tls", "applies to HTTP2 and GRPC only: %s", tlsHint(hc.Type))
	}
	if enum(t, "proxy_header", proxyHeaderNames, &hc.ProxyHeader) && typeOK && hc.ProxyHeader == ProxyV1 && (hc.Type == HealthUDP || hc.Type == HealthNone) {
		t.errorf("proxy_header", "PROXY_V1 is a line sent first on a TCP connection; a %s check opens none", hc.Type)
	}
	if req, key, ok := payload(t, "request"); key != "" && typeOK {
		switch hc.Type {
		case HealthTCP, HealthSSL, HealthUDP:
			if ok {
				hc.Request = req
			}
		default:
			t.errorf(key, "applies to TCP, SSL and UDP only: %s", sends(hc.Type))
		}
	} else if key == "" && typeOK && hc.Type == HealthUDP {
		t.errorf("request", "missing: a UDP check needs the datagram it sends (request, or request_hex for binary)")
	}
	if resp, key, ok := payload(t, "response"); key != "" && typeOK {
		switch {
		case hc.Type == HealthGRPC || hc.Type == HealthNone:
			t.errorf(key, "applies to TCP, SSL, UDP, HTTP, HTTPS and HTTP2: %s", sends(hc.Type))
		case hc.Type.HTTPFamily() && key == "response_hex":
			t.errorf(key, "an HTTP body is matched as text: write response")
		case ok:
			hc.Response = resp
		}
	}
	var svc string
	if t.str("grpc_service_name", &svc) {
		switch {
		case typeOK && hc.Type != HealthGRPC:
			t.errorf("grpc_service_name", "applies to GRPC only (health_check.type is %s)", hc.Type)
		case strings.ContainsFunc(svc, func(c rune) bool { return c <= ' ' || c >= 0x7f }):
			t.errorf("grpc_service_name", "%q must be printable ASCII without spaces", svc)
		default:
			hc.GRPCServiceName = svc
		}
	}
	t.duration("interval", MinProbeTime, MaxProbeTime, &hc.Interval)
	if t.duration("timeout", MinProbeTime, MaxProbeTime, &hc.Timeout) && hc.Timeout > hc.Interval {
		t.errorf("timeout", "%s is longer than interval %s", hc.Timeout, hc.Interval)
	}
	t.intField("healthy_threshold", 1, MaxThreshold, &hc.HealthyThreshold)
	t.intField("unhealthy_threshold", 1, MaxThreshold, &hc.UnhealthyThreshold)
	if enum(t, "path", probePathNames, &hc.Path) && typeOK && hc.Type == HealthNone {
		t.errorf("path", "a NONE check sends no probe")
	}
	if typeOK && hc.Type == HealthNone && t.has("port") {
		t.warnf("port", "ignored: health_check.type is NONE (every backend counts as healthy)")
	}
	t.done()
	return typeOK
}

// payload reads key k as text or k_hex as hexadecimal bytes (at most one
// of them, up to MaxProbePayload bytes). It returns the bytes, the key
// written ("" when neither is) and whether its value is good.
func payload(t *table, k string) (val, key string, ok bool) {
	var text, hexText string
	hasText, hasHex := t.str(k, &text), t.str(k+"_hex", &hexText)
	switch {
	case hasText && hasHex:
		t.errorf(k+"_hex", "write %s or %s_hex, not both", k, k)
		return "", k + "_hex", false
	case hasHex:
		key = k + "_hex"
		b, err := hex.DecodeString(strings.ReplaceAll(hexText, " ", ""))
		if err != nil {
			t.errorf(key, "%q is not hexadecimal bytes (two digits a byte, spaces allowed)", hexText)
			return "", key, false
		}
		val = string(b)
	case hasText:
		val, key = text, k
	default:
		// Written with the wrong TOML type: str has reported it.
		if t.has(k) || t.has(k+"_hex") {
			return "", k, false
		}
		return "", "", false
	}
	if val == "" {
		t.errorf(key, "empty (leave the key out instead)")
		return "", key, false
	}
	if len(val) > MaxProbePayload {
		t.errorf(key, "%d bytes, more than %d", len(val), MaxProbePayload)
		return "", key, false
	}
	return val, key, true
}

// tlsHint says how to ask for TLS with a type that has no tls key.
func tlsHint(t HealthCheckType) string {
	switch t {
	case HealthHTTP:
		return "HTTP over TLS is type HTTPS"
	case HealthTCP:
		return "a TLS handshake over TCP is type SSL"
	case HealthHTTPS, HealthSSL:
		return t.String() + " always uses TLS"
	case HealthUDP:
		return "a UDP check has no TLS"
	}
	return "NONE sends no probe"
}

// sends says what a check of type t sends, for the refusal of a request
// or response it cannot use.
func sends(t HealthCheckType) string {
	switch t {
	case HealthGRPC:
		return "a GRPC check sends the grpc.health.v1 Check call and passes on SERVING"
	case HealthNone:
		return "NONE sends no probe"
	}
	return "a " + t.String() + " check sends GET request_path"
}

// readZonal reads [zonal_affinity]; it reports whether it is valid.
func readZonal(t *table, z *ZonalAffinity) bool {
	ok := enum(t, "mode", zonalModeNames, &z.Mode) || !t.has("mode")
	ok = (t.ratio("spillover_ratio", &z.SpilloverRatio) || !t.has("spillover_ratio")) && ok
	cl := t.sub("clients")
	zones := make([]string, 0, len(cl.m))
	for zone := range cl.m {
		zones = append(zones, zone)
	}
	slices.Sort(zones)
	seen := map[netip.Prefix]string{}
	for _, zone := range zones {
		v, _ := cl.get(zone)
		list, isList := v.([]any)
		if !isList {
			cl.wrongType(zone, "a list of client prefixes", v)
			ok = false
			continue
		}
		for i, e := range list {
			key := joinIndex(cl.key(zone), i)
			s, isStr := e.(string)
			if !isStr {
				t.f.errorf(key, "want a prefix like \"198.51.100.0/24\", got %s", typeName(e))
				ok = false
				continue
			}
			p, err := netip.ParsePrefix(s)
			if err != nil {
				t.f.errorf(key, "%q is not a prefix like \"198.51.100.0/24\"", s)
				ok = false
				continue
			}
			if p.Masked() != p {
				t.f.errorf(key, "%q has host bits set (write %s)", s, p.Masked())
				ok = false
				continue
			}
			if other, dup := seen[p]; dup {
				t.f.errorf(key, "%s is already mapped to zone %q", p, other)
				ok = false
				continue
			}
			seen[p] = zone
			z.Clients = append(z.Clients, ClientZone{Prefix: p, Zone: zone})
		}
	}
	cl.done()
	t.done()
	slices.SortFunc(z.Clients, func(a, b ClientZone) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return a.Prefix.Bits() - b.Prefix.Bits()
	})
	return ok
}

// checkFragments warns when a UDP or L3_DEFAULT rule may split a datagram's
// fragments over backends (docs/design.md#fragments): about its ports in
// the rule's file, about the affinity and tracking mode in its service's
// (the same file for a rule with its own backends).
func checkFragments(rs *ruleSrc, s *svcSrc) {
	r := &rs.rule
	if r.Protocol == ProtocolTCP || s.svc.FragmentTracking {
		return
	}
	const fix = "not fragment-safe: use ports = \"ALL\", session_affinity CLIENT_IP or CLIENT_IP_PROTO and tracking_mode PER_SESSION, or set fragment_tracking = true"
	who := ""
	if !s.inline {
		who = fmt.Sprintf(" %q (%s)", r.Name, r.File)
	}
	if !r.Ports.All {
		rs.f.warnf("ports", "%s rule %s (non-first fragments carry no ports and match only an all-ports rule)", r.Protocol, fix)
	}
	if a := s.svc.SessionAffinity; a != AffinityClientIP && a != AffinityClientIPProto {
		s.f.warnf("session_affinity", "%s rule%s %s (%s hashes every fragment by 3-tuple but an unfragmented datagram by 5-tuple: one flow's large and small datagrams may reach different backends)", r.Protocol, who, fix, a)
	}
	if s.svc.ConnectionTracking.TrackingMode != PerSession {
		s.f.warnf(joinKey("connection_tracking", "tracking_mode"), "%s rule%s %s (PER_CONNECTION tracks unfragmented datagrams by 5-tuple)", r.Protocol, who, fix)
	}
}

// defaultProbePaths gives the rules whose [health_check] names no path the
// appliance's health_check_path (docs/design.md#data-path-probes).
func (l *loader) defaultProbePaths() {
	for i, rs := range l.rules {
		if !rs.probePathSet && rs.rule.Service == "" && rs.rule.HealthCheck.Path != l.cfg.HealthCheckPath {
			rs = l.sharedRule(rs)
			rs.rule.HealthCheck.Path = l.cfg.HealthCheckPath
			l.rules[i] = rs
		}
	}
	for _, s := range l.services {
		if !s.probePathSet {
			s.svc.HealthCheck.Path = l.cfg.HealthCheckPath
		}
	}
}
