package daemon

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xlbnet/xlb/pkg/bfd"
	"github.com/xlbnet/xlb/pkg/bgp"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/engine"
	"github.com/xlbnet/xlb/pkg/handover"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/neigh"
)

// Options configure a daemon.
type Options struct {
	ConfigPath string
	Log        *slog.Logger
	// Signals makes Run handle SIGHUP (reload), SIGUSR2 (restart: hand
	// over to a successor) and SIGTERM/SIGINT (stop); tests leave it off
	// and cancel the context instead.
	Signals bool
	// SuccessorArgs are the arguments a successor gets after
	// `run -c CONFIG` (the log flags).
	SuccessorArgs []string
}

// exitMode is how a daemon's Run ends.
type exitMode uint8

const (
	exitNone       exitMode = iota // running
	exitStop                       // detach, unpin, close: the appliance stops
	exitHandedOver                 // a successor serves: close fds, detach nothing
	exitStored                     // SIGTERM under systemd: everything to the fd store, detach nothing
)

// daemon is a running appliance: the data plane (engine) and the control
// plane that feeds it. All control-plane state is owned by the goroutine
// running Run; other goroutines talk to it through requests.
type daemon struct {
	opts     Options
	log      *slog.Logger
	clock    *clock
	engine   *engine.Engine
	resolver *neigh.Resolver
	reg      *registry
	checker  *health.Checker
	dataPath *dataPathProbes // probes through the data path (probepath.go)

	// Health changes arrive from prober goroutines: OnChange parks them in
	// pendingProbes and pokes healthPoke; the control loop applies them in
	// one batch, so a burst of changes costs one recomputation.
	pendingMu     sync.Mutex
	pendingProbes map[probeKey]probe
	healthPoke    chan struct{}

	// Owned by the Run goroutine.
	loader   *config.Loader
	cfg      *config.Config
	state    *config.State
	view     *config.View
	rules    map[string]*ruleRuntime
	pub      publication // publish.go
	probes   map[probeKey]probe
	probers  proberCache // services.go: which rule probes a service's backend
	nexthops map[nhKey]nexthop
	// templates shares the encapsulation templates (nexthop.go).
	templates templateCache
	requests  chan func()
	// loopDone is closed when the control loop has ended: a goroutine
	// that waits on requests gives up (do).
	loopDone chan struct{}
	// restart is the restart under way, or nil (handover.go).
	restart *restartUnderWay
	// docBuckets are the state document's rules, verdicts and next hops
	// in buckets, as last encoded (docparts.go); stateWriter is the
	// buffer they are written through, kept (writeState); stateStore is
	// what systemd's fd store holds of the document (statestore.go).
	docBuckets  docBuckets
	docScratch  []byte // writeBucketRules's
	stateWriter *bufio.Writer
	stateStore  storedParts

	mu     sync.Mutex // guards status
	status publishedStatus

	bgp   atomic.Pointer[bgpRuntime]   // nil without [bgp] (bgp.go)
	fleet atomic.Pointer[fleetRuntime] // nil without [fleet] (fleet.go)
	// bfdCarried are the BFD sessions a predecessor handed over, until
	// the speaker starts (bgp.go openBGP).
	bfdCarried []bfd.Carried
	// bfdEarly are those sessions resumed at the cut-over, before the
	// speaker starts (successor.go), and bgpRestarting says this daemon
	// took over from a predecessor whose routes the routers keep until
	// the first speaker's End-of-RIB: both for openBGP, once.
	bfdEarly      *bgp.BFDSessions
	bgpRestarting bool

	seed      uint64       // conntrack bucket seed
	exit      exitMode     // set on the control goroutine; Run returns when it is set
	exitErr   error        // why an exitStop that is a failure stopped (Run returns it)
	controlLn net.Listener // the control socket's listener (handed over on restart)
	metricsLn net.Listener // the metrics endpoint's listener
	// metricsStop stops the metrics server; a reload that moves the
	// endpoint replaces both (reloadkeys.go).
	metricsMu   sync.Mutex
	metricsStop func()
	store       *fromStore // what systemd's fd store passed at start (systemd.go)

	rates *estimator // packets/s over a fixed window (rates.go)

	reloadsOK, reloadsRejected atomic.Uint64

	capturing atomic.Bool // a capture runs (capture.go)
	events    eventLog    // events.go
	started   time.Time   // when Run started (status: uptime)
	// startPhases are the start's phases and their durations, logged
	// with "serving" (where a slow start goes; bench/scale reads them);
	// at a cold start "nexthops" ran beside "engine".
	startPhases []any
}

