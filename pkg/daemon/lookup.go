package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/packet"
)

// gotEntry is one queue's answer to a lookup's key.
type gotEntry struct {
	rec conntrack.Record
	ok  bool
	err error
}

// Lookup implements control.API.
func (o *ops) Lookup(ctx context.Context, q control.LookupQuery) (*control.LookupResult, error) {
	e := o.d.engine
	if e == nil {
		return nil, errors.New("lookup: the data plane is not running")
	}
	snap := e.Snapshot()
	if snap == nil {
		return nil, errors.New("lookup: nothing published yet")
	}
	st := o.d.Status()
	// The rule asked about, if any, gives the defaults (VIP, protocol,
	// port); the data plane then finds the rule the packet matches.
	var asked *config.Rule
	if q.Rule != "" {
		rs := st.rule(q.Rule)
		if rs == nil || int(rs.Slot) >= len(snap.Rules) {
			if rules := st.serviceRules(q.Rule); len(rules) > 0 { // services.go
				return nil, control.BadRequest("lookup: %q is a backend service: name one of its rules (%s)", q.Rule, strings.Join(rules, ", "))
			}
			return nil, control.BadRequest("lookup: no rule %q", q.Rule)
		}
		asked = rs.Rule
	}
	m, err := lookupMeta(asked, q)
	if err != nil {
		return nil, control.BadRequest("lookup: %v", err)
	}
	checked := true
	var ferr error
	// Where the entry came from: a fleet peer's copy (peerKey set), or a
	// queue's entry made from one (fromPeer).
	var fromPeer, peerCopy bool
	var peerKey hash.Key
	var peerRule uint16
	find := func(k *hash.Key, rule uint16, shared bool) (conntrack.Value, bool) {
		now := conntrack.Now(o.d.clock)
		// A worker that finds no entry of its own (nor a session) consults
		// the peers' exceptions (fleet.go): so does the lookup.
		fromPeers := func() (conntrack.Value, bool) {
			if peers := e.Peers(); peers != nil {
				if v, ok := peers.Get(k, rule, now, 0); ok {
					fromPeer, peerCopy, peerKey, peerRule = true, true, *k, rule
					return v, true
				}
			}
			return conntrack.Value{}, false
		}
		if shared {
			sessions, _ := e.Shared()
			if v, ok := sessions.Get(k, rule, now, 0); ok { // 0: no refresh, a read only
				return v, true
			}
			return fromPeers()
		}
		// The queue a flow lands on is not known here: ask every queue's
		// worker for the one key (a single probe each, not a walk), all at
		// once. A worker answers on its next loop, up to its idle wait
		// (1 ms) away: asked one after another, an appliance of 8 idle
		// queues would answer in up to 8 ms.
		queues := e.Stats()
		got := make([]gotEntry, len(queues))
		var wg sync.WaitGroup
		for i, qs := range queues {
			wg.Go(func() { got[i].rec, got[i].ok, got[i].err = qs.Conntrack.Get(ctx, *k, rule) })
		}
		wg.Wait()
		for _, g := range got { // the first queue's entry, as before
			if g.err != nil {
				ferr = g.err
				checked = false
				continue
			}
			if g.ok {
				fromPeer = g.rec.FromPeer
				return g.rec.Value, true
			}
		}
		return fromPeers()
	}
	x := snap.Explain(m, conntrack.Now(o.d.clock), find)
	if ferr != nil && ctx.Err() != nil {
		return nil, ferr
	}
	var rs *ruleStatus
	if x.Matched {
		rs = st.slot(x.Rule)
	}
	res := explainLookup(snap, rs, q.Rule, m, &x)
	unmatchedLookup(res, st.Unmatched, snap, m, &x)
	res.EntryChecked = checked || x.EntryFound
	if x.EntryFound && fromPeer {
		res.EntryFromPeer = true
		what := "made from a fleet peer's exception when the flow moved here"
		if peerCopy {
			res.EntryPeer = o.d.fleetHolder(ctx, peerRule, peerKey)
			what = "a fleet peer's exception (the flow would move here from the appliance that placed it)"
			if res.EntryPeer != "" {
				what = fmt.Sprintf("an exception fleet peer %s sent (the flow would move here from it)", res.EntryPeer)
			}
		}
		res.Why += "; the entry is " + what
	}
	return res, nil
}

