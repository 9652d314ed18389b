package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/control"
)

// xlb appliance drain|undrain: withdraw every VIP from the routers (BGP)
// and announce them again; and the appliance's part of `xlb status`.

func applianceCommand() *cli.Command {
	change := func(a control.ApplianceAction, usage, desc string) *cli.Command {
		return &cli.Command{
			Name:        string(a),
			Usage:       usage,
			ArgsUsage:   " ",
			Description: desc,
			Flags:       append(socketFlags(), jsonFlag()),
			Action: func(c *cli.Context) error {
				if err := noArgs(c); err != nil {
					return err
				}
				return withClient(c, func(ctx context.Context, cl *control.Client) error {
					res, err := cl.ChangeAppliance(ctx, a)
					if err != nil {
						return err
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, res)
					}
					printApplianceChange(c.App.Writer, res, time.Now())
					return nil
				})
			},
		}
	}
	return &cli.Command{
		Name:  "appliance",
		Usage: "take the whole appliance out of the routers (BGP) and back",
		Description: "drain withdraws every VIP from the routers ([bgp] in xlb.toml); the routers move new and\n" +
			"existing flows to the other appliances of the fleet, which pick the same backends (same\n" +
			"configuration and hash_seed). Connections that still arrive are forwarded. The drain is kept in the\n" +
			"state file and survives a restart; undrain announces the VIPs again (each once its rules can place\n" +
			"new flows). `xlb status` shows the drain, the BGP peers and each VIP's announcement.",
		Subcommands: []*cli.Command{
			change(control.ApplianceDrain, "withdraw every VIP from the routers (the appliance keeps forwarding what arrives)",
				"Returns once the drain is saved in the state file and the withdrawals are sent."),
			change(control.ApplianceUndrain, "announce the VIPs again",
				"Returns once the undrain is saved; each VIP is announced when its rules can place new flows."),
		},
	}
}

// printApplianceChange prints the answer to drain or undrain.
func printApplianceChange(w io.Writer, res *control.ApplianceChangeResult, now time.Time) {
	fmt.Fprintln(w, res.Message)
	printAppliance(w, &res.Appliance, now)
}

// printAppliance prints the appliance's drain, BGP and fleet state (part
// of `xlb status`); nothing when it has no [bgp] nor [fleet] and is not
// drained.
func printAppliance(w io.Writer, a *control.Appliance, now time.Time) {
	if a.BGP == nil && a.Fleet == nil && !a.Drained {
		return
	}
	defer printFleet(w, a.Fleet)
	switch {
	case a.Drained && a.DrainedAt != nil:
		fmt.Fprintf(w, "appliance: DRAINED since %s (%s ago): every VIP withdrawn; xlb appliance undrain announces them again\n",
			a.DrainedAt.In(now.Location()).Format(time.DateTime), ago(now, *a.DrainedAt))
	case a.Drained:
		fmt.Fprintln(w, "appliance: DRAINED: every VIP withdrawn; xlb appliance undrain announces them again")
	default:
		fmt.Fprintln(w, "appliance: in service")
	}
	b := a.BGP
	if b == nil {
		return
	}
	fmt.Fprintf(w, "bgp: AS %d, router id %s, hold time %ds, withdraw delay %gs\n", b.LocalAS, b.RouterID, b.HoldTimeSeconds, b.WithdrawDelaySec)
	for _, p := range b.Peers {
		state := p.State
		if p.Since != nil {
			state += " for " + ago(now, *p.Since)
		}
		announced := "-"
		if len(p.Announced) > 0 {
			announced = strings.Join(p.Announced, " ")
		}
		bfd := ""
		if p.BFD != "" {
			bfd = "  bfd " + p.BFD
		}
		fmt.Fprintf(w, "  peer %s AS %d  %s%s  announced: %s\n", p.Address, p.PeerAS, state, bfd, announced)
		if p.LastError != "" {
			at := ""
			if p.LastErrorAt != nil {
				at = " (" + p.LastErrorAt.In(now.Location()).Format(time.DateTime) + ")"
			}
			fmt.Fprintf(w, "    last error: %s%s\n", p.LastError, at)
		}
	}
	for _, v := range b.VIPs {
		state := "WITHDRAWN"
		if v.Announced {
			state = "ANNOUNCED"
		}
		since := ""
		if !v.Since.IsZero() {
			since = " for " + ago(now, v.Since)
		}
		fmt.Fprintf(w, "  vip %s %s%s: %s\n", v.VIP, state, since, v.Reason)
	}
}

// ago prints how long before now t was, to the second.
func ago(now, t time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}

// printFleet prints flow-state sharing's state ([fleet]), one line for
// the appliance and one per peer.
func printFleet(w io.Writer, f *control.Fleet) {
	if f == nil {
		return
	}
	if f.Error != "" {
		fmt.Fprintf(w, "fleet: %s: %s\n", f.Address, f.Error)
		return
	}
	join := fmt.Sprintf("joined in %s", seconds(f.JoinSeconds))
	switch {
	case !f.Joined:
		join = fmt.Sprintf("JOINING for %s (waiting for %s): VIPs held back", seconds(f.JoinSeconds), strings.Join(f.JoinPending, ", "))
	case f.JoinTimedOut:
		join = fmt.Sprintf("joined by TIMEOUT after %s without %s", seconds(f.JoinSeconds), strings.Join(f.JoinPending, ", "))
	}
	fmt.Fprintf(w, "fleet: %s %s; exceptions owned %d (%d records queued), held %d of %d; packets placed by a peer's entry %d; join timeouts %d\n",
		f.Address, join, f.Owned, f.Queued, f.Held, f.Capacity, f.PeerHits, f.JoinTimeouts)
	if len(f.Drops) > 0 || f.Backlog > 0 || f.HandoffFull > 0 {
		fmt.Fprintf(w, "  dropped from no peer: %s; loop behind %d; hand-off full %d\n", dropList(f.Drops), f.Backlog, f.HandoffFull)
	}
	for _, p := range f.Peers {
		lag := "never heard"
		if p.LagSeconds >= 0 {
			lag = "lag " + seconds(p.LagSeconds)
		}
		fmt.Fprintf(w, "  peer %s %s, %s: owns %d, held %d; records sent %d, received %d; datagrams %d/%d, bytes %d/%d",
			p.Address, p.State, lag, p.Owned, p.Held, p.RecordsSent, p.RecordsReceived, p.DatagramsSent, p.DatagramsReceived, p.BytesSent, p.BytesReceived)
		if p.SendErrors > 0 {
			fmt.Fprintf(w, "; send errors %d", p.SendErrors)
		}
		if len(p.Drops) > 0 {
			fmt.Fprintf(w, "; dropped %s", dropList(p.Drops))
		}
		fmt.Fprintln(w)
	}
}

// dropList prints drop counts by reason, in reason order.
func dropList(m map[string]uint64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// seconds prints a duration given in seconds, to the millisecond.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