// Run loads the configuration, starts the data plane and serves until ctx
// ends (or SIGTERM with Options.Signals). A configuration error is
// returned before anything is attached.
func Run(ctx context.Context, opts Options) error {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	s, err := handover.Inherited(successorTimeouts)
	if err != nil {
		return fmt.Errorf("hand-over: %w", err)
	}
	if s != nil {
		return runSuccessor(ctx, opts, s)
	}
	t0 := time.Now()
	d, err := newDaemon(opts)
	if err != nil {
		return err
	}
	d.phase("config", t0)
	if d.store, err = loadStore(d.log); err != nil {
		return err
	}
	if d.store != nil { // the document's files there are replaced by this process's
		d.stateStore.stale, d.stateStore.gen = d.store.stateNames, d.store.stateGen
	}
	return d.Run(ctx)
}

// newDaemon loads and validates the configuration; it changes nothing on the
// system.
func newDaemon(opts Options) (*daemon, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	loader := new(config.Loader) // a reload parses again only the files that changed
	cfg, warnings, err := loader.Load(opts.ConfigPath)
	for _, w := range warnings {
		opts.Log.Warn("configuration", "warning", w.String())
	}
	if err != nil {
		return nil, err
	}
	if host := config.CheckHost(cfg); len(host) > 0 {
		return nil, &config.Error{Issues: host}
	}
	st, err := config.LoadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	d := &daemon{
		opts: opts, log: opts.Log, clock: newClock(), reg: newRegistry(), loader: loader,
		cfg: cfg, state: st, rules: map[string]*ruleRuntime{},
		probes: map[probeKey]probe{}, nexthops: map[nhKey]nexthop{},
		requests: make(chan func()), loopDone: make(chan struct{}),
		pendingProbes: map[probeKey]probe{}, healthPoke: make(chan struct{}, 1),
		dataPath: newDataPathProbes(),
	}
	d.rates = newEstimator(estimatorWindow, d.takeSample)
	d.view = config.Apply(cfg, st)
	for _, s := range d.view.Stale {
		d.log.Warn("state overlay", "issue", s.String())
	}
	return d, nil
}

func queueList(q config.Queues) []int {
	if q.All {
		return nil
	}
	if len(q.List) > 0 {
		return slices.Clone(q.List)
	}
	out := make([]int, q.Count)
	for i := range out {
		out[i] = i
	}
	return out
}

func randomSeed() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:])
}

// engineConfig is the data plane's configuration.
func (d *daemon) engineConfig() engine.Config {
	c := engine.Config{
		Interface:      d.cfg.Interface,
		Queues:         queueList(d.cfg.Queues),
		XDPMode:        attachModes.of(d.cfg.XDPMode),
		Bind:           bindModes.of(d.cfg.BindMode),
		MaxEntries:     d.cfg.Conntrack.MaxEntries,
		Seed:           d.seed,
		Clock:          d.clock,
		ClockBase:      d.clock.Base(),
		PinDir:         d.cfg.PinDir,
		WorkerNice:     d.cfg.WorkerNice,
		BusyPoll:       d.cfg.BusyPoll,
		BusyPollBudget: d.cfg.BusyPollBudget,
		Log:            d.log,

		NewEntriesPerSecond: d.cfg.Conntrack.NewEntriesPerSecond,
		NewEntriesBurst:     d.cfg.Conntrack.NewEntriesBurst,
		UnconfirmedIdle:     d.cfg.Conntrack.UnconfirmedIdle,
	}
	if f := d.cfg.Fleet; f != nil {
		c.PeerEntries, c.ExceptionRefresh = f.MaxExceptions, f.Refresh
	}
	return c
}

