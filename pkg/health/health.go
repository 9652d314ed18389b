package health

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/failover"
)

// WeightHeader is the response header a backend reports its weight in
// (seeds 000.8): a decimal integer 0..failover.MaxWeight.
const WeightHeader = "X-Load-Balancing-Endpoint-Weight"

// UnweightedWeight is the weight reported by TCP and NONE checks, which
// carry no weight header: every such backend counts the same. Config
// validation rejects WEIGHTED_MAGLEV with these check types, so the value
// only matters for display.
const UnweightedWeight = 1

// JitterFraction bounds the random change of each period after the first
// probe: a period is interval ± interval×JitterFraction.
const JitterFraction = 0.1

// Key names one prober: a backend as seen by one rule. The same backend in
// two rules gets two probers, since each rule may ask for another port or
// path and the backend may report another weight for each (seeds 000.8).
type Key struct {
	Rule    string
	Backend netip.Addr
}

func (k Key) String() string { return k.Rule + "/" + k.Backend.String() }

// Target is what to probe: the backend of Key with the rule's health check.
type Target struct {
	Key
	Check Check
	// From, when not nil, is the verdict a new target starts from
	// instead of UNKNOWN: one its caller kept from a prober of the same
	// backend (a predecessor's across `xlb restart`, or the rule's whose
	// probe this one takes over). The thresholds go on from it, so a
	// first pass of a HEALTHY verdict is no change to report, where from
	// UNKNOWN it would report the weight it learnt with the health still
	// UNKNOWN. A target that replaces one the Checker probes keeps that
	// one's state instead; Set compares Check only.
	From *Verdict
}

// Verdict is the part of a Status a target may start from (Target.From).
type Verdict struct {
	Health      failover.Health
	Weight      uint32
	WeightState failover.WeightState
	Since       time.Time
}

// Status is the health of one target. The Checker reports it to
// Options.OnChange whenever Health, Weight or WeightState changes, and
// returns all of them from Checker.Status.
type Status struct {
	Key
	Health      failover.Health
	Weight      uint32               // 0..failover.MaxWeight; 0 unless WeightState is WeightOK
	WeightState failover.WeightState // WeightUnavailable until a probe has been answered
	Since       time.Time            // when Health last changed (or the target was added)
	LastProbe   time.Time            // when the last probe ended; zero before the first
	LastLatency time.Duration        // how long the last probe took (connect, and the HTTP answer's head)
	LastError   error                // the last probe's failure; nil after a success
	Changes     uint64               // Health changes since the target was added: a flap counter
}

func (s Status) String() string {
	w := s.WeightState.String()
	if s.WeightState == failover.WeightOK {
		w = fmt.Sprintf("weight %d", s.Weight)
	}
	msg := fmt.Sprintf("%s %s %s since %s", s.Key, s.Health, w, s.Since.Format(time.RFC3339))
	if s.LastError != nil {
		msg += ": " + s.LastError.Error()
	}
	return msg
}

// Options configure a Checker. The zero value works: real clock, the
// default dialer, a random seed, no callback.
type Options struct {
	// OnChange receives every change of a target's Health, Weight or
	// WeightState. Calls are serialised (never two at once) and ordered per
	// target; no call for a target starts after the Set, Remove or Stop
	// that removed it has returned. It must return quickly and may call
	// Checker.Status, but not Set, Add, Remove or Stop (they wait for
	// probers that may be waiting to report).
	OnChange func(Status)

	// Dial makes every probe's connection; nil means DirectDial.
	Dial DialFunc

	// TLS is the base configuration of TLS probes (HTTPS, SSL, HTTP2 and
	// GRPC with TLS); nil means
	// InsecureSkipVerify (backends usually have self-signed or no
	// matching certificates). Each target uses a clone with ServerName set
	// to its Host without the port, else the backend address.
	TLS *tls.Config

	// Clock schedules probes and stamps Status times; nil means the real
	// clock. Probe timeouts are enforced on the socket and always run on
	// real time.
	Clock Clock

	// Seed makes probe jitter reproducible: the same seed and target give
	// the same schedule. 0 picks a random seed.
	Seed uint64

	// MaxInFlight bounds the probes in flight at once, each of which holds
	// a socket: a due probe over the bound waits for a later round of the
	// scheduler (it starts late; its verdict does not change). 0 means
	// half the process's open-file limit (RLIMIT_NOFILE's soft limit) when
	// New runs, leaving the other half to the rest of the process.
	MaxInFlight int

	// OnLate receives, on the scheduler, how many probes started late
	// because MaxInFlight held them back since its previous call, and the
	// bound: at once the first time, then at most once per LateReportEvery
	// while probes keep starting late. It must return quickly.
	OnLate func(late uint64, maxInFlight int)
}

// LateReportEvery is the shortest time between two calls of
// Options.OnLate: a log line a minute at most, however long probes run
// late.
const LateReportEvery = time.Minute

// ErrStopped is returned by Set and Add after Stop.
var ErrStopped = errors.New("health checker stopped")

// ErrStatus is wrapped by a probe error for a response other than 200 OK.
var ErrStatus = errors.New("status is not 200 OK")

// ErrResponse is wrapped by a probe error for an answer that does not
// match Check.Response.
var ErrResponse = errors.New("response does not match")

// ErrTimeout is wrapped by a probe error when the check's timeout ran out.
var ErrTimeout = errors.New("timed out")
