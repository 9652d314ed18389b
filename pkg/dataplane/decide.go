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
}

// Decision is the outcome of Decide for one packet.
type Decision struct {
	Verdict Verdict
	Reason  Reason // why, when Verdict is Drop or Pass
	Rule    uint16 // rule slot (valid for Tx)
	Backend uint32 // rule-scoped backend slot (valid for Tx)
	Hash    uint64 // the selection hash: GUE derives its UDP source port from it
	Tracked bool   // an existing conntrack entry decided (Tx)
}

func drop(r Reason) Decision { return Decision{Verdict: Drop, Reason: r} }

// Decide places one parsed packet: rule match, session-affinity keys,
// connection tracking, the eligible set's Maglev table, and the insert of a
// new entry. It allocates nothing and takes no lock; q must be the calling
// worker's own FlowTables and now the worker's clock reading for this batch.
func (s *Snapshot) Decide(m *packet.Meta, q *FlowTables, now conntrack.Time) Decision {
	if m.Proto == packet.ProtoICMP || m.Proto == packet.ProtoICMPv6 {
		if m.Frag != packet.FragNonFirst {
			if m.HasInner {
				return s.decideICMPError(m, q, now)
			}
			if isEchoRequest(m) && m.Frag == packet.FragNone && s.matcher.IsVIP(&m.Dst) {
				return Decision{Verdict: Reply}
			}
		}
	}
	hasPort := m.Frag != packet.FragNonFirst && (m.Proto == packet.ProtoTCP || m.Proto == packet.ProtoUDP)
	mi := s.matcher.Match(&m.Dst, m.Proto, m.DstPort, hasPort)
	if mi < 0 {
		if m.Proto == packet.ProtoICMP || m.Proto == packet.ProtoICMPv6 {
			return drop(ReasonICMPUnsupported)
		}
		return drop(ReasonNoRule)
	}
	slot := s.ruleOfMatch[mi]
	r := &s.Rules[slot]
	if r.FragmentTracking && m.Frag != packet.FragNone && q.Fragments != nil {
		return s.decideFragment(r, slot, m, q, now)
	}
	return s.decideFlow(r, slot, m, q, now)
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
	d := Decision{}
	if m.Frag == packet.FragFirst {
		whole := *m
		whole.Frag = packet.FragNone
		d = s.decideFlow(r, slot, &whole, q, now)
	} else {
		d = s.decideFlow(r, slot, m, q, now)
	}
	if d.Verdict == Tx {
		q.Fragments.Set(&fk, slot, conntrack.Value{Backend: d.Backend, RuleGen: r.FlushGen, BackendGen: r.Backends[d.Backend].Stamp()}, now, FragmentTTL)
	}
	return d
}

// isNewConnection applies DESIGN §3 "New or existing": a TCP SYN without
// ACK re-selects under PER_CONNECTION, and under PER_SESSION with the
// 5-tuple affinities; otherwise it is looked up like any packet.
func isNewConnection(r *Rule, m *packet.Meta) bool {
	if m.Proto != packet.ProtoTCP || m.Frag == packet.FragNonFirst {
		return false
	}
	if m.TCPFlags&(packet.TCPFlagSYN|packet.TCPFlagACK) != packet.TCPFlagSYN {
		return false
	}
	return r.Mode == hash.PerConnection || r.Affinity == hash.AffinityNone || r.Affinity == hash.AffinityClientIPPortProto
}

func isSYN(m *packet.Meta) bool {
	return m.Proto == packet.ProtoTCP && m.Frag != packet.FragNonFirst &&
		m.TCPFlags&(packet.TCPFlagSYN|packet.TCPFlagACK) == packet.TCPFlagSYN
}