// Run starts the data plane and runs the control loop.
func (d *daemon) Run(ctx context.Context) (err error) {
	d.started = time.Now()
	if err := d.claim(); err != nil { // exclusive.go: one daemon per interface and socket
		return err
	}
	defer func() {
		if err != nil && d.exit != exitHandedOver {
			d.unclaim()
		}
	}()
	d.seed = randomSeed()
	if err := d.startFromStore(); err != nil {
		return err
	}
	d.resolver = neigh.New(nil)
	nexthops := time.Duration(-1) // the next-hop pass's time, when it ran beside the engine's start
	if d.engine == nil {
		cfg := d.engineConfig()
		if d.storeDoc() != nil { // after a crash under systemd
			cfg.Arenas, cfg.Keep = d.store.take, d.registryKeep()
		}
		// The next-hop pass reads the rules and the kernel's routes and
		// neighbours, nothing of the data plane, and writes only
		// d.nexthops, which nothing reads until it is done: it runs
		// beside the engine's start (the XDP program's verification,
		// the sockets, the arenas).
		passed := make(chan time.Duration, 1)
		go func() {
			t := time.Now()
			d.resolveAll(ctx)
			passed <- time.Since(t)
		}()
		d.engine, err = engine.Start(cfg)
		nexthops = <-passed
		if err != nil {
			return fmt.Errorf("start data plane: %w", err)
		}
	}
	d.store.close()
	d.storeArenas()
	t := d.phase("engine", d.started)
	if err := d.startHealth(); err != nil { // health.go
		d.exit = exitStop
		d.finish()
		return fmt.Errorf("start health checks: %w", err)
	}
	t = d.phase("health", t)
	if nexthops < 0 { // an engine taken over from systemd's fd store
		d.resolveAll(ctx)
		t = d.phase("nexthops", t)
	} else {
		d.startPhases = append(d.startPhases, "nexthops", nexthops.Round(time.Millisecond).String())
	}
	if err := d.publish(); err != nil {
		d.exit = exitStop
		d.finish()
		return err
	}
	d.phase("publish", t)
	return d.serve(ctx)
}

