package metrics

import (
	"fmt"
	"slices"
	"strings"
)

// Scope is a set of families a scrape asks for by name (?scope=…).
type Scope uint8

// The scopes. Every family is in one.
const (
	// ScopeAppliance: the appliance's own families (build, data-plane
	// mode, reloads, conntrack arenas, BGP, the fleet) and the Go runtime
	// and process collectors.
	ScopeAppliance Scope = 1 << iota
	// ScopeQueue: per queue (packets, verdicts, drops, XSK, conntrack).
	ScopeQueue
	// ScopeRule: per rule (tier, totals).
	ScopeRule
	// ScopeBackend: per rule and backend (health, eligibility, weight,
	// totals, connections, the last health check): the families that
	// grow with rules × backends.
	ScopeBackend

	AllScopes = ScopeAppliance | ScopeQueue | ScopeRule | ScopeBackend
)

var scopeNames = []string{"appliance", "queue", "rule", "backend"}

// ParseScope reads a scrape's scope parameters: each a scope's name, or
// several separated by commas (?scope=queue&scope=rule or
// ?scope=queue,rule). No parameter is every scope; a parameter with no
// name (?scope=) asks for none; a name it does not know is an error.
func ParseScope(values []string) (Scope, error) {
	if len(values) == 0 {
		return AllScopes, nil
	}
	var s Scope
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			i := slices.Index(scopeNames, name)
			if i < 0 {
				return 0, fmt.Errorf("metrics: scope %q: want %s (or no scope parameter: every family)", name, strings.Join(scopeNames, ", "))
			}
			s |= 1 << i
		}
	}
	return s, nil
}

// String is the scope's names, comma-separated.
func (s Scope) String() string {
	var out []string
	for i, n := range scopeNames {
		if s&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}
