package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
)

// The commands that talk to a running daemon through its control socket.

func socketFlags() []cli.Flag {
	return []cli.Flag{
		configFlag(),
		&cli.StringFlag{Name: "socket", Usage: "the control socket `PATH` (default: control_socket of the configuration, else " + config.DefaultControlSocket + ")"},
	}
}

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"}
}

// socketPath finds the control socket: --socket, else control_socket of
// the configuration file, else the default. Only that key is read, and a
// file that does not parse (being edited, during exactly the incident
// where the CLI is needed) still gives its control_socket line, or the
// default: its syntax error is printed as a warning in validate's
// file:line: form, and the command goes on.
// defaultConfig is where every command looks for the configuration.
const defaultConfig = "/etc/xlb/xlb.toml"

// configFlag is --config, shared by every command that reads the
// configuration or finds the control socket in it.
func configFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: defaultConfig, Usage: "the appliance configuration `FILE` (rules are read from its rules_dir)"}
}

func socketPath(c *cli.Context) (string, error) {
	if s := c.String("socket"); s != "" {
		return s, nil
	}
	path := c.String("config")
	sock, problem, err := config.ControlSocket(path)
	if err != nil {
		if !c.IsSet("config") && errors.Is(err, os.ErrNotExist) {
			return config.DefaultControlSocket, nil
		}
		return "", fmt.Errorf("find the control socket: %w (or give --socket)", err)
	}
	if problem != nil {
		fmt.Fprintf(c.App.ErrWriter, "warning: %s: %s does not parse; using control socket %s (--socket chooses another)\n", problem, path, sock)
	}
	return sock, nil
}

// withClient runs f with a client of the daemon's socket, giving up
// after 2 minutes.
func withClient(c *cli.Context, f func(ctx context.Context, cl *control.Client) error) error {
	return withClientFor(c, 2*time.Minute, f)
}

// withClientFor is withClient giving up after limit.
func withClientFor(c *cli.Context, limit time.Duration, f func(ctx context.Context, cl *control.Client) error) error {
	path, err := socketPath(c)
	if err != nil {
		return err
	}
	cl := control.NewClient(path)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.Context, limit)
	defer cancel()
	return f(ctx, cl)
}

func noArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError{fmt.Sprintf("%s takes no arguments, got %q", c.Command.FullName(), c.Args().First())}
	}
	return nil
}

// summaryAbove is how many rules status prints in full by default: above
// it, a summary.
const summaryAbove = 20

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show the running appliance: counters, rules, tiers and backends",
		ArgsUsage: " ",
		Description: "Prints the appliance (configuration, XDP mode, queues, packet counters, drops by reason) and,\n" +
			"per rule, its eligible tier and every backend: role and admin state with their source (config or\n" +
			"cli), health, weight configured and effective, Maglev share, tracked connections and packets/s.\n" +
			"Recent tier switches and state overrides that match nothing are listed at the end. With [bgp]:\n" +
			"the appliance's drain, each BGP peer (state, uptime, announced prefixes, last error), each VIP's\n" +
			"announcement and its reason, and per rule a table digest (equal on appliances that place flows alike).\n\n" +
			fmt.Sprintf("An appliance with more than %d rules gets a summary instead of the rule tables: rules per tier,\n", summaryAbove) +
			"backends per health, and the rules that need attention (not in their PRIMARY tier, first health\n" +
			"checks under way, or a backend that is not healthy). --rule, --vip and --backend select rules\n" +
			"and print their tables (--backend only that backend's row), --all every rule's; --limit and\n" +
			"--offset page them. --json prints the daemon's answer to the same selection (without a flag:\n" +
			"every rule; --summary: the summary).",
		Flags: append(append(socketFlags(), jsonFlag()), selectionFlags("table", "the rule (or backend service) `NAME`")...),
		Action: func(c *cli.Context) error {
			q, selected, err := selectionQuery(c)
			if err != nil {
				return err
			}
			return withClient(c, func(ctx context.Context, cl *control.Client) error {
				if c.Bool("json") {
					q.Summary = c.Bool("summary")
					return printStatusJSON(ctx, c.App.Writer, cl, q) // stream.go: as it arrives
				}
				if !selected {
					// The summary first; a small appliance gets its tables.
					q.Summary = true
					st, err := cl.Status(ctx, q)
					if err != nil {
						return err
					}
					if c.Bool("summary") || st.Summary == nil || st.Summary.Rules > summaryAbove {
						printStatusSummary(c.App.Writer, st, time.Now())
						return nil
					}
					q.Summary, q.Limit, q.Offset = false, 0, 0
				}
				st, err := cl.Status(ctx, q)
				if err != nil {
					return err
				}
				printStatus(c.App.Writer, st, time.Now())
				return nil
			})
		},
	}
}

