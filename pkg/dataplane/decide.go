package dataplane

import (
	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

// FragmentTTL is how long fragment tracking remembers a datagram's backend.
// Fragments of one datagram arrive within milliseconds of each other; the
// kernel's own reassembly timeout (net.ipv4.ipfrag_time) is 30 s, but a
// datagram still incomplete after a few seconds is lost anyway, and the IP
// ID space (16 bits in IPv4) wraps quickly at high rates.
const FragmentTTL = 5 * conntrack.TicksPerSecond

// FlowTables is the state one worker owns: its flow table, and the tables it
// shares with the other workers.
type FlowTables struct {
	Conntrack *conntrack.Table  // this queue's flows; only this worker touches it
	Sessions  *conntrack.Shared // PER_SESSION 2- and 3-tuple sessions, shared by all queues
	Fragments *conntrack.Shared // fragment tracking, shared by all queues
	// Peers holds the exceptions fleet peers sent (pkg/fleet): consulted
	// when this queue's table, or the session table, has no entry for a
	// flow, before the Maglev table places it. Nil without [fleet].
	Peers *conntrack.Shared
}

// Decision is the outcome of Decide for one packet.
type Decision struct {
	Verdict Verdict
	Reason  Reason // why, when Verdict is Drop or Pass
	Rule    uint16 // rule slot (valid for Tx, and for a no-backend drop)
	Backend uint32 // rule-scoped backend slot (valid for Tx)
	Hash    uint64 // the selection hash: GUE derives its UDP source port from it
	Tracked bool   // an existing conntrack entry decided (Tx)
	New     bool   // a new connection: a trackable flow placed by the Maglev table (Tx)
	Peer    bool   // the entry came from a fleet peer (Tracked too)
	// Denied: a source-range drop by the rule in Rule (an echo request no
	// rule of its VIP admits is a source-range drop without a rule).
	Denied bool
}

func drop(r Reason) Decision { return Decision{Verdict: Drop, Reason: r} }

// path is what the second half of a decision (finish) has to do.
type path uint8

const (
	pathDone     path = iota // decided by prepare: flow.done
	pathFlow                 // decideFlow with the prepared key and probe
	pathFragment             // decideFragment (fragment tracking)
	pathICMPErr              // decideICMPError
)

// flow is one packet's decision between its two halves: prepare (rule,
// tracking key, its conntrack Probe, and the selection hash when the
// packet will need one) and finish (the table lookups and updates, in
// packet order). The worker runs prepare over a whole batch and prefetches
// what finish will read before it finishes any packet (see Worker.Step);
// Decide runs the two back to back. Either way the key is hashed once.
type flow struct {
	key    hash.Key        // tracking key; zero when not trackable
	probe  conntrack.Probe // key's place in the queue's table (local)
	hash   uint64          // selection hash, when hashed
	slot   uint16          // rule slot
	path   path
	done   Verdict // pathDone's decision: Reply, or Drop for reason
	reason Reason
	denied bool // pathDone: rule slot's source ranges refused the packet

	trackable bool // the rule tracks this packet
	shared    bool // in the shared PER_SESSION table, not the queue's own
	local     bool // in the queue's own table: probe is set
	lookup    bool // an entry, if valid, decides (false: a SYN that re-selects)
	syn       bool // a TCP SYN without ACK
	hashed    bool // hash holds the selection hash
}

// Decide places one parsed packet: rule match, session-affinity keys,
// connection tracking, the eligible set's Maglev table, and the insert of a
// new entry. It allocates nothing and takes no lock; q must be the calling
// worker's own FlowTables and now the worker's clock reading for this batch.
func (s *Snapshot) Decide(m *packet.Meta, q *FlowTables, now conntrack.Time) Decision {
	var f flow
	s.prepare(m, q, &f)
	if f.path == pathFlow { // the common case, without finish's frame
		return s.decideFlow(s.Rules[f.slot], m, q, now, &f)
	}
	return s.finish(m, q, now, &f)
}

// prepare is the first half of Decide: everything that reads no
// conntrack state. f must be zero or hold only a previous packet's flow.
func (s *Snapshot) prepare(m *packet.Meta, q *FlowTables, f *flow) {
	f.path, f.denied = pathDone, false
	icmp := m.Proto == packet.ProtoICMP || m.Proto == packet.ProtoICMPv6
	if icmp && m.Frag != packet.FragNonFirst && m.HasInner {
		f.path = pathICMPErr
		return
	}
	hasPort := m.Frag != packet.FragNonFirst && (m.Proto == packet.ProtoTCP || m.Proto == packet.ProtoUDP)
	mi := s.matcher.Match(&m.Dst, m.Proto, m.DstPort, hasPort)
	if mi < 0 {
		switch {
		case icmp && m.Frag == packet.FragNone && isEchoRequest(m) && s.matcher.IsVIP(&m.Dst):
			// Only a VIP without an L3_DEFAULT rule answers echoes itself;
			// an L3_DEFAULT rule matched above sends them to its backends.
			// Only sources some rule of the VIP admits get an answer.
			f.done = Reply
			if !s.matcher.answersEcho(&m.Dst, &m.Src) {
				f.done, f.reason = Drop, ReasonSourceRange
			}
		case icmp:
			f.done, f.reason = Drop, ReasonICMPUnsupported
		default:
			f.done, f.reason = Drop, ReasonNoRule
		}
		return
	}
	slot := s.ruleOfMatch[mi]
	r := s.Rules[slot]
	if r.Sources != nil && !r.Sources.Admits(&m.Src) {
		// Before any table is touched: a denied flood costs one trie walk.
		// (The nil test first: a rule without ranges pays no call.)
		f.done, f.reason, f.slot, f.denied = Drop, ReasonSourceRange, slot, true
		return
	}
	if r.FragmentTracking && m.Frag != packet.FragNone && q != nil && q.Fragments != nil {
		f.path, f.slot = pathFragment, slot
		return
	}
	s.prepareFlow(r, slot, m, q, f)
}

// prepareFlow builds m's tracking key under rule r and decides which table
// holds it and whether an entry may decide: docs/design.md#new-or-existing,
// the one place the SYN test is made. A packet that will be placed by Maglev
// whatever the tables hold gets its selection hash now. q may be nil
// (Explain): then nothing is located.
func (s *Snapshot) prepareFlow(r *Rule, slot uint16, m *packet.Meta, q *FlowTables, f *flow) {
	f.path, f.slot = pathFlow, slot
	f.trackable = f.key.SetTracking(m, r.Affinity, r.Mode)
	f.syn = m.Proto == packet.ProtoTCP && m.Frag != packet.FragNonFirst &&
		m.TCPFlags&(packet.TCPFlagSYN|packet.TCPFlagACK) == packet.TCPFlagSYN
	// A SYN re-selects under PER_CONNECTION, and under PER_SESSION with the
	// 5-tuple affinities; otherwise it is looked up like any packet.
	reselect := f.syn && (r.Mode == hash.PerConnection || r.Affinity == hash.AffinityNone || r.Affinity == hash.AffinityClientIPPortProto)
	f.lookup = f.trackable && !reselect
	// PER_SESSION 2- and 3-tuple sessions span connections that RSS spreads
	// over queues, so they live in the shared table.
	f.shared = f.trackable && r.Mode == hash.PerSession && f.key.Kind != hash.Tuple5 && (q == nil || q.Sessions != nil)
	f.local = f.trackable && !f.shared && q != nil
	if f.local {
		f.probe = q.Conntrack.Locate(&f.key, slot)
	}
	f.hashed = !f.lookup
	if f.hashed {
		f.hash = hash.SelectionHash(m, r.Affinity, s.Seed)
	}
}

// finish is the second half of Decide, run in packet order.
func (s *Snapshot) finish(m *packet.Meta, q *FlowTables, now conntrack.Time, f *flow) Decision {
	switch f.path {
	case pathFlow:
		return s.decideFlow(s.Rules[f.slot], m, q, now, f)
	case pathFragment:
		return s.decideFragment(s.Rules[f.slot], f.slot, m, q, now)
	case pathICMPErr:
		return s.decideICMPError(m, q, now)
	}
	if f.denied {
		return Decision{Verdict: Drop, Reason: ReasonSourceRange, Rule: f.slot, Denied: true}
	}
	return Decision{Verdict: f.done, Reason: f.reason}
}

// decideFragment keeps every fragment of a datagram on the backend of the
// first fragment to arrive, in any arrival order: a first fragment that
// arrives first is placed as if unfragmented (its ports are known), a
// non-first fragment that arrives first is placed by its 3-tuple, and the
// choice is remembered under (src, dst, proto, IP ID) for the others.
func (s *Snapshot) decideFragment(r *Rule, slot uint16, m *packet.Meta, q *FlowTables, now conntrack.Time) Decision {
	fk := conntrack.FragmentKey(m.Src, m.Dst, m.Proto, m.FragID)
	if v, ok := q.Fragments.Get(&fk, slot, now, 0); ok && r.valid(v, m.Proto, now) {
		return Decision{Verdict: Tx, Rule: slot, Backend: v.Backend, Tracked: true}
	}
	var f flow
	d := Decision{}
	if m.Frag == packet.FragFirst {
		whole := *m
		whole.Frag = packet.FragNone
		s.prepareFlow(r, slot, &whole, q, &f)
		d = s.decideFlow(r, &whole, q, now, &f)
	} else {
		s.prepareFlow(r, slot, m, q, &f)
		d = s.decideFlow(r, m, q, now, &f)
	}
	if d.Verdict == Tx {
		q.Fragments.Set(&fk, slot, conntrack.Value{Backend: d.Backend, RuleGen: r.FlushGen, BackendGen: r.Backends[d.Backend].Stamp()}, now, FragmentTTL)
	}
	return d
}

// decideFlow is the core: tracked entry if valid, else Maglev over the
// eligible set, then record the choice when the flow is trackable. It is
// decideFlowAs for a packet's own flow, inlined, so the packet path pays
// nothing for decideFlowAs's two other uses.
func (s *Snapshot) decideFlow(r *Rule, m *packet.Meta, q *FlowTables, now conntrack.Time, f *flow) Decision {
	return s.decideFlowAs(r, m, q, now, f, false, nil)
}

// decideFlowAs is decideFlow for the flow an ICMP error quotes (icmpErr:
// its entry is looked up without confirming it or refreshing a shared
// session, and nothing is created) and for Explain (a non-nil trace takes
// the entry from its finder, records each step, and changes nothing).
func (s *Snapshot) decideFlowAs(r *Rule, m *packet.Meta, q *FlowTables, now conntrack.Time, f *flow, icmpErr bool, tr *trace) Decision {
	slot := f.slot
	var e *conntrack.Entry
	switch {
	case tr != nil:
		if tr.entry(r, f, m.Proto, now) && f.lookup {
			return Decision{Verdict: Tx, Rule: slot, Backend: tr.x.Entry.Backend, Tracked: true}
		}
	case !f.lookup:
	case f.shared:
		idle := r.Idle
		if icmpErr {
			idle = 0 // an error does not keep a session alive
		}
		v, ok := q.Sessions.Get(&f.key, slot, now, idle)
		if ok && r.valid(v, m.Proto, now) {
			return Decision{Verdict: Tx, Rule: slot, Backend: v.Backend, Tracked: true}
		}
		if !ok && q.Peers != nil {
			if d, ok := s.fromPeer(r, m, q, now, f, icmpErr); ok {
				return d
			}
		}
	default:
		// An error message is no proof the flow is established, so it must
		// not confirm an unconfirmed entry (syn = true).
		if e = q.Conntrack.LookupAt(f.probe, &f.key, slot, now, r.Idle, f.syn || icmpErr); e != nil {
			if !icmpErr && closes(m) {
				q.Conntrack.CloseAt(f.probe, &f.key, slot)
			}
			if v := e.Value(); r.valid(v, m.Proto, now) {
				return Decision{Verdict: Tx, Rule: slot, Backend: v.Backend, Tracked: true}
			}
		} else if q.Peers != nil {
			if d, ok := s.fromPeer(r, m, q, now, f, icmpErr); ok {
				return d
			}
		}
	}
	h := f.hash
	if !f.hashed {
		h = hash.SelectionHash(m, r.Affinity, s.Seed)
	}
	id, ok := r.zoneTable(&m.Src).Lookup(h)
	if !ok {
		return Decision{Verdict: Drop, Reason: ReasonNoBackend, Rule: slot}
	}
	isNew := f.trackable && !icmpErr
	if isNew && tr == nil {
		v := conntrack.Value{Backend: id, RuleGen: r.FlushGen, BackendGen: r.Backends[id].Stamp()}
		switch {
		case f.shared:
			// The queue's new-entry rate covers the sessions it makes too.
			if q.Conntrack == nil || q.Conntrack.AllowNew(now) {
				q.Sessions.Set(&f.key, slot, v, now, r.Idle)
			}
		case e != nil && !f.syn:
			q.Conntrack.Reselect(e, v)
		default:
			q.Conntrack.InsertAt(f.probe, &f.key, slot, v, now, r.Idle, f.syn)
		}
		if f.local && closes(m) {
			q.Conntrack.CloseAt(f.probe, &f.key, slot)
		}
	}
	return Decision{Verdict: Tx, Rule: slot, Backend: id, Hash: h, New: isNew}
}

// fromPeer decides a flow this queue (or the session table) has no entry
// for by the entry a fleet peer sent, if there is a valid one: the flow
// moved here from the appliance that placed it, and its backend is not
// what the Maglev table would pick. The entry is copied into the queue's
// table (or the session table) marked as from a peer and as an
// exception, so the flow's next packets hit locally and this appliance's
// scan refreshes it to the other peers from now on (the scan clears the
// exception mark if the table picks the same backend after all). An ICMP
// error copies nothing.
func (s *Snapshot) fromPeer(r *Rule, m *packet.Meta, q *FlowTables, now conntrack.Time, f *flow, icmpErr bool) (Decision, bool) {
	v, ok := q.Peers.Get(&f.key, f.slot, now, 0)
	if !ok || !r.valid(v, m.Proto, now) {
		return Decision{}, false
	}
	if !icmpErr {
		switch {
		case f.shared:
			if q.Conntrack == nil || q.Conntrack.AllowNew(now) {
				q.Sessions.Set(&f.key, f.slot, v, now, r.Idle)
			}
		default:
			if _, ok := q.Conntrack.InsertAt(f.probe, &f.key, f.slot, v, now, r.Idle, f.syn); ok {
				q.Conntrack.MarkAt(f.probe, &f.key, f.slot, conntrack.MarkException|conntrack.MarkFromPeer)
				if closes(m) {
					q.Conntrack.CloseAt(f.probe, &f.key, f.slot)
				}
			}
		}
	}
	return Decision{Verdict: Tx, Rule: f.slot, Backend: v.Backend, Tracked: true, Peer: true}, true
}

// closes reports whether m ends its TCP connection's active life (a FIN
// or RST: IPVS's active/inactive split).
func closes(m *packet.Meta) bool {
	return m.Proto == packet.ProtoTCP && m.Frag != packet.FragNonFirst && m.TCPFlags&(packet.TCPFlagFIN|packet.TCPFlagRST) != 0
}

// decideICMPError routes an ICMP or ICMPv6 error to the backend of the
// flow it quotes, so path-MTU discovery works through the appliance. The
// quoted packet is the backend's reply (VIP → client); reversed, it is the
// client's flow, which decideFlow looks up as an established segment.
// The error never creates or confirms an entry.
func (s *Snapshot) decideICMPError(m *packet.Meta, q *FlowTables, now conntrack.Time) Decision {
	flowMeta := packet.Meta{Family: m.Family}
	flowMeta.Src, flowMeta.Dst = m.Inner.Dst, m.Inner.Src
	flowMeta.SrcPort, flowMeta.DstPort = m.Inner.DstPort, m.Inner.SrcPort
	flowMeta.Proto = m.Inner.Proto
	hasPort := flowMeta.Proto == packet.ProtoTCP || flowMeta.Proto == packet.ProtoUDP
	if flowMeta.Proto == packet.ProtoTCP {
		flowMeta.TCPFlags = packet.TCPFlagACK // an established segment: looked up, never new
	}
	mi := s.matcher.Match(&flowMeta.Dst, flowMeta.Proto, flowMeta.DstPort, hasPort)
	if mi < 0 {
		return drop(ReasonICMPNotForFlow)
	}
	slot := s.ruleOfMatch[mi]
	r := s.Rules[slot]
	if r.Sources != nil && !r.Sources.Admits(&flowMeta.Src) {
		// The error is about a client the rule does not admit (its source
		// is a router's): no flow of it can exist.
		return Decision{Verdict: Drop, Reason: ReasonSourceRange, Rule: slot, Denied: true}
	}
	var f flow
	s.prepareFlow(r, slot, &flowMeta, q, &f)
	return s.decideFlowAs(r, &flowMeta, q, now, &f, true, nil)
}

func isEchoRequest(m *packet.Meta) bool {
	if m.Proto == packet.ProtoICMP {
		return m.ICMPType == 8 && m.ICMPCode == 0
	}
	return m.ICMPType == 128 && m.ICMPCode == 0
}
