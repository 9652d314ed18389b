package daemon

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/neigh"
)

// Options configure a daemon.
type Options struct {
	ConfigPath string
	Log        *slog.Logger
	// Signals makes Run handle SIGHUP (reload) and SIGTERM/SIGINT (stop);
	// tests leave it off and cancel the context instead.
	Signals bool
}

// daemon is a running appliance: the data plane (engine) and the control
// plane that feeds it. All control-plane state is owned by the goroutine
// running Run; other goroutines talk to it through requests.
type daemon struct {
	opts     Options
	log      *slog.Logger
	clock    *clock
	engine   *engine
	resolver *neigh.Resolver
	reg      *registry
	checker  *health.Checker

	// Health changes arrive from prober goroutines: OnChange parks them in
	// pendingProbes and pokes healthPoke; the control loop applies them in
	// one batch, so a burst of changes costs one recomputation.
	pendingMu     sync.Mutex
	pendingProbes map[probeKey]probe
	healthPoke    chan struct{}

	// Owned by the Run goroutine.
	cfg      *config.Config
	state    *config.State
	view     *config.View
	rules    map[string]*ruleRuntime
	probes   map[probeKey]probe
	nexthops map[nhKey]nexthop
	requests chan func()

	mu     sync.Mutex // guards status
	status publishedStatus

	bgp atomic.Pointer[bgpRuntime] // nil without [bgp] (bgp.go)

	reloadsOK, reloadsRejected atomic.Uint64
}

// Run loads the configuration, starts the data plane and serves until ctx
// ends (or SIGTERM with Options.Signals). A configuration error is
// returned before anything is attached.
func Run(ctx context.Context, opts Options) error {
	d, err := newDaemon(opts)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// newDaemon loads and validates the configuration; it changes nothing on the
// system.
func newDaemon(opts Options) (*daemon, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	cfg, warnings, err := config.Load(opts.ConfigPath)
	for _, w := range warnings {
		opts.Log.Warn("configuration", "warning", w.String())
	}
	if err != nil {
		return nil, err
	}
	st, err := config.LoadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	d := &daemon{
		opts: opts, log: opts.Log, clock: newClock(), reg: newRegistry(),
		cfg: cfg, state: st, rules: map[string]*ruleRuntime{},
		probes: map[probeKey]probe{}, nexthops: map[nhKey]nexthop{},
		requests:      make(chan func()),
		pendingProbes: map[probeKey]probe{}, healthPoke: make(chan struct{}, 1),
	}
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

// Run starts the data plane and runs the control loop.
func (d *daemon) Run(ctx context.Context) error {
	var err error
	d.engine, err = startEngine(engineConfig{
		Interface:  d.cfg.Interface,
		Queues:     queueList(d.cfg.Queues),
		XDPMode:    attachModes.of(d.cfg.XDPMode),
		Bind:       bindModes.of(d.cfg.BindMode),
		MaxEntries: d.cfg.Conntrack.MaxEntries,
		Seed:       randomSeed(),
		Clock:      d.clock,
		Log:        d.log,
	})
	if err != nil {
		return fmt.Errorf("start data plane: %w", err)
	}
	defer func() {
		if err := d.engine.Close(); err != nil {
			d.log.Error("stop data plane", "err", err)
		}
		d.log.Info("stopped: xdp program detached, sockets closed")
	}()
	d.resolver = neigh.New(nil)
	d.checker = health.New(health.Options{OnChange: d.onHealth})
	defer d.checker.Stop()
	if err := d.checker.Set(d.healthTargets()); err != nil {
		return fmt.Errorf("start health checks: %w", err)
	}
	d.resolveAll(ctx)
	if err := d.publish(); err != nil {
		return err
	}
	defer d.startControl(ctx)()
	defer d.startMetrics()()
	stopBGP, err := d.startBGP(ctx)
	if err != nil {
		return err
	}
	defer stopBGP() // first of the deferred: withdraw, wait, then detach
	d.log.Info("serving", "rules", len(d.cfg.Rules), "queues", d.engine.Queues(), "xdp_mode", d.engine.Mode().String(), "zerocopy", d.engine.ZeroCopy())

	var sigs chan os.Signal
	if d.opts.Signals {
		sigs = make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(sigs)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastResolve := time.Now()
	var lastHealthPublish time.Time
	var healthDue <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-sigs:
			if s == syscall.SIGHUP {
				if err := d.Reload(); err != nil {
					d.log.Error("reload rejected; the running configuration keeps serving", "err", err)
				}
				continue
			}
			d.log.Info("stopping", "signal", s.String())
			return nil
		case f := <-d.requests:
			f()
		case <-d.healthPoke:
			if !d.applyProbes() {
				continue
			}
			// A weight header that oscillates must not rebuild the Maglev
			// tables on every probe: publish at most every
			// minHealthPublish, the latest verdicts included.
			if wait := minHealthPublish - time.Since(lastHealthPublish); wait > 0 {
				if healthDue == nil {
					healthDue = time.After(wait)
				}
				continue
			}
			lastHealthPublish = time.Now()
			if err := d.publish(); err != nil {
				d.log.Error("recompute after health change", "err", err)
			}
		case <-healthDue:
			healthDue = nil
			lastHealthPublish = time.Now()
			if err := d.publish(); err != nil {
				d.log.Error("recompute after health change", "err", err)
			}
		case now := <-tick.C:
			changed := false
			if now.Sub(lastResolve) >= 5*time.Second {
				changed = d.resolveAll(ctx)
				lastResolve = now
			}
			if changed || d.timerDue(now) {
				if err := d.publish(); err != nil {
					d.log.Error("recompute", "err", err)
				}
			}
		}
	}
}

// do runs f on the control goroutine and waits for it.
func (d *daemon) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case d.requests <- func() { f(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}

// timerDue reports whether a rule's eligible set may change with time
// alone (failback delay, undrain hold, drain deadlines).
func (d *daemon) timerDue(now time.Time) bool {
	for _, rt := range d.rules {
		if rt.prev != nil && !rt.prev.NextCompute.IsZero() && !now.Before(rt.prev.NextCompute) {
			return true
		}
	}
	return d.warmDue(now)
}
