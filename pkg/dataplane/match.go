package dataplane

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/xlbnet/xlb/pkg/packet"
)

// RuleProtocol is a forwarding rule's protocol.
type RuleProtocol uint8

const (
	RuleTCP       RuleProtocol = iota // TCP
	RuleUDP                           // UDP
	RuleL3Default                     // L3_DEFAULT: every IP protocol, all ports
)

func (p RuleProtocol) String() string {
	switch p {
	case RuleTCP:
		return "TCP"
	case RuleUDP:
		return "UDP"
	case RuleL3Default:
		return "L3_DEFAULT"
	}
	return fmt.Sprintf("RuleProtocol(%d)", uint8(p))
}

// PortRange is an inclusive range of destination ports.
type PortRange struct{ Lo, Hi uint16 }

// RuleMatch is what a rule matches: a VIP, a protocol and either all ports
// or a list of port ranges. L3_DEFAULT rules always match all ports.
type RuleMatch struct {
	VIP      [16]byte // IPv4 mapped into IPv6
	Protocol RuleProtocol
	AllPorts bool
	Ports    []PortRange
}

// noRule marks "no rule" in the matcher's tables.
const noRule = -1

// portMatcher finds the rule of one (VIP, protocol).
type portMatcher struct {
	all    int32       // rule of the all-ports rule, or noRule
	ranges []rangeRule // sorted by Lo, non-overlapping
}

type rangeRule struct {
	lo, hi uint16
	rule   int32
}

// match returns the rule for port. Packets without ports (non-first
// fragments, port-less protocols) match only the all-ports rule.
func (pm *portMatcher) match(port uint16, hasPort bool) int32 {
	if hasPort {
		rs := pm.ranges
		// Binary search for the last range with lo <= port.
		lo, hi := 0, len(rs)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if rs[mid].lo <= port {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo > 0 && port <= rs[lo-1].hi {
			return rs[lo-1].rule
		}
	}
	return pm.all
}

// vipRules holds the rules of one VIP.
type vipRules struct {
	addr      [16]byte
	used      bool
	tcp, udp  portMatcher
	l3Default int32
	// echo admits the sources whose echo requests the appliance answers:
	// those some rule of the VIP admits (nil: every source).
	echo *SourceSet
}

// Matcher maps (destination, protocol, port) to a rule index. It is built
// once per snapshot and read-only afterwards, so workers share it freely.
// The VIP set is an open-addressing table keyed by the 16-byte address,
// because a Go map hashes with a per-process seed and costs more than the
// two loads and one multiply this needs.
type Matcher struct {
	slots []vipRules // power of two, at most half full
	shift uint8
}

// NewMatcher builds a matcher for rules; rule i of the slice has index i.
// Specific protocol rules take precedence over an L3_DEFAULT rule on the
// same VIP (as Google Cloud orders forwarding rules that share an address);
// two rules that would both claim a packet are an error.
func NewMatcher(rules []RuleMatch) (*Matcher, error) {
	vips := map[[16]byte]*vipRules{}
	var order [][16]byte
	for i, r := range rules {
		v := vips[r.VIP]
		if v == nil {
			v = &vipRules{addr: r.VIP, used: true, tcp: portMatcher{all: noRule}, udp: portMatcher{all: noRule}, l3Default: noRule}
			vips[r.VIP] = v
			order = append(order, r.VIP)
		}
		var pm *portMatcher
		switch r.Protocol {
		case RuleTCP:
			pm = &v.tcp
		case RuleUDP:
			pm = &v.udp
		case RuleL3Default:
			if v.l3Default != noRule {
				return nil, fmt.Errorf("rule %d: VIP already has an L3_DEFAULT rule (rule %d)", i, v.l3Default)
			}
			v.l3Default = int32(i)
			continue
		default:
			return nil, fmt.Errorf("rule %d: unknown protocol %d", i, r.Protocol)
		}
		if r.AllPorts {
			if pm.all != noRule {
				return nil, fmt.Errorf("rule %d: VIP already has an all-ports %s rule (rule %d)", i, r.Protocol, pm.all)
			}
			if len(pm.ranges) > 0 {
				return nil, fmt.Errorf("rule %d: all-ports %s rule overlaps port rule %d", i, r.Protocol, pm.ranges[0].rule)
			}
			pm.all = int32(i)
			continue
		}
		if pm.all != noRule {
			return nil, fmt.Errorf("rule %d: %s ports overlap all-ports rule %d", i, r.Protocol, pm.all)
		}
		for _, pr := range r.Ports {
			if pr.Lo > pr.Hi {
				return nil, fmt.Errorf("rule %d: port range %d-%d is reversed", i, pr.Lo, pr.Hi)
			}
			pm.ranges = append(pm.ranges, rangeRule{lo: pr.Lo, hi: pr.Hi, rule: int32(i)})
		}
	}
	for _, v := range vips {
		for _, pm := range []*portMatcher{&v.tcp, &v.udp} {
			slices.SortFunc(pm.ranges, func(a, b rangeRule) int { return int(a.lo) - int(b.lo) })
			for j := 1; j < len(pm.ranges); j++ {
				if pm.ranges[j].lo <= pm.ranges[j-1].hi {
					return nil, fmt.Errorf("rule %d: port %d is also claimed by rule %d", pm.ranges[j].rule, pm.ranges[j].lo, pm.ranges[j-1].rule)
				}
			}
		}
	}
	size := 2
	for size < 2*len(order) {
		size <<= 1
	}
	m := &Matcher{slots: make([]vipRules, size), shift: uint8(64 - bits.TrailingZeros(uint(size)))}
	for _, a := range order {
		i := m.home(&a)
		for m.slots[i].used {
			i = (i + 1) & (len(m.slots) - 1)
		}
		m.slots[i] = *vips[a]
	}
	return m, nil
}

func (m *Matcher) home(a *[16]byte) int {
	x := binary.LittleEndian.Uint64(a[0:8]) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(a[8:16]), 29)
	return int((x * 0x9e3779b97f4a7c15) >> m.shift)
}

