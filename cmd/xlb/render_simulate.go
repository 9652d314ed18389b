//go:build !xlbctl

package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/xlbnet/xlb/pkg/daemon"
)

// printSimulation prints `xlb simulate`.
func printSimulation(w io.Writer, res []daemon.SimRule) {
	for i, r := range res {
		if i > 0 {
			fmt.Fprintln(w)
		}
		size := fmt.Sprintf("Maglev table %d slots", r.TableSize)
		if r.TableSizeBefore != 0 && r.TableSizeBefore != r.TableSize {
			size = fmt.Sprintf("Maglev table %d → %d slots: every new flow is placed anew", r.TableSizeBefore, r.TableSize)
		}
		fmt.Fprintf(w, "rule %s (%s): tier %s → %s\n", r.Rule, size, r.TierBefore, r.TierAfter)
		fmt.Fprintf(w, "new flows that move: %s of all; away from backends that stay: %s\n", pct(r.Moved), pct(r.SurvivorMoved))
		if r.Flows > 0 {
			fmt.Fprintf(w, "sampled: %d of %d random flows move (%s)\n", r.FlowsMoved, r.Flows, pct(float64(r.FlowsMoved)/float64(r.Flows)))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := "BACKEND\tSHARE BEFORE\tAFTER\tMOVED AWAY (OF ALL)\t(OF ITS OWN)\tGAINED"
		if r.Flows > 0 {
			head += "\tSAMPLED MOVED"
		}
		fmt.Fprintln(tw, head)
		for _, b := range r.Backends {
			name := b.Address
			switch {
			case b.ChangedByRequest && !b.InAfter && b.InBefore:
				name += " (leaves)"
			case b.ChangedByRequest && b.InAfter && !b.InBefore:
				name += " (joins)"
			case b.ChangedByRequest:
				name += " (changed)"
			case !b.InBefore && !b.InAfter:
				name += " (not eligible)"
			}
			row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", name, pct(b.Before), pct(b.After), pct(b.MovedAway), pct(b.MovedOwn), pct(b.Gained))
			if r.Flows > 0 {
				s := "-"
				if b.FlowsBefore > 0 {
					s = fmt.Sprintf("%d of %d", b.FlowsMoved, b.FlowsBefore)
				}
				row += "\t" + s
			}
			fmt.Fprintln(tw, row)
		}
		tw.Flush()
	}
}