// selectionFlags are the flags that select and page rules (status,
// backend list); what names what a rule shows.
func selectionFlags(what, rule string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "rule", Aliases: []string{"r"}, Usage: rule},
		&cli.StringFlag{Name: "vip", Usage: "the rules of the VIP `ADDR`"},
		&cli.StringFlag{Name: "backend", Usage: "the rules with the backend `ADDR`, and only its row"},
		&cli.BoolFlag{Name: "all", Usage: "every rule's " + what},
		&cli.BoolFlag{Name: "summary", Usage: "the summary, whatever the number of rules"},
		&cli.IntFlag{Name: "limit", Value: summaryAbove, Usage: "at most `N` rules (0: no limit; --all, --json: no limit unless given)"},
		&cli.IntFlag{Name: "offset", Usage: "skip the first `N` selected rules"},
	}
}

// selectionQuery reads selectionFlags: the query, and whether the flags
// select rules (else the summary decides). --json without a selection or
// a page answers every rule, as before summaries.
func selectionQuery(c *cli.Context) (control.StatusQuery, bool, error) {
	name := c.Command.FullName()
	if err := noArgs(c); err != nil {
		return control.StatusQuery{}, false, err
	}
	if c.Int("limit") < 0 || c.Int("offset") < 0 {
		return control.StatusQuery{}, false, usageError{name + ": --limit and --offset must not be negative"}
	}
	if c.Bool("summary") && c.Bool("all") {
		return control.StatusQuery{}, false, usageError{name + ": --summary and --all exclude each other"}
	}
	q := control.StatusQuery{Rule: c.String("rule"), VIP: c.String("vip"), Backend: c.String("backend"), Offset: c.Int("offset"), Limit: c.Int("limit")}
	selected := q.Rule != "" || q.VIP != "" || q.Backend != "" || c.Bool("all")
	if c.Bool("all") && !c.IsSet("limit") {
		q.Limit = 0
	}
	if c.Bool("json") && !selected && !c.Bool("summary") && !c.IsSet("limit") && !c.IsSet("offset") {
		q.Limit = 0 // every rule, as before summaries
	}
	return q, selected, nil
}

// withStatus asks the daemon for its status and prints it as JSON with
// --json, else with print.
func withStatus(c *cli.Context, print func(st *control.Status)) error {
	return withClient(c, func(ctx context.Context, cl *control.Client) error {
		st, err := cl.Status(ctx, control.StatusQuery{})
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, st)
		}
		print(st)
		return nil
	})
}

// ruleFlag is --rule. Required flags are checked by need, not by
// urfave/cli, whose "Required flag not set" would exit 1, not 2.
func ruleFlag(required bool) *cli.StringFlag {
	u := "the forwarding rule `NAME`"
	if required {
		u += " (required)"
	}
	return &cli.StringFlag{Name: "rule", Aliases: []string{"r"}, Usage: u}
}

// need returns a usage error for the first of flags that is not set.
func need(c *cli.Context, flags ...string) error {
	for _, f := range flags {
		if c.String(f) == "" {
			return usageError{fmt.Sprintf("%s: --%s is required", c.Command.FullName(), f)}
		}
	}
	return nil
}

