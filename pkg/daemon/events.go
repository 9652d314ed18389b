package daemon

import (
	"slices"
	"sync"
	"time"

	"github.com/xlbnet/xlb/pkg/control"
)

// The event list of `xlb status`: what changed and why, newest last.
// Tier switches and the other eligible-set events come from each rule's
// failover history (carried across a restart); health changes, CLI
// changes, reloads and BGP announcements and sessions are recorded here as
// they happen, from any goroutine.

// Event kinds recorded by the daemon (the failover kinds are
// failover.EventKind's names).
const (
	eventHealth = "health"      // a backend's health check changed its verdict
	eventCLI    = "cli"         // a change through the control socket
	eventReload = "reload"      // a configuration reload, accepted or rejected
	eventBGP    = "bgp"         // a VIP announced or withdrawn
	eventPeer   = "bgp-session" // a BGP session changed state
	eventFleet  = "fleet"       // a fleet join ended
	maxEvents   = 128           // kept by the log
	shownEvents = 50            // the newest shown by status
)

// eventLog is a bounded list of events; safe for concurrent use.
type eventLog struct {
	mu     sync.Mutex
	events []control.RuleEvent // oldest first, at most maxEvents
}

// add records e, stamped now when it has no time.
func (l *eventLog) add(e control.RuleEvent) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == maxEvents {
		l.events = slices.Delete(l.events, 0, 1)
	}
	l.events = append(l.events, e)
}

// list returns a copy of the events, oldest first.
func (l *eventLog) list() []control.RuleEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// newestEvents merges event lists by time and keeps the newest shown.
func newestEvents(lists ...[]control.RuleEvent) []control.RuleEvent {
	var all []control.RuleEvent
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.SortStableFunc(all, func(a, b control.RuleEvent) int { return a.At.Compare(b.At) })
	if len(all) > shownEvents {
		all = all[len(all)-shownEvents:]
	}
	return all
}
