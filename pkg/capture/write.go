package capture

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Writer writes captured packets to a file format.
type Writer interface {
	Write(p *Packet) error
	// Flush writes out what is buffered (a reader at the other end of a
	// pipe sees the packets so far).
	Flush() error
	// Close flushes; dropped is how many packets the capture refused
	// (rate limit, full ring), recorded where the format can hold it.
	Close(dropped uint64) error
}

// Formats NewWriter knows.
const (
	FormatPcapNG  = "pcapng"
	FormatPcap    = "pcap"
	FormatListing = "text"
)

// NewWriter returns a writer of format to out, for frames of at most
// snaplen bytes.
func NewWriter(format string, out io.Writer, snaplen int) (Writer, error) {
	switch format {
	case FormatPcapNG:
		return &ngWriter{out: out, snap: snaplen, ifaces: map[string]int{}}, nil
	case FormatPcap:
		w := pcapgo.NewWriterNanos(out)
		if err := w.WriteFileHeader(uint32(snaplen), layers.LinkTypeEthernet); err != nil {
			return nil, fmt.Errorf("write pcap header: %w", err)
		}
		return &pcapWriter{w: w}, nil
	case FormatListing:
		return &listingWriter{w: bufio.NewWriter(out)}, nil
	}
	return nil, fmt.Errorf("capture format %q: want pcapng, pcap or text", format)
}

func captureInfo(p *Packet, iface int) gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(p.Data), Length: max(p.Len, len(p.Data)), InterfaceIndex: iface}
}

// ngWriter writes pcapng with one interface per point and outcome: the
// interface of a packet names where it was seen and what xlb did with it
// ("rx:drop:no-rule", "tx:tx"), so every dropped packet carries its reason
// in the file (Wireshark: frame.interface_name). gopacket's pcapng writer
// has no per-packet comments; interfaces are its way to label packets.
type ngWriter struct {
	out    io.Writer
	snap   int
	w      *pcapgo.NgWriter
	ifaces map[string]int
}

// ifaceName is the pcapng interface of a packet's point and outcome.
func ifaceName(p *Packet) string {
	parts := []string{p.Point, p.Verdict}
	if p.Reason != "" {
		parts = append(parts, p.Reason)
	}
	return strings.Join(parts, ":")
}

func (w *ngWriter) iface(name, descr string) (int, error) {
	if id, ok := w.ifaces[name]; ok {
		return id, nil
	}
	intf := pcapgo.NgInterface{Name: name, Description: descr, LinkType: layers.LinkTypeEthernet, SnapLength: uint32(w.snap), TimestampResolution: 9, OS: "linux"}
	var id int
	if w.w == nil {
		nw, err := pcapgo.NewNgWriterInterface(w.out, intf, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "xlb capture", OS: "linux"}})
		if err != nil {
			return 0, fmt.Errorf("write pcapng header: %w", err)
		}
		w.w = nw
	} else {
		var err error
		if id, err = w.w.AddInterface(intf); err != nil {
			return 0, fmt.Errorf("write pcapng interface: %w", err)
		}
	}
	w.ifaces[name] = id
	return id, nil
}

func (w *ngWriter) Write(p *Packet) error {
	name := ifaceName(p)
	id, err := w.iface(name, "xlb "+p.Point+": "+p.Outcome())
	if err != nil {
		return err
	}
	return w.w.WritePacket(captureInfo(p, id), p.Data)
}

func (w *ngWriter) Flush() error {
	if w.w == nil {
		return nil
	}
	return w.w.Flush()
}

func (w *ngWriter) Close(dropped uint64) error {
	if w.w == nil { // no packet: still a valid, empty capture
		if _, err := w.iface("xlb", "xlb capture"); err != nil {
			return err
		}
	}
	if dropped > 0 {
		st := pcapgo.NgInterfaceStatistics{PacketsDropped: dropped, PacketsReceived: pcapgo.NgNoValue64}
		if err := w.w.WriteInterfaceStats(0, st); err != nil {
			return err
		}
	}
	return w.w.Flush()
}

type pcapWriter struct{ w *pcapgo.Writer }

func (w *pcapWriter) Write(p *Packet) error { return w.w.WritePacket(captureInfo(p, 0), p.Data) }

func (w *pcapWriter) Flush() error { return nil } // pcapgo.Writer does not buffer

func (w *pcapWriter) Close(uint64) error { return nil }

// listingWriter writes Packet.Listing lines.
type listingWriter struct {
	w *bufio.Writer
	n int
}

func (w *listingWriter) Write(p *Packet) error {
	w.n++
	_, err := fmt.Fprintln(w.w, p.Listing(w.n))
	return err
}

func (w *listingWriter) Flush() error { return w.w.Flush() }

func (w *listingWriter) Close(dropped uint64) error {
	if dropped > 0 {
		fmt.Fprintf(w.w, "%d packets not captured (rate limit or a full ring)\n", dropped)
	}
	return w.w.Flush()
}
