package ring

import (
	"errors"
	"fmt"
	"time"
)

// BindMode chooses between zero-copy and copy mode at bind time.
type BindMode uint8

const (
	// BindAuto tries zero-copy first and falls back to copy mode when the
	// driver does not support it (veth, most virtual NICs).
	BindAuto BindMode = iota
	// BindZeroCopy requires zero-copy; Open fails if the driver refuses.
	BindZeroCopy
	// BindCopy requires copy mode (XDP_COPY).
	BindCopy
)

func (m BindMode) String() string {
	switch m {
	case BindAuto:
		return "auto"
	case BindZeroCopy:
		return "zerocopy"
	case BindCopy:
		return "copy"
	}
	return fmt.Sprintf("BindMode(%d)", uint8(m))
}

// Options configure a socket. Zero values take the defaults below.
type Options struct {
	Ifindex int // interface to bind to (required)
	Queue   int // its RX/TX queue

	// FrameSize is the UMEM chunk size: 2048 or 4096 (aligned mode needs a
	// power of two no larger than a page). Default 4096, so a 1500-byte
	// packet plus 256 bytes of headroom plus an encapsulation fits.
	FrameSize int
	// NumFrames is the number of chunks. Default 4096 (16 MiB at 4096 B):
	// enough to keep the fill ring full while TX and the worker hold a
	// ring's worth each.
	NumFrames int
	// RingSize is the number of slots of each of the four rings, a power of
	// two. Default 2048.
	RingSize int
	// ExtraHeadroom is headroom registered with the UMEM on top of the
	// kernel's XDP_PACKET_HEADROOM (256). Default 0: 256 bytes already
	// hold the largest encapsulation xlb prepends (~100 bytes).
	ExtraHeadroom int
	// Bind selects zero-copy or copy mode.
	Bind BindMode
}

// BusyPoll configures preferred busy polling of a socket's queue
// (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET; Linux 5.11 and
// later). The zero value is off.
type BusyPoll struct {
	// Timeout is how long one busy-poll call may spin for packets
	// (SO_BUSY_POLL, microseconds); 0 turns busy polling off.
	Timeout time.Duration
	// Budget is the most packets one NAPI poll of a busy-poll call
	// handles (SO_BUSY_POLL_BUDGET); 0 means DefaultBusyPollBudget.
	Budget int
}

// Limits of BusyPoll, checked by Validate.
const (
	DefaultBusyPollBudget = 64
	MaxBusyPollBudget     = 1024 // a NAPI poll's budget is at most this much in practice
	MaxBusyPollTimeout    = time.Millisecond
)

// Validate checks b's ranges.
func (b BusyPoll) Validate() error {
	switch {
	case b.Timeout < 0 || b.Timeout > MaxBusyPollTimeout:
		return fmt.Errorf("%w: busy-poll timeout %s: want 0 to %s", errOptions, b.Timeout, MaxBusyPollTimeout)
	case b.Budget < 0 || b.Budget > MaxBusyPollBudget:
		return fmt.Errorf("%w: busy-poll budget %d: want 0 to %d", errOptions, b.Budget, MaxBusyPollBudget)
	}
	return nil
}

// Defaults.
const (
	DefaultFrameSize = 4096
	DefaultNumFrames = 4096
	DefaultRingSize  = 2048
)

// withDefaults returns o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.FrameSize == 0 {
		o.FrameSize = DefaultFrameSize
	}
	if o.NumFrames == 0 {
		o.NumFrames = DefaultNumFrames
	}
	if o.RingSize == 0 {
		o.RingSize = DefaultRingSize
	}
	return o
}

var errOptions = errors.New("invalid ring options")

// Validate checks the constraints the kernel enforces at setsockopt and
// bind time, so a bad configuration fails with a clear message up front.
// It is applied after defaults.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.FrameSize != 2048 && o.FrameSize != 4096:
		return fmt.Errorf("%w: frame size %d: want 2048 or 4096", errOptions, o.FrameSize)
	case o.RingSize <= 0 || o.RingSize&(o.RingSize-1) != 0:
		return fmt.Errorf("%w: ring size %d: want a power of two", errOptions, o.RingSize)
	case o.NumFrames < o.RingSize:
		return fmt.Errorf("%w: %d frames cannot fill a %d-slot fill ring", errOptions, o.NumFrames, o.RingSize)
	case o.ExtraHeadroom < 0 || XDPPacketHeadroom+o.ExtraHeadroom+64 > o.FrameSize:
		return fmt.Errorf("%w: headroom %d leaves no room for a packet in a %d-byte frame", errOptions, o.ExtraHeadroom, o.FrameSize)
	case o.Queue < 0:
		return fmt.Errorf("%w: queue %d", errOptions, o.Queue)
	case o.Bind > BindCopy:
		return fmt.Errorf("%w: bind mode %d", errOptions, o.Bind)
	}
	return nil
}