// serve serves the control socket and metrics and runs the control loop
// until the daemon stops or hands over, then finishes accordingly.
func (d *daemon) serve(ctx context.Context) error {
	defer d.finish()
	defer d.startControl(ctx)()
	defer d.startMetrics()()
	defer d.startRates()()
	stopFleet, err := d.startFleet(ctx) // fleet.go: before BGP, whose announcements wait for its join
	if err != nil {
		return err
	}
	defer stopFleet()
	stopBGP, err := d.startBGP(ctx)
	if err != nil {
		return err
	}
	defer stopBGP() // first of the deferred: withdraw, wait, then detach
	// Signals are handled before "serving" is said: a SIGTERM sent as
	// soon as the daemon says it serves must stop it cleanly, not kill it.
	var sigs chan os.Signal
	if d.opts.Signals {
		sigs = make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR2)
		defer signal.Stop(sigs)
	}
	d.log.Info("serving", append([]any{"rules", len(d.cfg.Rules), "queues", d.engine.Queues(), "xdp_mode", d.engine.Mode().String(), "zerocopy", d.engine.ZeroCopy()}, d.startPhases...)...)
	d.notify("READY=1\nSTATUS=serving")

	defer close(d.loopDone)
	defer d.abandonHandOver("the daemon stops") // before close(loopDone): a successor's driver may wait to post
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastResolve := time.Now()
	var healthPace healthPacer
	var healthDue <-chan time.Time
	for d.exit == exitNone {
		select {
		case <-ctx.Done():
			d.exit = exitStop
		case s := <-sigs:
			switch s {
			case syscall.SIGHUP:
				if r := d.restart; r != nil {
					r.reload = true
					d.log.Info("reload deferred: a restart is under way; the successor reloads once it serves (this daemon, if the restart fails)")
					continue
				}
				if _, err := d.Reload(false); err != nil {
					d.log.Error("reload rejected; the running configuration keeps serving", "err", err)
				}
			case syscall.SIGUSR2:
				d.restartOnSignal()
			case syscall.SIGTERM:
				d.log.Info("stopping", "signal", s.String())
				d.exit = exitStop
				if underSystemd() {
					d.exit = exitStored // systemctl stop or restart: keep it all
				}
			default:
				d.log.Info("stopping", "signal", s.String())
				d.exit = exitStop
			}
		case f := <-d.requests:
			f()
		case <-d.healthPoke:
			if !d.applyProbes() {
				continue
			}
			// Verdicts are published in batches (healthPacer): the
			// latest ones ride with the next publication.
			if wait := healthPace.hold(time.Now()); wait > 0 {
				if healthDue == nil {
					healthDue = time.After(wait)
				}
				continue
			}
			d.publishHealth(&healthPace)
		case <-healthDue:
			healthDue = nil
			d.publishHealth(&healthPace)
		case now := <-tick.C:
			if err := d.engine.LinkGone(); err != nil {
				d.log.Error("stopping: the interface is gone", "err", err)
				d.exit, d.exitErr = exitStop, err
				continue
			}
			changed := false
			if now.Sub(lastResolve) >= 5*time.Second {
				nh := d.resolveAll(ctx)
				d.touchBackends(nh) // publish.go
				changed = len(nh) > 0
				lastResolve = now
			}
			if changed || d.timerDue(now) {
				if err := d.publish(); err != nil {
					d.log.Error("recompute", "err", err)
				}
			}
		}
	}
	return d.exitErr
}

// finish ends the daemon as d.exit says: after a hand-over only this
// process's fds are closed; otherwise the program is detached and its
// pins removed.
func (d *daemon) finish() {
	if d.checker != nil {
		d.checker.Stop()
	}
	if d.loader != nil {
		d.loader.Close() // its watch on rules_dir
	}
	d.closeProbePath()
	switch d.exit {
	case exitHandedOver:
		if err := d.engine.Release(); err != nil {
			d.log.Error("release data plane", "err", err)
		}
		d.log.Info("exited: the successor serves; nothing detached")
		return
	case exitStored:
		d.notify("STOPPING=1")
		d.storeForRestart()
		if err := d.engine.Release(); err != nil {
			d.log.Error("release data plane", "err", err)
		}
		return
	}
	d.notify("STOPPING=1")
	d.clearStore()
	if err := d.engine.Close(); err != nil {
		d.log.Error("stop data plane", "err", err)
	}
	d.log.Info("stopped: xdp program detached and unpinned, sockets closed")
}

// do runs f on the control goroutine and waits for it.
func (d *daemon) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case d.requests <- func() { f(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-d.loopDone:
		return errors.New("the daemon is stopping")
	}
	<-done
	return nil
}

// phase records that a phase of the start took from since to now, and
// returns now.
func (d *daemon) phase(name string, since time.Time) time.Time {
	now := time.Now()
	d.startPhases = append(d.startPhases, name, now.Sub(since).Round(time.Millisecond).String())
	return now
}

// timerDue reports whether a rule must be computed again with time alone
// (failback delay, undrain hold, drain deadlines, warm-up deadline,
// removed backends to forget: ruleRuntime.due).
func (d *daemon) timerDue(now time.Time) bool {
	for _, rt := range d.rules {
		if rt.due(now) {
			return true
		}
	}
	return false
}