func backendCommand() *cli.Command {
	change := func(action control.BackendAction, usage, args, desc string, flags []cli.Flag, build func(c *cli.Context, ch *control.BackendChange) error) *cli.Command {
		return &cli.Command{
			Name: string(action), Usage: usage, ArgsUsage: args, Description: desc,
			Flags: append(append(socketFlags(), ruleFlag(true), jsonFlag()), flags...),
			Action: func(c *cli.Context) error {
				if err := need(c, "rule"); err != nil {
					return err
				}
				want := strings.Count(args, " ") + 1
				if c.NArg() != want {
					return usageError{fmt.Sprintf("backend %s: want %s, got %d argument(s)", action, args, c.NArg())}
				}
				ch := control.BackendChange{Action: action, Rule: c.String("rule"), Backend: c.Args().First()}
				if build != nil {
					if err := build(c, &ch); err != nil {
						return err
					}
				}
				return withClient(c, func(ctx context.Context, cl *control.Client) error {
					res, err := cl.ChangeBackend(ctx, ch)
					if err != nil {
						return err
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, res)
					}
					printBackendChange(c.App.Writer, res, time.Now())
					return nil
				})
			},
		}
	}
	return &cli.Command{
		Name:  "backend",
		Usage: "list backends and change them: mark, drain, undrain, weight, reset",
		Description: "Changes are kept in the state file (state_file), applied over the rule files, survive restarts\n" +
			"and are shown with source cli in 'xlb backend list'; the rule files are never rewritten.\n" +
			"A change is acknowledged once saved and in force. --rule takes a rule or a backend service:\n" +
			"a backend of a service (services_dir) changes in every rule that names the service.",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list backends with role, admin state, health, weights, tier, connections and packets/s",
				ArgsUsage: " ",
				Description: fmt.Sprintf("Lists the backends of every rule while the appliance has at most %d rules; beyond, a summary\n", summaryAbove) +
					"(backends per health, drained, eligible, and the rules that need attention). --rule, --vip and\n" +
					"--backend select rules and list their backends (--backend only that backend's rows), --all every\n" +
					"rule's; --limit and --offset page them by rule, as xlb status does. --json prints the daemon's\n" +
					"answer to the same selection as it arrives (without a flag: every rule's backends).",
				Flags: append(append(socketFlags(), jsonFlag()), selectionFlags("backends", "the rule (or backend service) `NAME`")...),
				Action: func(c *cli.Context) error {
					q, selected, err := selectionQuery(c)
					if err != nil {
						return err
					}
					return withClient(c, func(ctx context.Context, cl *control.Client) error {
						if c.Bool("json") {
							if c.Bool("summary") {
								return usageError{"backend list: --summary has no JSON form of its own: xlb status --json --summary"}
							}
							return printReply(c.App.Writer, func() (io.ReadCloser, error) { return cl.BackendsReply(ctx, q) }) // stream.go
						}
						if !selected {
							// The summary first; a small appliance gets its list.
							sq := q
							sq.Summary = true
							st, err := cl.Status(ctx, sq)
							if err != nil {
								return err
							}
							if c.Bool("summary") || st.Summary == nil || st.Summary.Rules > summaryAbove {
								printBackendSummary(c.App.Writer, st)
								return nil
							}
							q.Limit, q.Offset = 0, 0
						}
						// One answer gives the rows, the rules' VIPs and the rates.
						st, err := cl.Status(ctx, q)
						if err != nil {
							return err
						}
						var bs []control.Backend
						vips := map[string]string{}
						for _, r := range st.Rules {
							bs = append(bs, r.Backends...)
							vips[r.Name] = r.VIP
						}
						printBackendList(c.App.Writer, bs, vips, st.Rates, time.Now())
						printPageHint(c.App.Writer, st, len(st.Rules))
						return nil
					})
				},
			},
			change(control.ActionMark, "mark a backend primary or failover", "ADDR",
				"Overrides the role of the backend's group for this backend. Refused when the rule would be left\n"+
					"with failover backends and no primary. Marking it with its group's role removes the override.",
				[]cli.Flag{&cli.StringFlag{Name: "role", Usage: "primary or failover (required)"}},
				func(c *cli.Context, ch *control.BackendChange) error {
					ch.Role = c.String("role")
					if ch.Role != "primary" && ch.Role != "failover" {
						return usageError{fmt.Sprintf("--role %q: want primary or failover", ch.Role)}
					}
					return nil
				}),
			change(control.ActionDrain, "stop new connections to a backend; tracked ones stay for connection_draining_timeout", "ADDR",
				"The backend leaves the eligible set at once; its tracked connections are honoured for the rule's\n"+
					"connection_draining_timeout from now, then dropped from the tables.", nil, nil),
			change(control.ActionUndrain, "put a drained backend back in service", "ADDR", "Ends a drain made with 'xlb backend drain'.", nil, nil),
			change(control.ActionWeight, "override a backend's weight (WEIGHTED_MAGLEV rules)", "ADDR N",
				"Sets the backend's weight to N (0..1000), replacing the health check's weight header and any\n"+
					"static weight, until 'xlb backend reset'.", nil,
				func(c *cli.Context, ch *control.BackendChange) error {
					n, err := strconv.Atoi(c.Args().Get(1))
					if err != nil || n < 0 || n > 1000 {
						return usageError{fmt.Sprintf("backend weight: %q is not a weight in 0..1000", c.Args().Get(1))}
					}
					ch.Weight = &n
					return nil
				}),
			change(control.ActionReset, "remove every CLI override of a backend", "ADDR",
				"Removes the role, drain and weight overrides of the backend (also overrides that no longer match\n"+
					"the configuration); the rule files decide again.", nil, nil),
		},
	}
}