// rule returns the published status of the rule called name, or nil.
func (st *publishedStatus) rule(name string) *ruleStatus {
	for i := range st.Rules {
		if st.Rules[i].Name == name {
			return st.Rules[i]
		}
	}
	return nil
}

// slot returns the published status of the rule in slot s, or nil.
func (st *publishedStatus) slot(s uint16) *ruleStatus {
	for i := range st.Rules {
		if st.Rules[i].Slot == s {
			return st.Rules[i]
		}
	}
	return nil
}

// lookupMeta builds the packet a lookup asks about. r, the rule asked
// about, gives the defaults; without one, dst is required, the protocol is
// TCP and TCP or UDP need dst_port.
func lookupMeta(r *config.Rule, q control.LookupQuery) (*packet.Meta, error) {
	m := &packet.Meta{}
	proto := packet.ProtoTCP
	if r != nil {
		proto = ipProtocols.of(r.Protocol)
	}
	if q.Proto != "" {
		p, err := packet.ParseProto(q.Proto)
		if err != nil {
			return nil, err
		}
		proto = p
	}
	if proto == packet.ProtoICMP || proto == packet.ProtoICMPv6 {
		return nil, errors.New("ICMP is hashed per packet and ICMP errors follow the flow they quote: look up that flow instead")
	}
	hasPorts := proto == packet.ProtoTCP || proto == packet.ProtoUDP
	var src netip.Addr
	var sport uint16
	if ap, err := netip.ParseAddrPort(q.Src); err == nil {
		src, sport = ap.Addr(), ap.Port()
	} else if a, err2 := netip.ParseAddr(q.Src); err2 == nil {
		if hasPorts {
			return nil, fmt.Errorf("src %q: a %s flow needs ADDR:PORT", q.Src, packet.ProtoName(proto))
		}
		src = a
	} else {
		return nil, fmt.Errorf("src %q: want ADDR:PORT (e.g. 198.51.100.7:40000 or [2001:db8::7]:40000)", q.Src)
	}
	var dst netip.Addr
	if r != nil {
		dst = r.VIP
	} else if q.Dst == "" {
		return nil, errors.New("give the rule or dst (the VIP)")
	}
	if q.Dst != "" {
		a, err := netip.ParseAddr(q.Dst)
		if err != nil {
			return nil, fmt.Errorf("dst %q is not an IP address", q.Dst)
		}
		dst = a
	}
	src, dst = src.Unmap(), dst.Unmap()
	if src.Is4() != dst.Is4() {
		return nil, fmt.Errorf("src %s and dst %s are of different IP versions", src, dst)
	}
	dport := uint16(q.DstPort)
	if hasPorts && q.DstPort == 0 {
		switch {
		case r == nil:
			return nil, fmt.Errorf("a %s flow needs dst_port (or give the rule, whose first port is the default)", packet.ProtoName(proto))
		case r.Ports.All || len(r.Ports.Ranges) == 0:
			return nil, fmt.Errorf("rule %s serves every port: give dst_port", r.Name)
		}
		dport = r.Ports.Ranges[0].First
	}
	m.Family = packet.IPv6
	if src.Is4() {
		m.Family = packet.IPv4
	}
	m.Src, m.Dst, m.Proto = src.As16(), dst.As16(), proto
	if hasPorts {
		m.SrcPort, m.DstPort = sport, dport
	}
	if proto == packet.ProtoTCP {
		m.TCPFlags = packet.TCPFlagACK
		if q.SYN {
			m.TCPFlags = packet.TCPFlagSYN
		}
	}
	return m, nil
}

