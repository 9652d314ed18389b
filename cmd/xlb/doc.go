// Command xlb is the xlb appliance: the daemon, its command-line client,
// and the tools around them (validate, lab, decap, pktgen). See
// `xlb --help`.
//
// Built with -tags xlbctl (`go build -tags xlbctl -o xlbctl ./cmd/xlb`)
// the package is xlbctl: the commands that talk to a running daemon and
// nothing else, the same code, flags and output as xlb's, without the
// daemon's packages, whose initialization is most of what a command costs
// before it does anything (docs/design.md, "Read commands at scale").
// Every file of the daemon or of a tool carries //go:build !xlbctl; the
// control commands' files carry none. The tests are the full build's
// (which holds every control command too); TestXlbctlBuild builds xlbctl
// and holds its dependencies and its help to xlb's.
//
// # Files: one home per concern
//
//	main.go      main: run the app, print the error, exit 1 or 2
//	app.go       the command tree (newApp), usage errors (exit status 2),
//	             xlb --version (pkg/buildinfo)
//	commands.go  the full build's commands, in the order --help lists them
//	commands_xlbctl.go  xlbctl's: the control commands, and the sentence
//	             for one of xlb's others
//	run.go       xlb run (the daemon: pkg/daemon.Run), with pkg/logflags
//	pprof.go     XLB_PPROF_LISTEN: Go's profiles of xlb run, for measuring
//	             (bench/scale), never needed to operate it
//	validate.go  xlb validate, and --config shared by every command
//	ctl.go       the commands that talk to a running daemon over its control
//	             socket (status, backend, reload, conntrack, lookup): flags,
//	             argument checks, the request; no printing of their own
//	render.go    every table those commands and simulate print, from the
//	             control API's answers; golden files in testdata/render
//	             (go test -run TestRender -update rewrites them)
//	stream.go    --json of status and backend list: the daemon's streamed
//	             answer copied to stdout as it arrives, indented
//	restart.go   xlb restart, upgrade and stop (stop removes a crashed
//	             daemon's pins itself)
//	simulate.go  xlb simulate (pkg/daemon.Simulate)
//	render_simulate.go  its table (apart from render.go: pkg/daemon's
//	             types, which xlbctl does not link)
//	capture.go   xlb capture: the daemon's capture stream written as pcapng,
//	             pcap or a listing (pkg/capture's writers)
//	top.go       xlb top: the terminal loop (raw keys, alternate screen,
//	             redraw every --interval)
//	render_top.go  xlb top's frame (printTop), golden file
//	             testdata/render/top.golden
//	appliance.go xlb appliance drain|undrain and the appliance part of status
//	             (drain, BGP peers, each VIP's announcement); golden file
//	             testdata/render/appliance.golden
//	lab.go, labxlb.go   xlb lab: the network-namespace testbed (--appliances N:
//	             a fleet behind BIRD, or FRR with --router frr), and xlb
//	             run in it
//	decap.go     xlb decap (pkg/decap)
//	pktgen.go    xlb pktgen (pkg/pktgen)
//	k8s.go       xlb k8s: executes the controller's own binary, xlb-k8s
//	             (cmd/xlb-k8s), found beside this one or in $PATH
//
// A new operator command goes in ctl.go (wiring) and render.go (its table,
// with a golden file), and in both command lists; a command with its own
// subsystem gets a file named after it (tagged !xlbctl if it needs more than
// the control socket). Every command has --help; read-only ones have --json,
// which prints the control API's answer as it came.
package main
