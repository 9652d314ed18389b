package failover

import (
	"errors"

	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/packet"
)

// PersistencePolicy is connection_tracking.persistence_on_unhealthy.
type PersistencePolicy uint8

const (
	PersistDefaultForProtocol PersistencePolicy = iota // DEFAULT_FOR_PROTOCOL (default)
	PersistNever                                       // NEVER_PERSIST
	PersistAlways                                      // ALWAYS_PERSIST
)

var persistNames = [...]string{"DEFAULT_FOR_PROTOCOL", "NEVER_PERSIST", "ALWAYS_PERSIST"}

func (p PersistencePolicy) String() string { return enumName(persistNames[:], uint8(p)) }

// ErrAlwaysPersistPerSession is the configuration error of
// docs/design.md#persistence-on-unhealthy-backends: ALWAYS_PERSIST cannot be
// combined with PER_SESSION tracking.
var ErrAlwaysPersistPerSession = errors.New("persistence_on_unhealthy = ALWAYS_PERSIST is invalid with tracking_mode = PER_SESSION")

// ErrUnknownPersistence reports a PersistencePolicy or TrackingMode value
// outside the defined constants.
var ErrUnknownPersistence = errors.New("unknown persistence policy or tracking mode")

// CheckPersistence validates a rule's persistence policy against its
// tracking mode.
func CheckPersistence(p PersistencePolicy, mode hash.TrackingMode) error {
	if p > PersistAlways || mode > hash.PerSession {
		return ErrUnknownPersistence
	}
	if p == PersistAlways && mode == hash.PerSession {
		return ErrAlwaysPersistPerSession
	}
	return nil
}

// Persists reports whether a tracked connection of protocol proto stays on
// its backend after the backend turned unhealthy
// (docs/design.md#persistence-on-unhealthy-backends). It is a pure table
// lookup, safe on the packet path (no allocation).
//
// Cells: DEFAULT_FOR_PROTOCOL persists TCP, and under PER_SESSION only with
// the 5-tuple affinities NONE / CLIENT_IP_PORT_PROTO. NEVER_PERSIST persists
// nothing. ALWAYS_PERSIST with PER_CONNECTION persists whatever is tracked:
// TCP always, UDP/ESP/GRE when the affinity is not NONE (with NONE they are
// not tracked, so there is nothing to persist). ALWAYS_PERSIST with
// PER_SESSION is a config error (CheckPersistence); if it reaches here it
// persists nothing. ICMP, ICMPv6 and other protocols are never tracked and
// never persist.
func Persists(p PersistencePolicy, mode hash.TrackingMode, affinity hash.Affinity, proto uint8) bool {
	switch p {
	case PersistDefaultForProtocol:
		if proto != packet.ProtoTCP {
			return false
		}
		if mode == hash.PerConnection {
			return true
		}
		return affinity == hash.AffinityNone || affinity == hash.AffinityClientIPPortProto
	case PersistAlways:
		if mode != hash.PerConnection {
			return false
		}
		switch proto {
		case packet.ProtoTCP:
			return true
		case packet.ProtoUDP, packet.ProtoESP, packet.ProtoGRE:
			return affinity != hash.AffinityNone
		}
		return false
	default: // PersistNever and unknown values
		return false
	}
}