// vip returns the rules of dst, or nil when dst is not a VIP.
func (m *Matcher) vip(dst *[16]byte) *vipRules {
	mask := len(m.slots) - 1
	for i := m.home(dst); ; i = (i + 1) & mask {
		v := &m.slots[i]
		if !v.used {
			return nil
		}
		if v.addr == *dst {
			return v
		}
	}
}

// IsVIP reports whether dst is the address of any rule.
func (m *Matcher) IsVIP(dst *[16]byte) bool { return m.vip(dst) != nil }

// answersEcho reports whether an echo request from src to dst is answered:
// dst is a VIP and some rule of it admits src.
func (m *Matcher) answersEcho(dst, src *[16]byte) bool {
	v := m.vip(dst)
	return v != nil && v.echo.Admits(src)
}

// setEchoSources gives each VIP the union of its rules' source sets; the
// matcher's rule i is rules[slotOf[i]].
func (m *Matcher) setEchoSources(rules []*Rule, slotOf []uint16) error {
	byVIP := map[[16]byte][]*SourceSet{}
	for _, slot := range slotOf {
		r := rules[slot]
		byVIP[r.Match.VIP] = append(byVIP[r.Match.VIP], r.Sources)
	}
	for i := range m.slots {
		v := &m.slots[i]
		if !v.used {
			continue
		}
		u, err := unionSources(byVIP[v.addr])
		if err != nil {
			return err
		}
		v.echo = u
	}
	return nil
}

// Match returns the index of the rule for a packet to dst with protocol
// proto and destination port port (hasPort false for non-first fragments
// and port-less protocols), or -1.
func (m *Matcher) Match(dst *[16]byte, proto uint8, port uint16, hasPort bool) int {
	v := m.vip(dst)
	if v == nil {
		return noRule
	}
	r := int32(noRule)
	switch proto {
	case packet.ProtoTCP:
		r = v.tcp.match(port, hasPort)
	case packet.ProtoUDP:
		r = v.udp.match(port, hasPort)
	}
	if r == noRule {
		r = v.l3Default
	}
	return int(r)
}