func reloadCommand() *cli.Command {
	return &cli.Command{
		Name:      "reload",
		Usage:     "make the daemon re-read its configuration and state file",
		ArgsUsage: " ",
		Description: "Like SIGHUP, but waits for the answer: either the new configuration is in force (tracked\n" +
			"connections of unchanged backends kept, removed backends drained per connection_draining_timeout),\n" +
			"or it is rejected whole with every error as file:line: key: message, and the running\n" +
			"configuration keeps serving. Warnings (validate's) are printed either way. A configuration that\n" +
			"leaves no rule, or a rule whose every backend is drained, is refused unless --force; keys only a\n" +
			"start applies (interface, queues, conntrack sizes…) are refused by name (xlb restart applies them).",
		Flags: append(socketFlags(), jsonFlag(), &cli.BoolFlag{Name: "force", Usage: "apply a configuration the guard rails refuse (no rules left, a rule with only drained backends)"}),
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return withClient(c, func(ctx context.Context, cl *control.Client) error {
				res, err := cl.Reload(ctx, control.ReloadRequest{Force: c.Bool("force")})
				var e *control.Error
				if errors.As(err, &e) {
					for _, w := range e.Warnings {
						fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", w)
					}
				}
				if err == nil {
					for _, w := range res.Warnings {
						fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", w)
					}
				}
				if errors.As(err, &e) && len(e.Issues) > 0 {
					if c.Bool("json") {
						printJSON(c.App.Writer, e)
					}
					printReloadIssues(c.App.ErrWriter, e)
					return fmt.Errorf("%s (%d error(s))", e.Message, len(e.Issues))
				}
				if err != nil {
					return err
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, res)
				}
				printReload(c.App.Writer, res)
				return nil
			})
		},
	}
}

