package conntrack

import "github.com/xlbnet/xlb/pkg/prefetch"

// PrefetchBuckets starts loading the header lines of both candidate
// buckets of p. The worker calls it for every packet of a batch before it
// looks any of them up, so the batch's misses overlap (see pkg/dataplane).
func (t *Table) PrefetchBuckets(p Probe) {
	prefetch.Of(&t.buckets[p.b1].header)
	prefetch.Of(&t.buckets[p.b2].header)
}

// PrefetchSlot starts loading the slot line that LookupAt(p, …) will
// compare: the first slot whose tag matches in the first bucket, else in
// the second. It reads the header lines, so PrefetchBuckets should have
// run a while before. Nothing is loaded when no tag matches (a miss).
func (t *Table) PrefetchSlot(p Probe) {
	b := &t.buckets[p.b1]
	if i := b.firstTag(p.tag); i >= 0 {
		prefetch.Of(&b.slots[i])
		return
	}
	b = &t.buckets[p.b2]
	if i := b.firstTag(p.tag); i >= 0 {
		prefetch.Of(&b.slots[i])
	}
}

// firstTag returns the first slot of b whose tag is tag, or -1.
func (b *bucket) firstTag(tag uint16) int {
	for i := range Ways {
		if b.tags[i] == tag {
			return i
		}
	}
	return -1
}
