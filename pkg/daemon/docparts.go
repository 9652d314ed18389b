package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"

	"golang.org/x/sys/unix"
)

// The state document in parts (docs/design.md#the-state-document-in-parts).
// Its rules' sections (rule and backend slots, carried failover states,
// verdicts) are split in stateBuckets buckets by a hash of the rule name,
// and its next hops by a hash of the backend's address, each bucket's
// section encoded anew only when something in it changed; the head
// (everything else) is the other part. A document, for a restart's offer
// as for systemd's fd store, is assembled from them (assembleDoc); the fd
// store keeps the parts themselves, each in its own memfd, so that a
// publication stores only the parts that changed (statestore.go).

// stateBuckets is how many buckets the rules and next hops are split in:
// a one-rule change stores about 1/64 of the document, and the document
// holds 66 of the fd store's fds (the buckets, the head, the manifest),
// twice that while a first store replaces another process's
// (FileDescriptorStoreMax=1024; the engine's arenas and sockets take 3 a
// queue).
const stateBuckets = 64

// stateBucket is the bucket of a rule: FNV-1a of its name, so that a rule
// that comes or goes moves no other.
func stateBucket(rule string) int {
	h := fnv.New32a()
	h.Write([]byte(rule))
	return int(h.Sum32() % stateBuckets)
}

// hopBucket is the bucket of a backend's next hop: FNV-1a of its address.
func hopBucket(k nhKey) int {
	a := k.addr.As16()
	h := fnv.New32a()
	h.Write(a[:])
	return int(h.Sum32() % stateBuckets)
}

// docBucket is one bucket's sections of the state document as last
// encoded: each a comma-separated list of entries, without the brackets:
// its rules' slots, backend slots, verdicts and next hops (its rules'
// runtime states are written from the rules: writeBucketRules).
type docBucket struct {
	names   map[string]struct{}   // the registry's rule names in the bucket
	probes  map[probeKey]struct{} // the verdicts' keys whose rule is in the bucket
	hops    map[nhKey]struct{}    // the next hops' keys whose address is in the bucket
	dirty   docDirty              // the sections that changed since they were encoded
	version uint64                // encodings so far: the fd store compares it
	ruleIDs []byte                // "rule":slot
	slots   []byte                // "rule":{"addr":slot,…}
	verdict []byte                // probeState objects
	hop     []byte                // nexthopState objects
}

// docDirty says which of a bucket's sections changed.
type docDirty uint8

const (
	dirtyRules    docDirty = 1 << iota // rule and backend slots, runtime states
	dirtyVerdicts                      // verdicts
	dirtyHops                          // next hops
	dirtyAll      = dirtyRules | dirtyVerdicts | dirtyHops
)

// docBuckets are the buckets of the rules' sections; the zero value has
// nothing encoded and nothing to encode.
type docBuckets [stateBuckets]docBucket

// ruleChanged records that a rule's sections changed: its backend slots,
// failover state, warm flag or removed backends, or the rule came or
// went (control goroutine).
func (d *daemon) ruleChanged(name string) {
	b := &d.docBuckets[stateBucket(name)]
	if b.names == nil {
		b.names = map[string]struct{}{}
	}
	b.names[name] = struct{}{}
	b.dirty |= dirtyRules
}

// setProbe records a verdict, and that its bucket changed.
func (d *daemon) setProbe(k probeKey, p probe) {
	d.probes[k] = p
	b := &d.docBuckets[stateBucket(k.rule)]
	if b.probes == nil {
		b.probes = map[probeKey]struct{}{}
	}
	b.probes[k] = struct{}{}
	b.dirty |= dirtyVerdicts
}

// forgetProbe drops a verdict, and records that its bucket changed.
func (d *daemon) forgetProbe(k probeKey) {
	if _, ok := d.probes[k]; !ok {
		return
	}
	delete(d.probes, k)
	b := &d.docBuckets[stateBucket(k.rule)]
	delete(b.probes, k)
	b.dirty |= dirtyVerdicts
}

// setNextHop records a backend's next hop, and that its bucket changed
// when changed says so (a new key always is).
func (d *daemon) setNextHop(k nhKey, nh nexthop, changed bool) {
	d.nexthops[k] = nh
	b := &d.docBuckets[hopBucket(k)]
	if b.hops == nil {
		b.hops = map[nhKey]struct{}{}
	}
	if _, ok := b.hops[k]; !ok {
		b.hops[k] = struct{}{}
		changed = true
	}
	if changed {
		b.dirty |= dirtyHops
	}
}

// forgetNextHop drops a backend's next hop, and records that its bucket
// changed.
func (d *daemon) forgetNextHop(k nhKey) {
	delete(d.nexthops, k)
	b := &d.docBuckets[hopBucket(k)]
	if _, ok := b.hops[k]; ok {
		delete(b.hops, k)
		b.dirty |= dirtyHops
	}
}

