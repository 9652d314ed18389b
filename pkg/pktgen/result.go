package pktgen

import (
	"fmt"
	"io"
	"math/bits"
	"time"
)

// Result is one thread's outcome, in pktgen's terms.
type Result struct {
	Device  string        // "<ifname>@<thread>", as pktgen names its devices
	Queue   int           // TX queue
	CPU     int           // the CPU the thread was pinned to
	Elapsed time.Duration // first submission to the last completion
	Idle    time.Duration // time spent waiting for the rate limit
	Packets uint64        // packets the kernel completed (pktgen's sofar)
	Size    int           // frame length without FCS
	Errors  uint64        // TX descriptors the kernel rejected, failed wake-ups
	Mode    string        // "copy" or "zerocopy"
}

// PPS is packets per second, truncated as the kernel does
// (sofar * NSEC_PER_SEC / elapsed_ns).
func (r Result) PPS() uint64 {
	ns := uint64(r.Elapsed.Nanoseconds())
	if ns == 0 {
		return 0
	}
	hi, lo := bits.Mul64(r.Packets, 1e9)
	if hi >= ns {
		return ^uint64(0)
	}
	q, _ := bits.Div64(hi, lo, ns)
	return q
}

// BPS is bits per second: pps × 8 × size, without FCS, preamble or gap.
func (r Result) BPS() uint64 { return r.PPS() * 8 * uint64(r.Size) }

// WriteTo prints the two lines pktgen shows in /proc/net/pktgen/<dev>
// after a run (net/core/pktgen.c show_results), preceded by nothing:
//
//	Result: OK: <usec>(c<busy usec>+d<idle usec>) usec, <pkts> (<size>byte,0frags)
//	  <pps>pps <Mb>Mb/sec (<bps>bps) errors: <n>
func (r Result) WriteTo(w io.Writer) (int64, error) {
	us := r.Elapsed.Microseconds()
	idle := r.Idle.Microseconds()
	busy := (r.Elapsed - r.Idle).Microseconds()
	bps := r.BPS()
	n, err := fmt.Fprintf(w, "Result: OK: %d(c%d+d%d) usec, %d (%dbyte,0frags)\n  %dpps %dMb/sec (%dbps) errors: %d\n",
		us, busy, idle, r.Packets, r.Size, r.PPS(), bps/1000000, bps, r.Errors)
	return int64(n), err
}

// Report is a whole run.
type Report struct {
	Ifname  string
	Results []Result
}

// Packets is the sum over threads.
func (rep Report) Packets() uint64 {
	var n uint64
	for _, r := range rep.Results {
		n += r.Packets
	}
	return n
}

// PPS is the sum of the threads' rates (threads run side by side).
func (rep Report) PPS() uint64 {
	var n uint64
	for _, r := range rep.Results {
		n += r.PPS()
	}
	return n
}

// Errors is the sum over threads.
func (rep Report) Errors() uint64 {
	var n uint64
	for _, r := range rep.Results {
		n += r.Errors
	}
	return n
}

// WriteText prints what the kernel samples print per device: a
// "Device: <dev>@<t>" line and the two result lines, for every thread.
func (rep Report) WriteText(w io.Writer) error {
	for _, r := range rep.Results {
		if _, err := fmt.Fprintf(w, "Device: %s\n", r.Device); err != nil {
			return err
		}
		if _, err := r.WriteTo(w); err != nil {
			return err
		}
	}
	return nil
}

// ThreadJSON is one thread in the JSON report.
type ThreadJSON struct {
	Device      string `json:"device"`
	Queue       int    `json:"queue"`
	CPU         int    `json:"cpu"`
	Mode        string `json:"mode"`
	ElapsedUsec int64  `json:"elapsed_usec"`
	BusyUsec    int64  `json:"busy_usec"`
	IdleUsec    int64  `json:"idle_usec"`
	Packets     uint64 `json:"packets"`
	PktSize     int    `json:"pkt_size"`
	PPS         uint64 `json:"pps"`
	Mbps        uint64 `json:"mbps"`
	BPS         uint64 `json:"bps"`
	Errors      uint64 `json:"errors"`
}

// ReportJSON is the --json object: the threads and their sums.
type ReportJSON struct {
	Interface string       `json:"interface"`
	Threads   []ThreadJSON `json:"threads"`
	Packets   uint64       `json:"packets"`
	PPS       uint64       `json:"pps"`
	BPS       uint64       `json:"bps"`
	Errors    uint64       `json:"errors"`
}

// JSON returns the report as the --json object.
func (rep Report) JSON() ReportJSON {
	out := ReportJSON{Interface: rep.Ifname, Threads: []ThreadJSON{}, Packets: rep.Packets(), PPS: rep.PPS(), Errors: rep.Errors()}
	for _, r := range rep.Results {
		bps := r.BPS()
		out.BPS += bps
		out.Threads = append(out.Threads, ThreadJSON{
			Device: r.Device, Queue: r.Queue, CPU: r.CPU, Mode: r.Mode,
			ElapsedUsec: r.Elapsed.Microseconds(), BusyUsec: (r.Elapsed - r.Idle).Microseconds(), IdleUsec: r.Idle.Microseconds(),
			Packets: r.Packets, PktSize: r.Size, PPS: r.PPS(), Mbps: bps / 1000000, BPS: bps, Errors: r.Errors,
		})
	}
	return out
}