func conntrackCommand() *cli.Command {
	op := func(op control.ConntrackOp, usage string, extra ...cli.Flag) *cli.Command {
		return &cli.Command{
			Name: string(op), Usage: usage, ArgsUsage: " ",
			Flags: append(append(socketFlags(), ruleFlag(false),
				&cli.StringFlag{Name: "backend", Aliases: []string{"b"}, Usage: "only entries to backend `ADDR` (needs --rule)"},
				jsonFlag()), extra...),
			Action: func(c *cli.Context) error {
				if err := noArgs(c); err != nil {
					return err
				}
				q := control.ConntrackQuery{Op: op, Rule: c.String("rule"), Backend: c.String("backend")}
				if q.Backend != "" && q.Rule == "" {
					return usageError{fmt.Sprintf("conntrack %s: --backend needs --rule", op)}
				}
				if op == control.ConntrackList {
					q.Limit = c.Int("limit")
					if q.Limit < 1 {
						return usageError{fmt.Sprintf("conntrack list: --limit %d: want at least 1", q.Limit)}
					}
				}
				return withClient(c, func(ctx context.Context, cl *control.Client) error {
					res, err := cl.Conntrack(ctx, q)
					if err != nil {
						return err
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, res)
					}
					printConntrack(c.App.Writer, op, res)
					return nil
				})
			},
		}
	}
	return &cli.Command{
		Name:  "conntrack",
		Usage: "list, count or flush tracked flows",
		Description: "Works on every queue's table and the shared PER_SESSION table. Flushing makes the next packet\n" +
			"of each flushed flow a new connection (placed by the Maglev table again).",
		Subcommands: []*cli.Command{
			op(control.ConntrackList, "list tracked flows", &cli.IntFlag{Name: "limit", Value: 1000, Usage: "show at most `N` entries"}),
			op(control.ConntrackCount, "count tracked flows"),
			op(control.ConntrackFlush, "remove tracked flows"),
		},
	}
}

func lookupCommand() *cli.Command {
	return &cli.Command{
		Name:      "lookup",
		Usage:     "show where a flow goes, and why",
		ArgsUsage: " ",
		Description: "Finds the rule the packet matches and prints the selection key and hash, the tracking key,\n" +
			"whether a tracked entry exists and is still valid, the eligible tier, the Maglev slot and the\n" +
			"backend, for an established packet of the flow (--syn: for a connection's first SYN). A packet\n" +
			"that matches no rule is PASSed to the appliance's own stack by the XDP program. --rule only\n" +
			"supplies defaults (VIP, protocol, first port); without it give --dst and, for TCP and UDP,\n" +
			"--dst-port.",
		Flags: append(socketFlags(), ruleFlag(false),
			&cli.StringFlag{Name: "src", Usage: "the client `ADDR:PORT` (ADDR alone for ESP, GRE) (required)"},
			&cli.StringFlag{Name: "dst", Usage: "the VIP `ADDR` (default: the rule's; required without --rule)"},
			&cli.StringFlag{Name: "proto", Usage: "TCP, UDP, ESP, GRE or a number (default: the rule's protocol, TCP for L3_DEFAULT or without --rule)"},
			&cli.IntFlag{Name: "dst-port", Usage: "destination `PORT` (default: the rule's first port)"},
			&cli.BoolFlag{Name: "syn", Usage: "ask about a new connection's SYN"},
			jsonFlag()),
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if err := need(c, "src"); err != nil {
				return err
			}
			if c.String("rule") == "" && c.String("dst") == "" {
				return usageError{"lookup: give --rule or --dst (the VIP)"}
			}
			if p := c.Int("dst-port"); p < 0 || p > 65535 {
				return usageError{fmt.Sprintf("--dst-port %d: want 1..65535", p)}
			}
			q := control.LookupQuery{Rule: c.String("rule"), Src: c.String("src"), Dst: c.String("dst"), Proto: c.String("proto"), DstPort: c.Int("dst-port"), SYN: c.Bool("syn")}
			return withClient(c, func(ctx context.Context, cl *control.Client) error {
				r, err := cl.Lookup(ctx, q)
				if err != nil {
					return err
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, r)
				}
				printLookup(c.App.Writer, r)
				return nil
			})
		},
	}
}
