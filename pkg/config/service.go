package config

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Service is one backend service (docs/design.md#backend-services): what
// Google Cloud's backend service holds — groups and backends, the health
// check, failover, session affinity, tracking, draining — shared by every
// forwarding rule that names it. It is a file of services_dir; a rule with
// its own backends is a service too, named after the rule, and is not
// listed in Config.Services.
type Service struct {
	File string // as shown in messages, e.g. "services.d/web.toml"
	Name string

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
	// SourceRanges is the default of the rules that name the service; a
	// rule that writes source_ranges has its own list instead.
	SourceRanges []netip.Prefix

	Groups []Group // in file order

	// Rules names the rules that name the service, sorted.
	Rules []string
}

// DefaultService returns the values of every optional key of a backend
// service. The health check type and the groups have no default.
func DefaultService() Service {
	return Service{
		SessionAffinity:  AffinityNone,
		LocalityLBPolicy: Maglev,
		ConnectionTracking: ConnectionTracking{
			TrackingMode:           PerConnection,
			PersistenceOnUnhealthy: PersistDefaultForProtocol,
			IdleTimeout:            DefaultIdleTimeout,
		},
		Failover: Failover{
			ConnectionDrainOnFailover: true,
			FailoverDrainTimeout:      DefaultFailoverDrainTimeout,
		},
		HealthCheck: HealthCheck{
			RequestPath:        DefaultRequestPath,
			Interval:           DefaultInterval,
			Timeout:            DefaultTimeout,
			HealthyThreshold:   DefaultThreshold,
			UnhealthyThreshold: DefaultThreshold,
		},
		Encap:         Encap{Type: EncapIPIP, GUEPort: DefaultGUEPort},
		ZonalAffinity: ZonalAffinity{Mode: ZonalDisabled},
	}
}

// ServiceName is the name of the backend service the rule uses: the one
// it names, or its own name when it carries its own backends. The CLI's
// overrides, the health checks and the eligible sets are the service's.
func (r *Rule) ServiceName() string {
	if r.Service != "" {
		return r.Service
	}
	return r.Name
}

// useService gives the rule the service's keys; groups are the ones that
// serve the rule's family (familyGroups).
func (r *Rule) useService(s *Service, groups []Group) {
	r.SessionAffinity = s.SessionAffinity
	r.LocalityLBPolicy = s.LocalityLBPolicy
	r.ConnectionDrainingTimeout = s.ConnectionDrainingTimeout
	r.FragmentTracking = s.FragmentTracking
	r.AutoCapacityDrain = s.AutoCapacityDrain
	r.ConnectionTracking = s.ConnectionTracking
	r.Failover = s.Failover
	r.HealthCheck = s.HealthCheck
	r.Encap = s.Encap
	r.ZonalAffinity = s.ZonalAffinity
	r.Groups = groups
}

// Service returns the backend service file of that name, or nil (a rule
// with its own backends has none: Config.Rule finds it).
func (c *Config) Service(name string) *Service {
	i, ok := slices.BinarySearchFunc(c.Services, name, func(s Service, n string) int { return strings.Compare(s.Name, n) })
	if !ok {
		return nil
	}
	return &c.Services[i]
}

// RulesOf returns the rules that use the backend service name (a service
// file's, or a rule's own), in file order.
func (c *Config) RulesOf(name string) []*Rule {
	var out []*Rule
	for _, r := range c.Rules {
		if r.ServiceName() == name {
			out = append(out, r)
		}
	}
	return out
}

// serviceKeys are the keys of a backend service: a rule file either
// carries them (its own backends) or names a service that does.
var serviceKeys = []string{"session_affinity", "locality_lb_policy", "connection_draining_timeout",
	"fragment_tracking", "auto_capacity_drain", "connection_tracking", "failover", "health_check",
	"encap", "zonal_affinity", "group"}

// ruleKeys are the keys of a forwarding rule that a service file cannot
// carry.
var ruleKeys = []string{"vip", "protocol", "ports", "backend_service"}

// svcSrc is a backend service as read, with what the checks between a
// service and its rules need: from a file of services_dir, or (inline)
// from the keys of a rule file with its own backends.
type svcSrc struct {
	svc    Service
	f      *srcFile
	inline bool
	// groupsOK: the groups are complete enough for the checks of a
	// backend against a rule (readGroups).
	groupsOK bool
	// backendKeys: each backend's key path as written, for messages.
	backendKeys  map[netip.Addr]string
	probePathSet bool // [health_check] names its path
	rangesOK     bool // source_ranges is valid
	src          *parsedService
}

// noun is what the service is called in its own file's messages.
func (s *svcSrc) noun() string {
	if s.inline {
		return "rule"
	}
	return "service"
}

// parsedService is one clean service file as readService left it, kept
// by a Loader (as parsedRule).
type parsedService struct {
	data []byte
	name string
	ss   svcSrc // its f is a template: lines and placeholders, no issues
	f    srcFile
	// split holds the groups of each family of a service with rules of
	// both families (familyGroups), made once per parse so that the rules
	// of a reload that changed nothing share them (SameSource).
	split [2][]Group
	made  [2]bool
}

// refuseServiceKeys reports every key of a backend service written in a
// rule file that names a service: the service's file holds them, and
// two places for one value could disagree.
func refuseServiceKeys(t *table, service string) {
	for _, k := range serviceKeys {
		if _, ok := t.get(k); ok {
			t.errorf(k, "the rule names backend service %q (backend_service = %q): set %s in the service's file, which every rule naming it shares", service, service, k)
		}
	}
}

// readService reads one file of services_dir.
func readService(t *table, stem string) *svcSrc {
	s := &svcSrc{svc: DefaultService(), f: t.f}
	r := &s.svc
	r.Name = stem
	if t.str("name", &r.Name) || !t.has("name") {
		if !validName(r.Name) {
			t.errorf("name", "%q is not a valid backend service name (letters, digits, '-', '_', '.'; at most 63; starts with a letter or digit)", r.Name)
		}
	}
	for _, k := range ruleKeys {
		if _, ok := t.get(k); ok {
			t.errorf(k, "belongs to a forwarding rule: a backend service has no %s; the rule files of rules_dir that name it (backend_service = %q) carry it", k, r.Name)
		}
	}
	readServiceKeys(t, s)
	s.rangesOK = readSourceRanges(t, netip.Addr{}, &r.SourceRanges)
	t.done()
	return s
}

// readServices reads every *.toml of services_dir. The directory may be
// absent (a configuration without services; a rule that names one is told
// where it was looked for); one that exists must be readable.
func (l *loader) readServices() {
	dir := l.cfg.ServicesDir
	if filepath.Clean(dir) == filepath.Clean(l.cfg.RulesDir) {
		if !l.mainBroken {
			l.main.errorf("services_dir", "%s is also rules_dir: a file would be read as a rule and as a service", dir)
		}
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !os.IsNotExist(err) && !l.mainBroken {
			l.main.errorf("services_dir", "cannot read %s: %v", dir, unwrapPathError(err))
		}
		l.servicesAbsent = true
		return
	}
	parsed := map[string]*parsedService{}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".toml") || e.IsDir() {
			continue
		}
		p := filepath.Join(dir, n)
		f := &srcFile{name: l.displayName(p), is: l.is}
		l.is.rank(f.name)
		data, err := os.ReadFile(p)
		if err != nil {
			l.is.errorf(f.name, 0, "", "cannot read: %v", unwrapPathError(err))
			continue
		}
		if s := l.cachedService(p, f.name, data, parsed); s != nil {
			l.services = append(l.services, s)
			continue
		}
		errs, warns := len(l.is.errs), len(l.is.warns)
		t := decodeFile(f, data)
		if t == nil {
			continue
		}
		s := readService(t, strings.TrimSuffix(n, ".toml"))
		s.svc.File = f.name
		if l.cache != nil && len(l.is.errs) == errs && len(l.is.warns) == warns {
			c := &parsedService{data: data, name: f.name, f: *f}
			c.f.is = nil
			s.src = c
			c.ss = *s
			parsed[p] = c
		}
		l.services = append(l.services, s)
	}
	if l.cache != nil {
		l.cache.services = parsed // files gone from the directory are forgotten
	}
}