// decideFlow is the core: tracked entry if valid, else Maglev over the
// eligible set, then record the choice when the flow is trackable.
func (s *Snapshot) decideFlow(r *Rule, slot uint16, m *packet.Meta, q *FlowTables, now conntrack.Time) Decision {
	var trk hash.Key // set in place: a 40-byte result by value costs a store-forwarding stall
	trackable := trk.SetTracking(m, r.Affinity, r.Mode)
	syn := isSYN(m)
	// PER_SESSION 2- and 3-tuple sessions span connections that RSS spreads
	// over queues, so they live in the shared table.
	shared := trackable && r.Mode == hash.PerSession && trk.Kind != hash.Tuple5 && q.Sessions != nil
	var e *conntrack.Entry
	if trackable && !isNewConnection(r, m) {
		if shared {
			if v, ok := q.Sessions.Get(&trk, slot, now, r.Idle); ok && r.valid(v, m.Proto, now) {
				return Decision{Verdict: Tx, Rule: slot, Backend: v.Backend, Tracked: true}
			}
		} else if e = q.Conntrack.Lookup(&trk, slot, now, r.Idle, syn); e != nil {
			if v := e.Value(); r.valid(v, m.Proto, now) {
				return Decision{Verdict: Tx, Rule: slot, Backend: v.Backend, Tracked: true}
			}
		}
	}
	h := hash.SelectionHash(m, r.Affinity, s.Seed)
	id, ok := r.zoneTable(&m.Src).Lookup(h)
	if !ok {
		return drop(ReasonNoBackend)
	}
	if trackable {
		v := conntrack.Value{Backend: id, RuleGen: r.FlushGen, BackendGen: r.Backends[id].Stamp()}
		switch {
		case shared:
			q.Sessions.Set(&trk, slot, v, now, r.Idle)
		case e != nil && !syn:
			q.Conntrack.Reselect(e, v)
		default:
			q.Conntrack.Insert(&trk, slot, v, now, r.Idle, syn)
		}
	}
	return Decision{Verdict: Tx, Rule: slot, Backend: id, Hash: h}
}

// decideICMPError routes an ICMP or ICMPv6 error to the backend of the
// flow it quotes, so path-MTU discovery works through the appliance. The
// quoted packet is the backend's reply (VIP → client); reversed, it is the
// client's flow. The error never creates or confirms an entry.
func (s *Snapshot) decideICMPError(m *packet.Meta, q *FlowTables, now conntrack.Time) Decision {
	flow := packet.Meta{Family: m.Family}
	flow.Src, flow.Dst = m.Inner.Dst, m.Inner.Src
	flow.SrcPort, flow.DstPort = m.Inner.DstPort, m.Inner.SrcPort
	flow.Proto = m.Inner.Proto
	hasPort := flow.Proto == packet.ProtoTCP || flow.Proto == packet.ProtoUDP
	if flow.Proto == packet.ProtoTCP {
		flow.TCPFlags = packet.TCPFlagACK // an established segment: looked up, never new
	}
	mi := s.matcher.Match(&flow.Dst, flow.Proto, flow.DstPort, hasPort)
	if mi < 0 {
		return drop(ReasonICMPNotForFlow)
	}
	slot := s.ruleOfMatch[mi]
	r := &s.Rules[slot]
	var trk hash.Key
	if trk.SetTracking(&flow, r.Affinity, r.Mode) {
		if r.Mode == hash.PerSession && trk.Kind != hash.Tuple5 && q.Sessions != nil {
			if v, ok := q.Sessions.Get(&trk, slot, now, 0); ok && r.valid(v, flow.Proto, now) {
				return Decision{Verdict: Tx, Rule: slot, Backend: v.Backend, Tracked: true}
			}
		} else if e := q.Conntrack.Lookup(&trk, slot, now, r.Idle, true); e != nil {
			// syn = true: an error message is no proof the flow is
			// established, so it must not confirm an unconfirmed entry.
			if v := e.Value(); r.valid(v, flow.Proto, now) {
				return Decision{Verdict: Tx, Rule: slot, Backend: v.Backend, Tracked: true}
			}
		}
	}
	h := hash.SelectionHash(&flow, r.Affinity, s.Seed)
	id, ok := r.zoneTable(&flow.Src).Lookup(h)
	if !ok {
		return drop(ReasonNoBackend)
	}
	return Decision{Verdict: Tx, Rule: slot, Backend: id, Hash: h}
}

func isEchoRequest(m *packet.Meta) bool {
	if m.Proto == packet.ProtoICMP {
		return m.ICMPType == 8 && m.ICMPCode == 0
	}
	return m.ICMPType == 128 && m.ICMPCode == 0
}
