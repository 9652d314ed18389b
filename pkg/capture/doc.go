// Package capture is xlb's packet tap: what `xlb capture` shows of the
// packets the workers handle, which tcpdump never sees (AF_XDP takes them
// before the kernel's taps).
//
// # Ownership and goroutines
//
// A Session is one capture over every queue: one Tap per queue, each a
// ring of preallocated slots (Options.Slots × Options.Snaplen bytes,
// allocated by NewSession), a filter and a rate limit. The daemon hands
// tap i to worker i (dataplane.Worker.SetCapture), and one goroutine of
// the daemon drains every tap (Session.Drain) while the workers fill them.
// Each ring has one producer (its worker) and one consumer (the drainer):
// the head index is published with an atomic store per record, the tail
// with one per drain; nothing else is shared. The producer side (Begin,
// MatchFlow, Match, Stage, Commit, Put) allocates nothing, takes no lock
// and makes no syscall (TestTapAllocs); a full ring or an exhausted rate
// refuses the record and counts it (TapStats), the worker never waits.
//
// # What a worker does with a tap
//
// When no capture runs, a worker's tap pointer is nil and the cost is one
// atomic load per batch. With a tap, per batch: Begin (the batch's time,
// one clock read; the rate credit grows). Per packet: before the frame is
// rewritten, when the filter wants RX and the packet's headers, rule and
// backend match (MatchFlow), Stage copies it into the next slot without
// publishing it; once the outcome is final (encapsulated, or dropped
// because the next hop is missing, answered with an ICMP error…), Commit
// publishes it if the verdict and reason match too, and Put copies each
// frame sent (TX). So the RX copy shows the packet as it arrived, with
// the outcome it finally had.
//
// # Decisions where the design is silent
//
//   - Rate limit: a token bucket per queue, Options.Rate records per
//     second (default 10 000, at most 100 000) in bursts of a twentieth of
//     a second (at least 64). At the default snap length that bounds the
//     copying to ~20 MB/s per worker.
//   - Time stamps are read once per batch (a batch is received at once).
//   - Addresses and ports in a filter are the client flow's (the packet
//     as received), for TX copies too; --backend matches the backend the
//     packet went to (or would have gone to, for a drop after the choice).
//   - Dropped packets carry their reason in the file: pcapng has one
//     interface per point and outcome ("rx:drop:no-rule", "tx:tx"), a
//     field every reader shows (per-packet comments are not); the text
//     format lists everything (queue, rule, backend). Packets the capture
//     refused are recorded as the first interface's drop count (pcapng
//     interface statistics) and reported by `xlb capture`.
//   - The files and the listing are written and decoded here, by hand
//     (pcapfile.go, decode.go), not with gopacket: its layers package
//     took half of every xlb command's start (package initialization,
//     ~30 ms) for a few headers. The tests read the files back and
//     decode the same frames with gopacket (TestSummary), an independent
//     decoder. The listing decodes what xlb handles: Ethernet, VLAN
//     tags, IPv4, IPv6 and its extension headers, IPIP, GRE, GUE on its
//     default port, TCP, UDP, ICMP.
//   - One capture at a time per daemon (the workers have one tap each).
package capture
