package dataplane

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
)

// SourceSet is a rule's source_ranges: the client prefixes it admits
// (docs/design.md#source-ranges). It is built once per snapshot and only
// read afterwards.
//
// It is a multibit trie over the address bytes, one level per byte, with
// one root per family (an IPv4 address is looked up from its 4 bytes, not
// the 16 of its mapped form). A node holds two 256-bit maps: the byte
// values wholly inside a prefix (full) and those with a deeper node
// (child); a node's children are stored together, in byte order, so a
// child's index is the node's base plus the rank of its bit. A prefix
// that ends inside a byte sets every byte value it covers in full, so a
// lookup is one test per byte and stops at the first full bit: at most 4
// nodes for IPv4 and 16 for IPv6, whatever the number of prefixes.
type SourceSet struct {
	nodes    []sourceNode
	root4    int32 // node of the first IPv4 byte, or -1: no IPv4 prefix
	root6    int32 // node of the first IPv6 byte, or -1
	prefixes []netip.Prefix
}

// sourceNode is one trie node (72 bytes).
type sourceNode struct {
	full  [4]uint64 // byte values covered by a prefix
	child [4]uint64 // byte values with a node one byte deeper
	base  int32     // index of the first child
}

// Admits reports whether the (16-byte, IPv4-mapped) source address a lies
// in one of the set's prefixes. A nil set admits every source.
func (s *SourceSet) Admits(a *[16]byte) bool {
	if s == nil {
		return true
	}
	n, i := s.root6, 0
	if isMapped4(a) {
		n, i = s.root4, 12
	}
	for ; n >= 0 && i < 16; i++ {
		nd := &s.nodes[n]
		b := a[i]
		w, bit := b>>6, uint64(1)<<(b&63)
		if nd.full[w]&bit != 0 {
			return true
		}
		if nd.child[w]&bit == 0 {
			return false
		}
		r := bits.OnesCount64(nd.child[w] & (bit - 1))
		for j := range w {
			r += bits.OnesCount64(nd.child[j])
		}
		n = nd.base + int32(r)
	}
	return false
}

// isMapped4 reports whether a is an IPv4 address in its mapped form
// (::ffff:a.b.c.d).
func isMapped4(a *[16]byte) bool {
	return a[0]|a[1]|a[2]|a[3]|a[4]|a[5]|a[6]|a[7]|a[8]|a[9] == 0 && a[10] == 0xff && a[11] == 0xff
}

// Prefixes returns the prefixes the set was built from, sorted (IPv4 ones
// unmapped). For status and tools.
func (s *SourceSet) Prefixes() []netip.Prefix {
	if s == nil {
		return nil
	}
	return s.prefixes
}

// same reports whether s and o admit the same sources (nil admits all).
func (s *SourceSet) same(o *SourceSet) bool {
	return s == o || slices.Equal(s.Prefixes(), o.Prefixes())
}

// Len is the number of trie nodes: its memory is Len × 72 bytes.
func (s *SourceSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.nodes)
}

// NewSourceSet builds the set of prefixes. An empty list returns nil, the
// set that admits every source. IPv4-mapped IPv6 prefixes of /96 or longer
// are taken as IPv4; host bits are ignored (the configuration refuses
// them before this is called).
func NewSourceSet(prefixes []netip.Prefix) (*SourceSet, error) {
	if len(prefixes) == 0 {
		return nil, nil
	}
	var b sourceBuilder
	s := &SourceSet{root4: -1, root6: -1}
	for _, p := range prefixes {
		if !p.IsValid() {
			return nil, fmt.Errorf("source set: invalid prefix %v", p)
		}
		a, n := p.Addr(), p.Bits()
		if a.Is4In6() && n >= 96 {
			a, n = a.Unmap(), n-96
		}
		p = netip.PrefixFrom(a, n).Masked()
		s.prefixes = append(s.prefixes, p)
		if a.Is4() {
			b.insert(&b.v4, a.AsSlice(), n)
		} else {
			b.insert(&b.v6, a.AsSlice(), n)
		}
	}
	slices.SortFunc(s.prefixes, func(x, y netip.Prefix) int {
		if c := x.Addr().Compare(y.Addr()); c != 0 {
			return c
		}
		return x.Bits() - y.Bits()
	})
	s.prefixes = slices.Compact(s.prefixes)
	s.root4 = s.flatten(b.v4)
	s.root6 = s.flatten(b.v6)
	return s, nil
}

// sourceBuilder is the pointer form of the trie, flattened when complete.
type sourceBuilder struct{ v4, v6 *buildNode }

type buildNode struct {
	full  [4]uint64
	child [4]uint64
	kids  map[uint8]*buildNode
}

func (b *sourceBuilder) insert(root **buildNode, addr []byte, n int) {
	if *root == nil {
		*root = &buildNode{}
	}
	nd := *root
	for i := 0; ; i++ {
		v := addr[i]
		if n > 8 && nd.full[v>>6]&(1<<(v&63)) != 0 {
			return // a longer prefix inside one already covered
		}
		if n <= 8 {
			// The prefix ends in this byte: every value sharing its first
			// n bits is covered.
			span := 1 << (8 - n)
			lo := int(v) &^ (span - 1)
			for x := lo; x < lo+span; x++ {
				nd.full[x>>6] |= 1 << (x & 63)
				nd.child[x>>6] &^= 1 << (x & 63)
				delete(nd.kids, uint8(x))
			}
			return
		}
		k := nd.kids[v]
		if k == nil {
			if nd.kids == nil {
				nd.kids = map[uint8]*buildNode{}
			}
			k = &buildNode{}
			nd.kids[v] = k
			nd.child[v>>6] |= 1 << (v & 63)
		}
		nd, n = k, n-8
	}
}

// flatten appends the trie under root breadth first, so that every node's
// children are consecutive, and returns the root's index (-1 for nil).
func (s *SourceSet) flatten(root *buildNode) int32 {
	if root == nil {
		return -1
	}
	at := int32(len(s.nodes))
	level := []*buildNode{root}
	s.nodes = append(s.nodes, sourceNode{})
	for len(level) > 0 {
		first := int32(len(s.nodes)) - int32(len(level))
		var next []*buildNode
		for i, bn := range level {
			nd := &s.nodes[first+int32(i)]
			nd.full, nd.child = bn.full, bn.child
			nd.base = first + int32(len(level)) + int32(len(next))
			for v := range 256 {
				if bn.child[v>>6]&(1<<(v&63)) != 0 {
					next = append(next, bn.kids[uint8(v)])
				}
			}
		}
		s.nodes = append(s.nodes, make([]sourceNode, len(next))...)
		level = next
	}
	return at
}

// unionSources is the set admitting what any of sets admits: nil (every
// source) when one of them is nil.
func unionSources(sets []*SourceSet) (*SourceSet, error) {
	var all []netip.Prefix
	for _, s := range sets {
		if s == nil {
			return nil, nil
		}
		all = append(all, s.prefixes...)
	}
	return NewSourceSet(all)
}
