package capture

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
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

// Summary decodes the frame's headers for a listing, outer to inner:
// "IPv4 198.18.0.2 > 10.0.1.10 | IPv4 198.51.100.7 > 203.0.113.10 | TCP 40000 > 80 [S]".
func (p *Packet) Summary() string {
	pkt := gopacket.NewPacket(p.Data, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	var parts []string
	ls := pkt.Layers()
	cut := pkt.ErrorLayer() != nil && len(ls) >= 2
	if cut {
		// gopacket keeps the layer that failed to decode (a header cut
		// by the snap length) before its DecodeFailure.
		ls = ls[:len(ls)-2]
	}
	for _, l := range ls {
		switch l := l.(type) {
		case *layers.IPv4:
			parts = append(parts, fmt.Sprintf("IPv4 %s > %s", l.SrcIP, l.DstIP))
		case *layers.IPv6:
			parts = append(parts, fmt.Sprintf("IPv6 %s > %s", l.SrcIP, l.DstIP))
		case *layers.TCP:
			parts = append(parts, fmt.Sprintf("TCP %d > %d [%s]", l.SrcPort, l.DstPort, tcpFlags(l)))
		case *layers.UDP:
			parts = append(parts, fmt.Sprintf("UDP %d > %d", l.SrcPort, l.DstPort))
		case *layers.ICMPv4:
			parts = append(parts, "ICMP "+l.TypeCode.String())
		case *layers.ICMPv6:
			parts = append(parts, "ICMPv6 "+l.TypeCode.String())
		case *layers.GRE:
			parts = append(parts, "GRE")
		}
	}
	if len(parts) == 0 {
		if el := pkt.Layer(layers.LayerTypeEthernet); el != nil {
			return "ethertype " + el.(*layers.Ethernet).EthernetType.String()
		}
		return "undecodable frame"
	}
	if cut {
		parts = append(parts, "(cut)")
	}
	return strings.Join(parts, " | ")
}

func tcpFlags(t *layers.TCP) string {
	var b strings.Builder
	for _, f := range []struct {
		on bool
		c  byte
	}{{t.SYN, 'S'}, {t.FIN, 'F'}, {t.RST, 'R'}, {t.PSH, 'P'}, {t.ACK, '.'}} {
		if f.on {
			b.WriteByte(f.c)
		}
	}
	return b.String()
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
