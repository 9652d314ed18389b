package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/xlbnet/xlb/pkg/bgp"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/engine"
	"github.com/xlbnet/xlb/pkg/handover"
	"github.com/xlbnet/xlb/pkg/neigh"
)

// runSuccessor is Run for a process started by a running daemon to take
// its place (handover.Inherited found the connection). It prepares while
// the predecessor keeps forwarding, and gives up (ABORT with the reason,
// exit with the error) on anything that goes wrong before the cut-over.
func runSuccessor(ctx context.Context, opts Options, s *handover.Successor) error {
	defer s.Close()
	if err := s.Hello(handover.Hello{Build: buildID(), States: stateVersions}); err != nil {
		return fmt.Errorf("hand-over: %w", err)
	}
	offer, err := s.ReceiveOffer()
	if err != nil {
		return fmt.Errorf("hand-over: %w", err)
	}
	defer offer.Close()
	d, notes, err := prepareSuccessor(opts, offer)
	if err != nil {
		reason := err.Error()
		var cerr *config.Error
		if errors.As(err, &cerr) {
			reason = "invalid configuration: " + strings.ReplaceAll(reason, "\n", "; ")
		}
		if aerr := s.Abort(reason); aerr != nil {
			opts.Log.Error("hand-over: tell the running daemon", "err", aerr)
		}
		return fmt.Errorf("hand-over: gave up before the cut-over: %w", err)
	}
	if err := s.Ready(notes...); err != nil {
		d.engine.Release()
		return fmt.Errorf("hand-over: %w", err)
	}
	var body cutoverBody
	if err := s.WaitCutover(&body); err != nil {
		d.engine.Release()
		return fmt.Errorf("hand-over: %w", err)
	}
	if err := d.engine.TakeOver(body.Free); err != nil {
		s.Failed(err.Error())
		d.engine.Release()
		return fmt.Errorf("hand-over: cut-over: %w", err)
	}
	d.engine.Begin()
	// The predecessor's document in systemd's fd store goes once this
	// process stored its own.
	d.stateStore.stale, d.stateStore.gen = append(body.StoreNames, stateFile), body.StoreGen
	if len(body.BFD) > 0 {
		d.bfdCarried = body.BFD // as they are now (cutoverBody)
	}
	d.resumeBFD()
	if err := s.Done(); err != nil {
		d.log.Warn("hand-over: tell the predecessor it is done", "err", err)
	}
	// The probers start now, from the verdicts as they are at the
	// cut-over (prepareSuccessor).
	var carried []probeState
	if len(body.Probes) > 0 {
		if err := json.Unmarshal(body.Probes, &carried); err != nil {
			carried = nil
			d.log.Warn("hand-over: the predecessor's latest health verdicts unreadable; the probers start from its state document's", "err", err)
		}
	}
	if len(carried) > 0 {
		d.log.Info("hand-over: health verdicts the predecessor reached while this daemon prepared", "verdicts", len(carried))
	}
	d.takeVerdicts(carried)
	if err := d.startProbes(); err != nil { // validated by prepareSuccessor
		d.log.Error("hand-over: health checks not started", "err", err)
	}
	// Under systemd this process is the service's main process now; the
	// predecessor exits next (NotifyAccess=all lets it say so).
	if underSystemd() {
		d.notify(fmt.Sprintf("MAINPID=%d", os.Getpid()))
	}
	// Publish again for the status (attach mode, zero-copy) now known.
	if err := d.publish(); err != nil {
		d.log.Error("recompute after the hand-over", "err", err)
	}
	d.log.Info("hand-over: serving in place of the previous daemon", "queues", d.engine.Queues())
	if body.Reload {
		d.log.Info("reloading, as SIGHUP asked the previous daemon while this one prepared")
		if _, err := d.Reload(false); err != nil {
			d.log.Error("reload rejected; the running configuration keeps serving", "err", err)
		}
	}
	return d.serve(ctx)
}

// prepareSuccessor loads the configuration, maps everything handed over,
// restores the control plane's state and computes the first snapshot,
// holding its VIP set back: nothing in force changes.
func prepareSuccessor(opts Options, offer *handover.Offer) (_ *daemon, notes []string, err error) {
	if offer.StateVersion != stateVersion {
		return nil, nil, fmt.Errorf("no state document this build reads (%s)", offer.Reason)
	}
	var doc stateDoc
	if err := json.Unmarshal(offer.State, &doc); err != nil {
		return nil, nil, fmt.Errorf("state document: %w", err)
	}
	d, err := newDaemon(opts)
	if err != nil {
		return nil, nil, err
	}
	d.started = time.Now() // this process's start (status, xlb_start_time_seconds), as Run sets it
	d.clock = newClockAt(doc.ClockBase)
	d.seed = doc.Seed
	d.bgpRestarting = true
	if err := d.restoreState(&doc); err != nil {
		return nil, nil, err
	}
	cfg := d.engineConfig()
	d.engine, notes, err = engine.Adopt(cfg, doc.Engine, offer.Take)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			d.engine.Release()
			if d.checker != nil {
				d.checker.Stop()
			}
			d.closeProbePath()
		}
	}()
	for _, n := range notes {
		d.log.Warn("hand-over", "note", n)
	}
	d.controlLn = inheritedListener(offer, controlFile, d)
	d.metricsLn = inheritedListener(offer, metricsFile, d)
	d.resolver = neigh.New(nil)
	// The probers start at the cut-over, not now: the predecessor probes
	// until then and hands over the verdicts of these seconds with its
	// rings (cutoverBody). Probes made while this process prepares, on a
	// machine busy with the preparation, timed out and made false
	// UNHEALTHY verdicts (2380 of 100 000 at load 20), and every backend
	// was probed twice.
	d.prepareHealth()
	for _, t := range d.healthTargetsOf(nil) {
		if err := t.Validate(); err != nil {
			return nil, nil, fmt.Errorf("health checks: %w", err)
		}
	}
	if err := d.publish(); err != nil {
		return nil, nil, err
	}
	return d, notes, nil
}

// resumeBFD resumes the BFD sessions the predecessor carried, between
// the cut-over and DONE: the predecessor's sessions fall silent when it
// reads DONE, and the speaker that would resume them starts only once
// this daemon serves (on a busy machine later than a router's detection
// time). Both processes send the same sessions' packets for the moments
// in between, which a router takes as one session. Without it (no BFD,
// or the sessions cannot start) the speaker resumes them when it starts.
func (d *daemon) resumeBFD() {
	if d.cfg.BGP == nil || len(d.bfdCarried) == 0 {
		return
	}
	b, err := bgp.StartBFD(d.log.With("component", "bgp"), bgpPeers(d.cfg.BGP), d.bfdCarried)
	if err != nil {
		d.log.Warn("hand-over: bfd sessions not resumed at the cut-over; the speaker resumes them when it starts", "err", err)
		return
	}
	d.bfdEarly = b
}

// inheritedListener takes a listener the predecessor handed over, or nil.
func inheritedListener(offer *handover.Offer, name string, d *daemon) net.Listener {
	fd, ok := offer.Take(name)
	if !ok {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		d.log.Warn("hand-over: listener not usable; opening a new one", "listener", name, "err", err)
		return nil
	}
	return ln
}

// successorTimeouts bound the successor's side of the conversation.
var successorTimeouts = handover.Timeouts{Step: 5 * time.Second, Prepare: 60 * time.Second}