// cachedService returns a copy of the service parsed from these bytes of
// this file by an earlier load, or nil.
func (l *loader) cachedService(path, name string, data []byte, keep map[string]*parsedService) *svcSrc {
	if l.cache == nil {
		return nil
	}
	c := l.cache.services[path]
	if c == nil || c.name != name || !bytes.Equal(c.data, data) {
		return nil
	}
	keep[path] = c
	s := c.ss
	f := c.f
	f.is = l.is
	s.f = &f
	return &s
}

// resolveServices gives every rule that names a backend service the
// service's keys, and checks what holds between a service and its rules:
// the service exists and is named once, no rule with its own backends
// has its name, its backends can carry each rule's VIP family, its
// source ranges admit some client of each rule, its fragments; a service
// no rule names is a warning. It fills Config.Services.
func (l *loader) resolveServices() {
	byName := map[string]*svcSrc{}
	for _, s := range l.services {
		if prev, dup := byName[s.svc.Name]; dup {
			s.f.errorf("name", "%q is also the name of %s", s.svc.Name, prev.svc.File)
			continue
		}
		byName[s.svc.Name] = s
	}
	var names []string
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	users := map[*svcSrc][]*ruleSrc{}
	for _, rs := range l.rules {
		r := &rs.rule
		if r.Service == "" {
			if s := byName[r.Name]; s != nil {
				s.f.errorf("name", "%q is also the name of rule %q (%s), which carries its own backends and so is a backend service of that name", s.svc.Name, r.Name, r.File)
			}
			continue
		}
		if s := byName[r.Name]; s != nil && r.Name != r.Service {
			s.f.errorf("name", "%q is also the name of rule %q (%s), which names backend service %q: the CLI takes either name (--rule) and would not know which", s.svc.Name, r.Name, r.File, r.Service)
		}
		s := byName[r.Service]
		if s == nil {
			switch {
			case r.Service == "-":
			case l.servicesAbsent:
				rs.f.errorf("backend_service", "no backend service %q: services_dir %s does not exist", r.Service, l.displayName(l.cfg.ServicesDir))
			default:
				rs.f.errorf("backend_service", "no backend service %q in %s%s", r.Service, l.displayName(l.cfg.ServicesDir), didYouMean(r.Service, names))
			}
			continue
		}
		users[s] = append(users[s], rs)
	}
	for _, s := range l.services {
		if byName[s.svc.Name] != s {
			continue
		}
		rules := users[s]
		if len(rules) == 0 {
			s.f.warnf("name", "no rule names backend service %q (backend_service = %q in a file of %s): it serves nothing", s.svc.Name, s.svc.Name, l.displayName(l.cfg.RulesDir))
		}
		l.resolveService(s, rules)
		svc := s.svc
		svc.Rules = nil
		for _, rs := range rules {
			svc.Rules = append(svc.Rules, rs.rule.Name)
		}
		slices.Sort(svc.Rules)
		l.cfg.Services = append(l.cfg.Services, svc)
	}
	slices.SortFunc(l.cfg.Services, func(a, b Service) int { return strings.Compare(a.Name, b.Name) })
}

