package capture

import (
	"fmt"
	"time"
)

// Packet is one captured frame with its outcome in words: what the
// control API streams to `xlb capture` and what the writers take.
type Packet struct {
	Time    time.Time `json:"time"`
	Queue   int       `json:"queue"`
	Point   string    `json:"point"`   // rx | tx
	Verdict string    `json:"verdict"` // tx | reply | drop | pass
	Reason  string    `json:"reason,omitempty"`
	Rule    string    `json:"rule,omitempty"`
	Backend string    `json:"backend,omitempty"`
	Len     int       `json:"len"`  // the frame's length
	Data    []byte    `json:"data"` // its first snap-length bytes
}

// Outcome names the packet's outcome: "tx", "reply", "drop no-rule",
// "pass not-ip".
func (p *Packet) Outcome() string {
	if p.Reason == "" {
		return p.Verdict
	}
	return p.Verdict + " " + p.Reason
}

// Listing is one line about the packet: time, queue, point, outcome,
// rule and backend, headers and length.
func (p *Packet) Listing(n int) string {
	where := ""
	if p.Rule != "" {
		where = " rule " + p.Rule
	}
	if p.Backend != "" {
		where += " → " + p.Backend
	}
	return fmt.Sprintf("%d %s q%d %s %s%s  %s  len %d", n, p.Time.Format("15:04:05.000000"), p.Queue, p.Point, p.Outcome(), where, p.Summary(), p.Len)
}
