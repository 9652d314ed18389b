package daemon

import (
	"context"
	"path/filepath"

	"github.com/xlbnet/xlb/pkg/control"
)

// Restart hands the daemon's work to a successor (POST /v1/restart). The
// restart runs beside the control goroutine (beginHandOver); the reply
// goes out before this daemon exits (the control server drains requests
// in flight). A client that gives up does not stop the restart.
func (o *ops) Restart(ctx context.Context, r control.RestartRequest) (*control.RestartResult, error) {
	var answer <-chan restartAnswer
	if err := o.d.do(ctx, func() { answer = o.d.beginHandOver(r) }); err != nil {
		return nil, err
	}
	select {
	case a := <-answer:
		return a.res, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Stop stops the appliance for good (POST /v1/stop): the program is
// detached and unpinned before the reply.
func (o *ops) Stop(ctx context.Context, _ control.StopRequest) (*control.StopResult, error) {
	var err error
	d := o.d
	if derr := d.do(ctx, func() {
		d.log.Info("stopping: xlb stop")
		d.abandonHandOver("xlb stop") // before the detach: the successor takes nothing over
		d.exit = exitStop
		err = d.engine.Close()
	}); derr != nil {
		return nil, derr
	}
	if err != nil {
		return nil, control.Errorf(500, "stop: %v", err)
	}
	return &control.StopResult{Detached: true, PinDir: d.engine.PinDir()}, nil
}

// restartOnSignal is SIGUSR2: a restart into the same executable with the
// configuration the daemon was started with.
func (d *daemon) restartOnSignal() {
	cfg, err := filepath.Abs(d.opts.ConfigPath)
	if err != nil {
		d.log.Error("restart on SIGUSR2", "err", err)
		return
	}
	// A failure logs itself (failHandOver); a refusal comes at once.
	select {
	case a := <-d.beginHandOver(control.RestartRequest{Config: cfg}):
		d.log.Error("restart on SIGUSR2 refused", "err", a.err)
	default:
	}
}

var _ control.Lifecycle = (*ops)(nil)
