package daemon

import (
	"time"

	"github.com/xlbnet/xlb/conntrack"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/dataplane"
)

// Active and inactive PER_SESSION sessions (doc.go, "Decisions"). A rule
// with tracking_mode PER_SESSION and a CLIENT_IP or CLIENT_IP_PROTO
// affinity keeps one entry per client (2- or 3-tuple) in the shared
// table and none per connection, and the shared table sees no FIN or
// RST: which of a client's connections are open is not known. So a
// session counts as active while it carries traffic: a packet within the
// last sessionActiveWindow of its rule; after that it is inactive (kept
// for affinity only) until it idles out. The shared table stores a
// deadline, now+idle, refreshed at most once a second, so a session's
// last packet is idle - ExpiresIn ago, give or take a second.

// maxSessionActive bounds the window: an established connection that is
// used at all sends something (data, keepalives) more often than that
// in the common case.
const maxSessionActive = 10 * time.Second

// sessionActiveWindow is how recent a session's last packet must be for
// it to count as active: 10 s, or half the rule's idle timeout when that
// is shorter (so a session has an inactive half before it idles out).
func sessionActiveWindow(idle conntrack.Ticks) conntrack.Ticks {
	return min(conntrack.TicksOf(maxSessionActive), idle/2)
}

// sharedSessions reports whether r keeps its tracked flows in the shared
// session table (dataplane's prepareFlow: PER_SESSION with a 2- or
// 3-tuple affinity).
func sharedSessions(r *dataplane.Rule) bool {
	return r.Mode == hash.PerSession && (r.Affinity == hash.AffinityClientIP || r.Affinity == hash.AffinityClientIPProto)
}

// splitSessions counts the shared table's records that still decide
// (valid) per (rule slot, backend slot) into c.shared, and those whose
// last packet is within their rule's window into c.sessionsActive.
func splitSessions(c *connCounts, recs []conntrack.Record, rules []*dataplane.Rule, valid func(rule uint16, v conntrack.Value, proto uint8) bool) {
	for j := range recs {
		r := &recs[j]
		if !valid(r.Rule, r.Value, r.Key.Proto) {
			continue
		}
		k := [2]uint32{uint32(r.Rule), r.Value.Backend}
		c.shared[k]++
		if int(r.Rule) < len(rules) {
			// A deadline beyond now+idle (the idle timeout was shortened
			// by a reload since the last refresh) is a recent packet.
			idle := rules[r.Rule].Idle
			if r.ExpiresIn >= idle || idle-r.ExpiresIn < sessionActiveWindow(idle) {
				c.sessionsActive[k]++
			}
		}
	}
}
