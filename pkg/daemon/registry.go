package daemon

import (
	"fmt"
	"net/netip"
)

// registry hands out the stable slots the dataplane and conntrack entries
// use: one per rule name, and one per backend address within a rule. A
// slot is never reused during the life of the process, so an entry can
// never name a different rule or backend than the one it was made for
// (docs/design.md#draining-on-removal: slots must outlive every entry that
// may name them). Slots
// cost a few bytes each; a process would need 65536 distinct rule names
// to run out.
type registry struct {
	rules    map[string]uint16
	backends map[string]map[netip.Addr]uint32
}

func newRegistry() *registry {
	return &registry{rules: map[string]uint16{}, backends: map[string]map[netip.Addr]uint32{}}
}

func (r *registry) rule(name string) (uint16, error) {
	if s, ok := r.rules[name]; ok {
		return s, nil
	}
	if len(r.rules) >= 1<<16 {
		return 0, fmt.Errorf("rule %q: no rule slot left (65536 rule names used since start)", name)
	}
	s := uint16(len(r.rules))
	r.rules[name] = s
	r.backends[name] = map[netip.Addr]uint32{}
	return s, nil
}

func (r *registry) backend(rule string, addr netip.Addr) uint32 {
	m := r.backends[rule]
	if s, ok := m[addr]; ok {
		return s
	}
	s := uint32(len(m))
	m[addr] = s
	return s
}

// ruleCount is one more than the highest rule slot in use.
func (r *registry) ruleCount() int { return len(r.rules) }