// resolveService gives service s to its rules.
func (l *loader) resolveService(s *svcSrc, rules []*ruleSrc) {
	var fams [2]bool // [0] IPv4, [1] IPv6
	for _, rs := range rules {
		if rs.vipOK {
			fams[family(rs.rule.VIP)] = true
		}
	}
	split := fams[0] && fams[1]
	seen := map[netip.Addr]bool{}
	reported := [2]bool{}
	for _, rs := range rules {
		r := &rs.rule
		groups := s.svc.Groups
		if split && s.groupsOK {
			fam := family(r.VIP)
			groups = s.familyGroups(fam)
			if countBackends(groups) == 0 && !reported[fam] {
				reported[fam] = true
				fs := map[int]string{0: "IPv4", 1: "IPv6"}[fam]
				why := "no encapsulation carries IPv6 inside IPv4"
				if fam == 0 {
					why = "encap DIRECT needs backends of the VIP's family"
				}
				s.f.errorf("group", "no %s backend for rule %q (%s), whose VIP %s is %s: a service with rules of both families serves each from its backends of that family (%s)", fs, r.Name, r.File, r.VIP, fs, why)
			}
		}
		r.useService(&s.svc, groups)
		r.svc = s.src
		if !rs.rangesSet {
			r.SourceRanges = s.svc.SourceRanges
			if rs.vipOK && s.rangesOK && len(r.SourceRanges) > 0 && !hasFamily(r.SourceRanges, r.VIP) {
				fs := map[bool]string{true: "IPv4", false: "IPv6"}[r.VIP.Is4()]
				s.f.errorf("source_ranges", "no %s prefix: rule %q (%s), whose VIP %s is %s, takes this list and would admit no client (or write source_ranges in the rule)", fs, r.Name, r.File, r.VIP, fs)
			}
		}
		if s.groupsOK && !split {
			checkFamilies(rs, s, groups, seen)
		}
		if rs.portsOK {
			checkFragments(rs, s)
		}
	}
}

