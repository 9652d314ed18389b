package fleet

import (
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/xlbnet/xlb/conntrack"
)

// peer is what the node knows of one other appliance. The loop goroutine
// owns it.
type peer struct {
	addr netip.Addr
	udp  netip.AddrPort

	// Receiving: the peer's epoch, verified by a challenge it answered.
	verified  bool
	epoch     uint64
	win       window
	challenge uint64 // our outstanding challenge (0: none)
	challAt   time.Time
	owe       uint64 // the peer's last challenge, echoed in our next HELLO
	lastHeard time.Time
	owned     uint32 // what the peer says it owns

	// Sending.
	seq uint64

	// Its full sync to us (join) and ours to it.
	syncReq   uint64    // our open request to it (0: none)
	syncGot   uint32    // records received under syncReq
	syncAt    time.Time // when syncReq was made
	synced    bool      // its answer to our last request is complete
	syncedAt  time.Time
	serving   *syncJob // our answer to its request
	lastServe uint64   // the request id served last (a replayed request is not served twice)

	// Exceptions held from it: key → deadline as it sent them.
	held map[ownedKey]conntrack.Time

	c peerCounters
}

type peerCounters struct {
	sentRecords, sentDatagrams, sentBytes uint64
	sendErrors                            uint64
	recvRecords, recvDatagrams, recvBytes uint64
	drops                                 [numReasons]uint64
}

func newPeer(a netip.Addr, port uint16) *peer {
	return &peer{addr: a, udp: netip.AddrPortFrom(a, port), held: map[ownedKey]conntrack.Time{}}
}

func nonce() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// Reason is why a datagram or a record was dropped.
type Reason uint8

const (
	ReasonTruncated      Reason = iota // shorter than its framing says
	ReasonMalformed                    // framing or fields that cannot be
	ReasonVersion                      // another protocol version
	ReasonAuth                         // the tag verifies under no key
	ReasonUnknownPeer                  // authenticated, from no configured peer
	ReasonMisdirected                  // authenticated, addressed to another appliance
	ReasonReplay                       // a sequence seen already, or older than the window
	ReasonUnverified                   // from an epoch of the peer not verified yet (it restarted; a challenge is under way)
	ReasonUnknownRule                  // a record naming a rule this appliance does not have
	ReasonUnknownBackend               // a record naming a backend the rule does not have
	ReasonBacklog                      // the node's loop was behind: the datagram was not read
	numReasons
)

var reasonNames = [numReasons]string{"truncated", "malformed", "version", "auth", "unknown-peer", "misdirected", "replay", "unverified", "unknown-rule", "unknown-backend", "backlog"}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Reasons lists every drop reason, in order.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}
