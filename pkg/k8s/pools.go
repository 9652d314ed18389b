package k8s

import (
	"fmt"
	"net/netip"
	"strings"
)

// Pool is a range of addresses the controller may give Services as VIPs.
type Pool struct {
	First, Last netip.Addr // inclusive, one family
	Text        string     // as configured
}

// ParsePool reads a pool: a prefix ("203.0.113.64/26", "fd00:1::/120") or
// an inclusive range ("203.0.113.64-203.0.113.95"). An IPv4 prefix shorter
// than /31 leaves out its first and last address (network and broadcast:
// some clients and routers still mistreat them).
func ParsePool(s string) (Pool, error) {
	s = strings.TrimSpace(s)
	if a, b, ok := strings.Cut(s, "-"); ok {
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if err1 != nil || err2 != nil {
			return Pool{}, fmt.Errorf("pool %q: want a prefix or FIRST-LAST addresses", s)
		}
		first, last = first.Unmap(), last.Unmap()
		if first.Is4() != last.Is4() || last.Less(first) {
			return Pool{}, fmt.Errorf("pool %q: the range's ends must be of one family, first ≤ last", s)
		}
		return Pool{First: first, Last: last, Text: s}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return Pool{}, fmt.Errorf("pool %q: want a prefix or FIRST-LAST addresses", s)
	}
	if p.Masked() != p {
		return Pool{}, fmt.Errorf("pool %q has host bits set (%s?)", s, p.Masked())
	}
	first, last := p.Addr(), lastAddr(p)
	if p.Addr().Is4() && p.Bits() < 31 {
		first, last = first.Next(), last.Prev()
	}
	return Pool{First: first, Last: last, Text: s}, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Contains reports whether a lies in the pool.
func (p Pool) Contains(a netip.Addr) bool {
	a = a.Unmap()
	return a.Is4() == p.First.Is4() && !a.Less(p.First) && !p.Last.Less(a)
}

// Pools is the configured pools, in order of preference.
type Pools []Pool

// Contains reports whether any pool holds a.
func (ps Pools) Contains(a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// HasFamily reports whether a pool of a's family (v4 true: IPv4) exists.
func (ps Pools) HasFamily(v4 bool) bool {
	for _, p := range ps {
		if p.First.Is4() == v4 {
			return true
		}
	}
	return false
}

// Lowest returns the lowest free address of the family (v4 true: IPv4),
// taking the pools in order, or false when every one is used.
func (ps Pools) Lowest(v4 bool, used func(netip.Addr) bool) (netip.Addr, bool) {
	for _, p := range ps {
		if p.First.Is4() != v4 {
			continue
		}
		for a := p.First; a.IsValid() && !p.Last.Less(a); a = a.Next() {
			if !used(a) {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}
