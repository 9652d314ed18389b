package dataplane

import "github.com/xlbnet/xlb/pkg/packet"

// Verdict is what the worker does with a frame after Decide.
type Verdict uint8

const (
	// Drop: the frame is recycled; Reason says why and is counted.
	Drop Verdict = iota
	// Pass: the frame is not ours (ARP, LLDP, QinQ…); in AF_XDP the kernel
	// never sees it again, so it is counted and dropped by the worker, but it
	// is kept apart from drops because the XDP program should not have sent
	// it (a VIP-map or program bug shows up here).
	Pass
	// Tx: encapsulate towards the chosen backend and transmit.
	Tx
	// Reply: the frame was rewritten in place into a reply to its sender
	// (ICMP echo reply from a VIP); transmit it as is.
	Reply
)

var verdictNames = [...]string{Drop: "drop", Pass: "pass", Tx: "tx", Reply: "reply"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "verdict-unknown"
}

// Reason says why a frame was dropped (or passed). The first values are
// the parser's results, one for one, so a parse result converts with a
// plain conversion; the dataplane's own reasons follow.
type Reason uint8

// ReasonNone is the Reason of a frame that was not dropped.
const ReasonNone = Reason(packet.OK)

const (
	// ReasonNoRule: the destination is not a VIP, or no rule of that VIP
	// matches the protocol and port (a non-first fragment matches only
	// all-ports rules).
	ReasonNoRule Reason = Reason(packet.NumResults) + iota
	// ReasonNoBackend: the rule's eligible set is empty
	// (drop_traffic_if_unhealthy with nothing usable), so a new connection
	// cannot be placed.
	ReasonNoBackend
	// ReasonICMPNotForFlow: an ICMP error whose quoted packet is not from a
	// VIP we serve.
	ReasonICMPNotForFlow
	// ReasonICMPUnsupported: an ICMP message to a VIP that is neither an
	// echo request nor an error about a flow (echo replies, redirects…).
	ReasonICMPUnsupported
	// ReasonPacketTooBig: the encapsulated packet would exceed the egress
	// MTU; an ICMP error went back to the client instead.
	ReasonPacketTooBig
	// ReasonEncapFailed: the frame had no room to encapsulate in place.
	ReasonEncapFailed
	// ReasonTxRingFull: no room on the TX ring for this batch.
	ReasonTxRingFull
	// ReasonNoNextHop: the backend's MAC address is not resolved.
	ReasonNoNextHop
	// ReasonNoFrames: outer fragmentation needed spare frames and the
	// allocator had none.
	ReasonNoFrames
	// ReasonSourceRange: the rule's source_ranges do not admit the
	// packet's source (for an ICMP error, the client of the flow it
	// quotes; for an echo request, no rule of the VIP admits it).
	ReasonSourceRange

	numReasons
)

// NumReasons sizes per-queue counter arrays indexed by Reason.
const NumReasons = int(numReasons)

var ownReasonNames = [...]string{
	ReasonNoRule - ReasonNoRule:          "no-rule",
	ReasonNoBackend - ReasonNoRule:       "no-backend",
	ReasonICMPNotForFlow - ReasonNoRule:  "icmp-not-for-flow",
	ReasonICMPUnsupported - ReasonNoRule: "icmp-unsupported",
	ReasonPacketTooBig - ReasonNoRule:    "packet-too-big",
	ReasonEncapFailed - ReasonNoRule:     "encap-failed",
	ReasonTxRingFull - ReasonNoRule:      "tx-ring-full",
	ReasonNoNextHop - ReasonNoRule:       "no-next-hop",
	ReasonNoFrames - ReasonNoRule:        "no-frames",
	ReasonSourceRange - ReasonNoRule:     "source-range",
}

// String returns the metric label of r.
func (r Reason) String() string {
	if r < ReasonNoRule {
		return packet.Result(r).String()
	}
	if i := int(r - ReasonNoRule); i < len(ownReasonNames) {
		return ownReasonNames[i]
	}
	return "reason-unknown"
}

// Pass reports whether r is a reason to pass (not ours: the frame should
// never have reached the socket) rather than to drop.
func (r Reason) Pass() bool {
	return r < ReasonNoRule && r != ReasonNone && packet.Result(r).Class() == packet.ClassPass
}

// parseFailure is the decision about a frame the parser refused: passed
// or dropped, by the parser's result.
func parseFailure(res packet.Result) Decision {
	if Reason(res).Pass() {
		return Decision{Verdict: Pass, Reason: Reason(res)}
	}
	return drop(Reason(res))
}

// ParseVerdict is the inverse of Verdict.String.
func ParseVerdict(s string) (Verdict, bool) {
	for v, name := range verdictNames {
		if name == s {
			return Verdict(v), true
		}
	}
	return 0, false
}

// ParseReason is the inverse of Reason.String (the metric labels).
func ParseReason(s string) (Reason, bool) {
	for r := ReasonNone + 1; r < numReasons; r++ {
		if r.String() == s {
			return r, true
		}
	}
	return 0, false
}