// resetDocBuckets forgets every bucket's content (the registry, rules,
// verdicts or next hops were replaced) and files what is there now.
func (d *daemon) resetDocBuckets() {
	for i := range d.docBuckets {
		v := d.docBuckets[i].version
		d.docBuckets[i] = docBucket{dirty: dirtyAll, version: v + 1}
	}
	for name := range d.reg.backends {
		d.ruleChanged(name)
	}
	for k, p := range d.probes {
		d.setProbe(k, p)
	}
	for k, nh := range d.nexthops {
		d.setNextHop(k, nh, true)
	}
}

// encodeBuckets encodes again the buckets that changed (control
// goroutine); every other bucket costs a flag's test.
func (d *daemon) encodeBuckets() error {
	for i := range d.docBuckets {
		if b := &d.docBuckets[i]; b.dirty != 0 {
			if err := d.encodeBucket(b); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *daemon) encodeBucket(b *docBucket) error {
	if b.dirty&dirtyRules != 0 {
		if err := d.encodeRules(b); err != nil {
			return err
		}
	}
	if b.dirty&dirtyVerdicts != 0 {
		if err := d.encodeVerdicts(b); err != nil {
			return err
		}
	}
	if b.dirty&dirtyHops != 0 {
		if err := d.encodeHops(b); err != nil {
			return err
		}
	}
	b.dirty = 0
	b.version++
	return nil
}

// encodeRules encodes a bucket's rule slots and backend slots, and each
// of its rules' carried failover state not encoded yet (once per
// computation of the rule: ruleRuntime.carry). The rules' section itself
// is not kept: it is written from the carries where it goes
// (writeBucketRules), so they are held once.
func (d *daemon) encodeRules(b *docBucket) error {
	ids, slots := b.ruleIDs[:0], b.slots[:0]
	for name := range b.names {
		if s, ok := d.reg.rules[name]; ok {
			if len(ids) > 0 {
				ids = append(ids, ',')
			}
			ids = append(strconv.AppendQuote(ids, name), ':')
			ids = strconv.AppendUint(ids, uint64(s), 10)
		}
		if m, ok := d.reg.backends[name]; ok {
			if len(slots) > 0 {
				slots = append(slots, ',')
			}
			// Rule names are [a-z0-9-_.]: JSON and Go quote them alike.
			slots = append(strconv.AppendQuote(slots, name), ":{"...)
			n := 0
			for a, slot := range m {
				if n > 0 {
					slots = append(slots, ',')
				}
				n++
				slots = append(a.AppendTo(append(slots, '"')), `":`...)
				slots = strconv.AppendUint(slots, uint64(slot), 10)
			}
			slots = append(slots, '}')
		}
		if rt := d.rules[name]; rt != nil {
			if err := rt.encodeCarry(); err != nil {
				return fmt.Errorf("rule %s: %w", name, err)
			}
		}
	}
	b.ruleIDs, b.slots = ids, slots
	return nil
}

// encodeCarry encodes the rule's failover state as the state document
// carries it, unless carry holds it already: once per computation of the
// rule (a State is never changed once computed).
func (rt *ruleRuntime) encodeCarry() error {
	if rt.prev == nil || rt.carryOf == rt.prev {
		return nil
	}
	c, err := rt.prev.MarshalCarry()
	if err != nil {
		return err
	}
	rt.carry, rt.carryOf = c, rt.prev
	return nil
}

// writeBucketRules writes a bucket's rules, each preceded by a comma
// unless first, and returns whether it wrote none (first still) and the
// bytes written.
func (d *daemon) writeBucketRules(w io.Writer, b *docBucket, first bool) (bool, int, error) {
	n := 0
	write := func(p []byte) {
		m, _ := w.Write(p)
		n += m
	}
	scratch := d.docScratch[:0]
	for name := range b.names {
		rt := d.rules[name]
		if rt == nil {
			continue
		}
		if err := rt.encodeCarry(); err != nil { // done by encodeRules unless computed since
			return first, n, fmt.Errorf("rule %s: %w", name, err)
		}
		scratch = scratch[:0]
		if !first {
			scratch = append(scratch, ',')
		}
		first = false
		scratch = strconv.AppendQuote(append(scratch, `{"name":`...), name)
		scratch = strconv.AppendUint(append(scratch, `,"slot":`...), uint64(rt.slot), 10)
		scratch = strconv.AppendBool(append(scratch, `,"warm":`...), rt.warm.warm)
		if rt.prev != nil {
			scratch = append(scratch, `,"failover":`...)
			write(scratch)
			write(rt.carry)
			scratch = scratch[:0]
		}
		if len(rt.removed) > 0 {
			rs := make([]removedState, 0, len(rt.removed))
			for a, r := range rt.removed {
				rs = append(rs, removedState{Addr: a, At: r.at, Group: r.group})
			}
			c, err := json.Marshal(rs)
			if err != nil {
				return first, n, err
			}
			scratch = append(append(scratch, `,"removed":`...), c...)
		}
		scratch = append(scratch, '}')
		write(scratch)
	}
	d.docScratch = scratch
	return first, n, nil
}

// encodeVerdicts encodes a bucket's verdicts.
func (d *daemon) encodeVerdicts(b *docBucket) error {
	ps := make([]probeState, 0, len(b.probes))
	for k := range b.probes {
		if p, ok := d.probes[k]; ok {
			ps = append(ps, stateOf(k, p))
		}
	}
	verdict := b.verdict[:0]
	if len(ps) > 0 {
		c, err := json.Marshal(ps)
		if err != nil {
			return err
		}
		verdict = append(verdict, c[1:len(c)-1]...) // without the brackets
	}
	b.verdict = verdict
	return nil
}

// encodeHops encodes a bucket's next hops.
func (d *daemon) encodeHops(b *docBucket) error {
	ns := make([]nexthopState, 0, len(b.hops))
	for k := range b.hops {
		nh, ok := d.nexthops[k]
		if !ok {
			continue
		}
		s := nexthopState{Addr: k.addr, Direct: k.direct, NH: nh.nh}
		if nh.err != nil {
			s.Err = nh.err.Error()
		}
		ns = append(ns, s)
	}
	hop := b.hop[:0]
	if len(ns) > 0 {
		c, err := json.Marshal(ns)
		if err != nil {
			return err
		}
		hop = append(hop, c[1:len(c)-1]...)
	}
	b.hop = hop
	return nil
}

// docSections are a bucket's sections, as a bucket or a stored part
// carries them.
type docSections struct {
	ruleIDs, slots, rules, verdict, hop []byte
	// rulesTo writes the rules' section instead of rules, as
	// writeBucketRules does (a bucket in memory).
	rulesTo func(w io.Writer, first bool) (bool, int, error)
}

// docSectionCount is how many sections a bucket has.
const docSectionCount = 5

// bucketSections are a bucket's sections in memory.
func (d *daemon) bucketSections(b *docBucket) docSections {
	return docSections{ruleIDs: b.ruleIDs, slots: b.slots, verdict: b.verdict, hop: b.hop,
		rulesTo: func(w io.Writer, first bool) (bool, int, error) { return d.writeBucketRules(w, b, first) }}
}

// assembleDoc writes a state document from its head (a stateDoc encoded
// without the sections below) and the buckets' sections: the one way a
// document is made, for an offer as for a restore from the fd store's
// parts.
func assembleDoc(w io.Writer, head []byte, buckets []docSections) error {
	if len(head) < 2 || head[len(head)-1] != '}' {
		return fmt.Errorf("state document: a head of %d bytes is no JSON object", len(head))
	}
	join := func(open string, section func(docSections) []byte) {
		io.WriteString(w, open)
		first := true
		for _, s := range buckets {
			if b := section(s); len(b) > 0 {
				if !first {
					io.WriteString(w, ",")
				}
				first = false
				w.Write(b)
			}
		}
	}
	w.Write(head[:len(head)-1]) // without its closing brace
	join(`,"rule_slots":{`, func(s docSections) []byte { return s.ruleIDs })
	join(`},"probes":[`, func(s docSections) []byte { return s.verdict })
	join(`],"next_hops":[`, func(s docSections) []byte { return s.hop })
	join(`],"backend_slots":{`, func(s docSections) []byte { return s.slots })
	io.WriteString(w, `},"rules":[`)
	first := true
	for _, s := range buckets {
		switch {
		case s.rulesTo != nil:
			var err error
			if first, _, err = s.rulesTo(w, first); err != nil {
				return err
			}
		case len(s.rules) > 0:
			if !first {
				io.WriteString(w, ",")
			}
			first = false
			w.Write(s.rules)
		}
	}
	_, err := io.WriteString(w, "]}")
	return err
}

// stateHead encodes the state document's head: everything but the
// buckets' sections (omitempty leaves them out),
// a few hundred bytes whatever the number of rules.
func (d *daemon) stateHead(stop *storedStop) ([]byte, error) {
	doc := stateDoc{Stopped: stop,
		Version: stateVersion, Build: buildID(), ClockBase: d.clock.Base(), Seed: d.seed,
		Reloads: [2]uint64{d.reloadsOK.Load(), d.reloadsRejected.Load()},
	}
	if d.engine != nil { // nil in the tests of the control plane alone
		doc.Engine = d.engine.State()
	}
	if b := d.bgp.Load(); b != nil && stop == nil {
		doc.BFD = b.speaker.BFDExport()
	}
	return json.Marshal(doc)
}

// sealedMemfd writes what write writes into a new memfd through buf and
// seals it; the caller closes it. It returns the bytes written.
func sealedMemfd(name string, buf *bufio.Writer, write func(w *bufio.Writer) error) (fd, size int, err error) {
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, 0, fmt.Errorf("memfd %s: %w", name, err)
	}
	out := &fdWriter{fd: fd}
	buf.Reset(out)
	defer buf.Reset(nil) // the memfd is the caller's now
	err = write(buf)
	if err == nil {
		err = buf.Flush()
	}
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL)
	}
	if err != nil {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("memfd %s: %w", name, err)
	}
	return fd, out.n, nil
}