// familyGroups returns the groups that serve the rules of one family (0:
// IPv4, 1: IPv6) of a service with rules of both: its backends of that
// family — for IPv4, when it has none, its IPv6 backends (IPv4 inside
// IPv6), unless DIRECT. Groups keep their place, empty or not.
func (s *svcSrc) familyGroups(fam int) []Group {
	if c := s.src; c != nil && c.made[fam] {
		return c.split[fam]
	}
	out := filterGroups(s.svc.Groups, func(a netip.Addr) bool { return family(a) == fam })
	if fam == 0 && countBackends(out) == 0 && s.svc.Encap.Type != EncapDirect {
		out = s.svc.Groups
	}
	if c := s.src; c != nil {
		c.split[fam], c.made[fam] = out, true
	}
	return out
}

func filterGroups(gs []Group, keep func(netip.Addr) bool) []Group {
	out := make([]Group, len(gs))
	for i, g := range gs {
		out[i] = g
		out[i].Backends = nil
		for _, b := range g.Backends {
			if keep(b.Addr) {
				out[i].Backends = append(out[i].Backends, b)
			}
		}
	}
	return out
}

func countBackends(gs []Group) int {
	n := 0
	for _, g := range gs {
		n += len(g.Backends)
	}
	return n
}

// family is 0 for an IPv4 address, 1 for IPv6.
func family(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

func hasFamily(ps []netip.Prefix, vip netip.Addr) bool {
	for _, p := range ps {
		if p.Addr().Is4() == vip.Is4() {
			return true
		}
	}
	return false
}

// didYouMean is " (did you mean X?)" for the known name closest to k, or
// a list of them when there are few, or "".
func didYouMean(k string, known []string) string {
	if s := suggest(k, known); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	if len(known) == 0 {
		return ": it has none"
	}
	if len(known) <= 5 {
		return " (it has " + strings.Join(known, ", ") + ")"
	}
	return ""
}

// staleServiceOverride is the stale message of an override kept under a
// rule that now names a backend service: overrides are the service's.
func staleServiceOverride(r *Rule) string {
	return fmt.Sprintf("rule %q now uses backend service %q, whose backends' overrides are the service's (xlb backend … --rule %s); override kept, not applied", r.Name, r.Service, r.Service)
}
