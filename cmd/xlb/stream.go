package main

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/xlbnet/xlb/pkg/control"
)

// copyIndented copies the daemon's streamed JSON answer (compact, one
// value) to dst as printJSON would print it decoded whole (two-space
// indent, a final newline), a byte at a time, so the command line holds
// none of it whole: an answer of every rule is tens of megabytes
// (docs/design.md#read-commands-at-scale).
func copyIndented(dst io.Writer, src io.Reader) error {
	r, w := bufio.NewReaderSize(src, 64<<10), bufio.NewWriterSize(dst, 64<<10)
	depth := 0
	inString, escaped, opened := false, false, false
	newline := func() {
		w.WriteByte('\n')
		for range depth {
			w.WriteString("  ")
		}
	}
	for {
		c, err := r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			w.Flush()
			return err
		}
		if inString {
			w.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if opened { // an empty {} or [] stays on its line
			opened = false
			if c == '}' || c == ']' {
				depth--
				w.WriteByte(c)
				continue
			}
			newline()
		}
		switch c {
		case '"':
			inString = true
			w.WriteByte(c)
		case '{', '[':
			w.WriteByte(c)
			depth++
			opened = true
		case '}', ']':
			depth--
			newline()
			w.WriteByte(c)
		case ',':
			w.WriteByte(c)
			newline()
		case ':':
			w.WriteString(": ")
		default:
			w.WriteByte(c)
		}
	}
	if depth != 0 || inString {
		w.Flush()
		return fmt.Errorf("the daemon's answer ended early")
	}
	w.WriteByte('\n')
	return w.Flush()
}

// printReply copies a streamed answer (Client.StatusReply,
// BackendsReply) to w, indented.
func printReply(w io.Writer, open func() (io.ReadCloser, error)) error {
	body, err := open()
	if err != nil {
		return err
	}
	defer body.Close()
	if err := copyIndented(w, body); err != nil {
		return fmt.Errorf("read the daemon's answer: %w", err)
	}
	return nil
}

// printStatusJSON prints the daemon's answer to q as it arrives.
func printStatusJSON(ctx context.Context, w io.Writer, cl *control.Client, q control.StatusQuery) error {
	return printReply(w, func() (io.ReadCloser, error) { return cl.StatusReply(ctx, q) })
}