// explainLookup turns the data plane's explanation into the lookup answer.
// rs is the published status of the rule the packet matched (nil: none),
// asked the rule the question named ("" when it named none).
func explainLookup(snap *dataplane.Snapshot, rs *ruleStatus, asked string, m *packet.Meta, x *dataplane.Explanation) *control.LookupResult {
	flow := hash.Key{Src: m.Src, Dst: m.Dst, SrcPort: m.SrcPort, DstPort: m.DstPort, Proto: m.Proto, Kind: hash.Tuple5}
	if m.Proto != packet.ProtoTCP && m.Proto != packet.ProtoUDP {
		flow.Kind = hash.Tuple3
	}
	res := &control.LookupResult{Flow: flow.String(), Verdict: "DROP"}
	if m.Proto == packet.ProtoTCP {
		res.Flow += map[bool]string{true: " (SYN)", false: " (established)"}[m.TCPFlags&packet.TCPFlagSYN != 0]
	}
	if !x.Matched || rs == nil {
		// The XDP program redirects exactly the rules' VIP, protocol and
		// port set to xlb: everything else goes to the kernel's stack.
		res.Verdict, res.Why = "PASS", "no forwarding rule matches this destination, protocol and port: the XDP program passes the packet to the appliance's own network stack"
		if asked != "" {
			res.Why = fmt.Sprintf("the flow does not match rule %s, nor any other: the XDP program passes it to the appliance's own network stack", asked)
		}
		return res
	}
	res.Rule, res.Tier, res.Eligible = rs.Name, rs.Tier, rs.Eligible
	if rs.Rule != nil {
		res.Service = rs.Rule.Service
	}
	defer func() {
		if asked != "" && asked != rs.Name {
			res.Why = fmt.Sprintf("the flow matches rule %s, not %s: %s", rs.Name, asked, res.Why)
		}
	}()
	r := snap.Rules[x.Rule]
	if x.Decision.Reason == dataplane.ReasonSourceRange {
		res.Why = fmt.Sprintf("the source %s is outside the rule's source_ranges (%d prefixes): dropped before any table is looked at (%s)",
			netip.AddrFrom16(m.Src).Unmap(), len(r.Sources.Prefixes()), x.Decision.Reason)
		return res
	}
	name := func(id uint32) string {
		if int(id) < len(r.Backends) && r.Backends[id].Present {
			return r.Backends[id].Name
		}
		return fmt.Sprintf("slot %d", id)
	}
	res.SelectionKey = x.Selection.String()
	res.SelectionHash = fmt.Sprintf("%#016x", x.Hash)
	res.MaglevSlot = x.Slot
	if x.MaglevOK {
		res.MaglevBackend = name(x.MaglevBackend)
	}
	res.Trackable, res.SharedTable, res.NewConnection = x.Trackable, x.Shared, x.NewConnection
	if x.Trackable {
		res.TrackingKey = x.Tracking.String()
	}
	res.EntryFound, res.EntryValid = x.EntryFound, x.EntryValid
	if x.EntryFound {
		res.EntryBackend = name(x.Entry.Backend)
	}
	maglev := fmt.Sprintf("Maglev slot %d of %d → %s", x.Slot, r.Table.Size(), res.MaglevBackend)
	d := x.Decision
	switch {
	case d.Verdict != dataplane.Tx:
		res.Why = fmt.Sprintf("eligible set empty (tier %s): new connections are dropped (%s)", rs.Tier, d.Reason)
		if x.EntryFound {
			res.Why = fmt.Sprintf("tracked entry to %s no longer valid, and the eligible set is empty (tier %s): dropped", res.EntryBackend, rs.Tier)
		}
		return res
	case d.Tracked:
		res.Why = fmt.Sprintf("tracked entry valid: the flow stays on %s", res.EntryBackend)
		if x.MaglevOK && x.MaglevBackend != d.Backend {
			res.Why += fmt.Sprintf(" (a new flow would get %s)", maglev)
		}
	case !x.Trackable:
		res.Why = fmt.Sprintf("not tracked (%s under %s affinity): hashed per packet, %s", packet.ProtoName(m.Proto), r.Affinity, maglev)
	case x.NewConnection:
		res.Why = "new connection (a SYN re-selects): " + maglev
		if x.EntryFound {
			res.Why += fmt.Sprintf("; the old entry to %s is replaced", res.EntryBackend)
		}
	case x.EntryFound:
		res.Why = fmt.Sprintf("tracked entry to %s no longer valid (drained, removed, unhealthy or flushed): re-selected, %s", res.EntryBackend, maglev)
	default:
		res.Why = "no tracked entry: new flow, " + maglev
	}
	res.Verdict, res.Backend = "TX", name(d.Backend)
	if int(d.Backend) < len(r.Backends) && r.Backends[d.Backend].Template == nil {
		res.Verdict = "DROP"
		res.Why += "; but its next hop is unresolved, so the worker drops it (no-next-hop)"
	}
	return res
}
