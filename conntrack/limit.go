package conntrack

// Flood defences of a per-queue Table
// (docs/design.md#full-tables-and-floods): every new entry starts unconfirmed
// (table.go), lives a short idle timeout until the flow's next packet
// confirms it, and may only displace other unconfirmed entries; and new
// entries are admitted at a bounded rate, a token bucket the worker owns (no
// atomics, one comparison per new flow, a refill at most once per tick).
// Above the rate a new flow is forwarded by its hash without an entry, as
// Katran bypasses its LRU above 125 k new connections per second per core: it
// keeps its backend for as long as the backend set does not change, which is
// all a flood's packets need.

// DefaultUnconfirmedIdle is how long a new entry lives until its flow's
// next packet confirms it: longer than the gap before a SYN's first two
// retransmissions (1 s and 2 s on Linux; each retransmission renews the
// entry) and than a request-response exchange over UDP; short enough that
// a flood's single-packet flows leave the table within seconds.
var DefaultUnconfirmedIdle = TicksOf(5e9)

// limiter is a Table's new-entry token bucket and unconfirmed timeout.
type limiter struct {
	rate, burst     uint64 // entries per second, bucket size; rate 0: no limit
	tokens          uint64 // in 1/TicksPerSecond of an entry
	last            Time   // the tick the bucket was last refilled at
	unconfirmedIdle Ticks
}

// SetNewEntryLimit admits at most rate new entries per second, with bursts
// of burst (at least one tick's worth, rate/16; 0 means rate/4, a quarter
// of a second). rate 0 removes the limit. Owner goroutine only (the
// daemon sets it before the worker starts). The bucket starts full.
func (t *Table) SetNewEntryLimit(rate, burst int) {
	l := &t.lim
	l.rate = uint64(max(rate, 0))
	if burst <= 0 {
		burst = rate / 4
	}
	l.burst = uint64(max(burst, rate/TicksPerSecond, 1))
	l.tokens = l.burst * TicksPerSecond
	l.last = 0
}

// SetUnconfirmedIdle sets how long a new entry lives until confirmed
// (owner goroutine only). d is capped at each rule's idle timeout.
func (t *Table) SetUnconfirmedIdle(d Ticks) { t.lim.unconfirmedIdle = max(d, 1) }

// NewEntryLimit returns the limit in force (rate 0: none).
func (t *Table) NewEntryLimit() (rate, burst int) { return int(t.lim.rate), int(t.lim.burst) }

// AllowNew takes one token for a new entry made outside the Table (the
// shared session table, which the queue's worker fills too) and reports
// whether the rate allowed it; a refusal is counted as InsertSkipped.
// Owner goroutine only.
func (t *Table) AllowNew(now Time) bool {
	if t.lim.allow(now) {
		return true
	}
	t.stats.InsertSkipped++
	return false
}

// allow takes a token at now if there is one.
func (l *limiter) allow(now Time) bool {
	if l.rate == 0 {
		return true
	}
	if now != l.last {
		// rate entries per second are rate tokens of 1/16 per tick.
		if d := uint64(uint32(now - l.last)); d < 1<<30 {
			l.tokens = min(l.tokens+l.rate*d, l.burst*TicksPerSecond)
		}
		l.last = now
	}
	if l.tokens < TicksPerSecond {
		return false
	}
	l.tokens -= TicksPerSecond
	return true
}
