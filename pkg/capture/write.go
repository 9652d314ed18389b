package capture

import (
	"bufio"
	"fmt"
	"io"
	"strings"
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
		return newNgWriter(out, snaplen), nil
	case FormatPcap:
		w, err := newPcapWriter(out, snaplen)
		if err != nil {
			return nil, err
		}
		return w, nil
	case FormatListing:
		return &listingWriter{w: bufio.NewWriter(out)}, nil
	}
	return nil, fmt.Errorf("capture format %q: want pcapng, pcap or text", format)
}

// ifaceName is the pcapng interface of a packet's point and outcome.
func ifaceName(p *Packet) string {
	parts := []string{p.Point, p.Verdict}
	if p.Reason != "" {
		parts = append(parts, p.Reason)
	}
	return strings.Join(parts, ":")
}

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
