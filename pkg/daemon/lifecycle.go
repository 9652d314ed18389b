package daemon

import (
	"context"
	"path/filepath"

	"github.com/xlbnet/xlb/pkg/control"
)

// Restart hands the daemon's work to a successor (POST /v1/restart). It
// runs on the control goroutine; the reply goes out before this daemon
// exits (the control server drains requests in flight).
func (o *ops) Restart(ctx context.Context, r control.RestartRequest) (*control.RestartResult, error) {
	var (
		res *control.RestartResult
		err error
	)
	if derr := o.d.do(ctx, func() { res, err = o.d.handOver(r) }); derr != nil {
		return nil, derr
	}
	return res, err
}

// Stop stops the appliance for good (POST /v1/stop): the program is
// detached and unpinned before the reply.
func (o *ops) Stop(ctx context.Context, _ control.StopRequest) (*control.StopResult, error) {
	var err error
	d := o.d
	if derr := d.do(ctx, func() {
		d.log.Info("stopping: xlb stop")
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
	if _, err := d.handOver(control.RestartRequest{Config: cfg}); err != nil {
		d.log.Error("restart on SIGUSR2 failed; this daemon keeps serving", "err", err)
	}
}

var _ control.Lifecycle = (*ops)(nil)
