package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// crossCheck applies the rules between files: unique rule names, no two
// rules matching the same VIP/protocol/port, a Maglev table large enough
// for the largest rule, and a state file that cannot be mistaken for a rule
// file. It then stores the rules in the Config.
func (l *loader) crossCheck() {
	// Two orders of the rules, by name and by VIP (file order within
	// each, as the sorts are stable), find the rules that share a name or
	// a VIP without a map; only rules of one VIP can overlap.
	byName := l.sortedRules(func(a, b *ruleSrc) int { return strings.Compare(a.rule.Name, b.rule.Name) })
	for i, first := 0, 0; i < len(byName); i++ {
		if byName[i].rule.Name != byName[first].rule.Name {
			first = i
		} else if i != first {
			byName[i].f.errorf("name", "%q is also the name of %s", byName[i].rule.Name, byName[first].rule.File)
		}
	}
	byVIP := l.sortedRules(func(a, b *ruleSrc) int { return a.rule.VIP.Compare(b.rule.VIP) })
	for i, first := 0, 0; i < len(byVIP); i++ {
		if byVIP[i].rule.VIP != byVIP[first].rule.VIP {
			first = i
		}
		for _, o := range byVIP[first:i] {
			l.checkOverlap(o, byVIP[i])
		}
	}
	largest, largestRule := 0, ""
	l.cfg.Rules = make([]*Rule, 0, len(l.rules))
	for _, rs := range l.rules {
		r := &rs.rule
		if n := r.BackendCount(); n > largest {
			largest, largestRule = n, r.Name
		}
		l.cfg.Rules = append(l.cfg.Rules, r)
	}
	if l.mainBroken {
		return // the checks below read xlb.toml's keys, which did not parse
	}
	size := int64(l.cfg.MaglevTableSize)
	switch need := MaglevBackendFactor * largest; {
	case size == 0 && need > MaxMaglevTableSize:
		// Each rule's size follows its backends; the largest must fit.
		for _, rs := range l.rules {
			if n := rs.rule.BackendCount(); MaglevBackendFactor*n > MaxMaglevTableSize {
				key := "group"
				if rs.rule.Service != "" {
					key = "backend_service"
				}
				rs.f.errorf(key, "%d backends: a rule has at most %d (%d slots each in a Maglev table of at most %d)", n, MaxMaglevTableSize/MaglevBackendFactor, MaglevBackendFactor, MaxMaglevTableSize)
			}
		}
	case size == 0:
		// each rule's follows its backends (hash.TableSizeFor)
	case size > MaxMaglevTableSize:
		// reported by readMain
	case size < int64(need):
		notPrime := ""
		if !isPrime(size) {
			notPrime = "not prime and "
		}
		l.main.errorf("maglev_table_size", "%d is %ssmaller than %d × %d backends of rule %q (%d); use a prime ≥ %d, e.g. %d",
			size, notPrime, MaglevBackendFactor, largest, largestRule, need, need, nextPrime(int64(need-1)))
	case !isPrime(size):
		l.main.errorf("maglev_table_size", "%d is not prime (try %d)", size, nextPrime(size))
	}
	if sf := filepath.Clean(l.cfg.StateFile); filepath.Dir(sf) == filepath.Clean(l.cfg.RulesDir) && strings.HasSuffix(sf, ".toml") {
		l.main.errorf("state_file", "%s is inside rules_dir and would be read as a rule file", l.cfg.StateFile)
	} else if filepath.Dir(sf) == filepath.Clean(l.cfg.ServicesDir) && strings.HasSuffix(sf, ".toml") {
		l.main.errorf("state_file", "%s is inside services_dir and would be read as a backend service file", l.cfg.StateFile)
	} else if sf == filepath.Clean(l.cfg.Path) {
		l.main.errorf("state_file", "%s is the configuration file itself; xlb writes the state file", l.cfg.StateFile)
	}
}

// sortedRules returns the rules in a stable order by cmp, in a table the
// loader keeps for the next call.
func (l *loader) sortedRules(cmp func(a, b *ruleSrc) int) []*ruleSrc {
	l.order = append(l.order[:0], l.rules...)
	slices.SortStableFunc(l.order, cmp)
	return l.order
}

// checkOverlap reports b (the later file) when a packet could match both a
// and b: same VIP, same protocol and ports that intersect (ALL intersects
// every port), or two L3_DEFAULT rules. An L3_DEFAULT rule shares its VIP
// with TCP and UDP rules: the specific rule takes its packets, the
// L3_DEFAULT rule everything else (pkg/dataplane's matcher).
func (l *loader) checkOverlap(a, b *ruleSrc) {
	if !a.vipOK || !b.vipOK || !a.portsOK || !b.portsOK || a.rule.VIP != b.rule.VIP {
		return
	}
	ra, rb := &a.rule, &b.rule
	where := fmt.Sprintf("rule %q (%s)", ra.Name, ra.File)
	l3a, l3b := ra.Protocol == ProtocolL3Default, rb.Protocol == ProtocolL3Default
	switch {
	case l3a && l3b:
		b.f.errorf("protocol", "L3_DEFAULT on %s overlaps %s, also L3_DEFAULT: a VIP has at most one", rb.VIP, where)
		return
	case l3a || l3b:
		// The specific rule wins its packets; the L3_DEFAULT rule takes
		// the rest. A UDP rule with a port list then loses the non-first
		// fragments of its datagrams to the L3_DEFAULT rule.
		udp, l3 := b, a
		if l3b {
			udp, l3 = a, b
		}
		if udp.rule.Protocol == ProtocolUDP && !udp.rule.Ports.All {
			b.f.warnf("protocol", "UDP rule %q (%s) on %s lists ports and L3_DEFAULT rule %q (%s) shares the VIP: non-first fragments carry no port and go to the L3_DEFAULT rule (use ports = \"ALL\" for the UDP rule)",
				udp.rule.Name, udp.rule.File, rb.VIP, l3.rule.Name, l3.rule.File)
		}
		return
	case ra.Protocol != rb.Protocol:
		return
	}
	if p, ok := firstCommonPort(ra.Ports, rb.Ports); ok {
		b.f.errorf("ports", "%s overlaps %s on %s %s (port %d)", rb.Ports, where, rb.VIP, rb.Protocol, p)
	}
}

func firstCommonPort(a, b Ports) (uint16, bool) {
	switch {
	case a.All && b.All:
		return 1, true
	case a.All:
		return b.Ranges[0].First, true
	case b.All:
		return a.Ranges[0].First, true
	}
	for _, x := range a.Ranges {
		for _, y := range b.Ranges {
			if x.First <= y.Last && y.First <= x.Last {
				return max(x.First, y.First), true
			}
		}
	}
	return 0, false
}
