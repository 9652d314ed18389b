package config

import (
	"net/netip"
	"strconv"
)

// MaxSourceRanges bounds one source_ranges list. The data plane's cost per
// packet does not depend on it (pkg/dataplane's SourceSet); the bound
// keeps a list that was generated wrongly from building megabytes of trie.
const MaxSourceRanges = 65536

// UnmatchedVIPTraffic is unmatched_vip_traffic: what becomes of a packet
// to a VIP address that no rule claims (another port or protocol).
type UnmatchedVIPTraffic uint8

const (
	// UnmatchedDrop (drop, the default): the XDP program sends it to the
	// workers, which drop and count it as no-rule.
	UnmatchedDrop UnmatchedVIPTraffic = iota
	// UnmatchedPass (pass): it reaches the appliance's own network stack,
	// for an appliance that also hosts a service on a VIP address.
	UnmatchedPass
)

var unmatchedVIPTrafficNames = []string{"drop", "pass"}

func (u UnmatchedVIPTraffic) String() string { return enumString(unmatchedVIPTrafficNames, u) }

// readSourceRanges reads source_ranges, the client prefixes a rule admits
// (docs/design.md#source-ranges), from t: absent or empty admits every
// source. vip, when valid, is the rule's VIP: a list with no prefix of its
// family would admit nobody and is refused. Prefixes of the other family
// are allowed (one list may serve an IPv4 and an IPv6 rule, as
// Kubernetes' loadBalancerSourceRanges does) and apply to no packet of
// this rule. A backend service file reads the key with an invalid vip (it
// has several rules): the family check then belongs to each rule that
// names the service. It reports whether the key is valid.
func readSourceRanges(t *table, vip netip.Addr, out *[]netip.Prefix) bool {
	const key = "source_ranges"
	v, ok := t.get(key)
	if !ok {
		return true
	}
	list, isList := v.([]any)
	if !isList {
		t.wrongType(key, `a list of prefixes like ["198.51.100.0/24", "2001:db8::/32"]`, v)
		return false
	}
	if len(list) > MaxSourceRanges {
		t.errorf(key, "%d prefixes, at most %d", len(list), MaxSourceRanges)
		return false
	}
	good := true
	seen := map[netip.Prefix]int{}
	var ps []netip.Prefix
	for i, e := range list {
		at := joinIndex(t.key(key), i)
		s, isStr := e.(string)
		if !isStr {
			t.f.errorf(at, `want a prefix like "198.51.100.0/24", got %s`, typeName(e))
			good = false
			continue
		}
		p, why := parseSourcePrefix(s)
		if why != "" {
			t.f.errorf(at, "%q %s", s, why)
			good = false
			continue
		}
		if j, dup := seen[p]; dup {
			t.f.warnf(at, "%s is listed twice (also %s[%d])", p, key, j)
			continue
		}
		seen[p] = i
		ps = append(ps, p)
	}
	if !good {
		return false
	}
	if vip.IsValid() && len(ps) > 0 {
		family := false
		for _, p := range ps {
			family = family || p.Addr().Is4() == vip.Is4()
		}
		if !family {
			fam := "IPv4"
			if vip.Is6() {
				fam = "IPv6"
			}
			t.errorf(key, "no %s prefix: the %s VIP %s would admit no client (leave source_ranges out, or write [], to admit every source)", fam, fam, vip)
			return false
		}
	}
	*out = ps
	return true
}

// parseSourcePrefix parses one source_ranges element, or says what is
// wrong with it.
func parseSourcePrefix(s string) (netip.Prefix, string) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		if a, aerr := netip.ParseAddr(s); aerr == nil && a.Zone() == "" {
			return netip.Prefix{}, "is an address, not a prefix: write " + a.Unmap().String() + "/" + strconv.Itoa(a.Unmap().BitLen()) + " for that one address"
		}
		return netip.Prefix{}, `is not a prefix like "198.51.100.0/24" or "2001:db8::/32"`
	}
	a := p.Addr()
	if a.Is4In6() {
		if p.Bits() >= 96 {
			return netip.Prefix{}, "is an IPv4-mapped IPv6 prefix: write the IPv4 prefix " + netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked().String()
		}
		return netip.Prefix{}, "is an IPv4-mapped IPv6 prefix shorter than /96: no client has such an address"
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, "has host bits set: the prefix it lies in is " + m.String() + " (write that, or " + a.String() + "/" + strconv.Itoa(a.BitLen()) + " for the one address)"
	}
	return p, ""
}
