package k8s

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// elect takes part in the fleet's leader election until ctx ends: the
// holder of the Lease writes Service status and Events; every appliance
// writes rules either way. Losing the Lease only stops the writing of
// status and Events; the election then starts again.
func (c *Controller) elect(ctx context.Context) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metaName(c.opts.LeaseNamespace, c.opts.LeaseName),
		Client:     c.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.opts.Identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   c.opts.LeaseDuration,
			RenewDeadline:   c.opts.RenewDeadline,
			RetryPeriod:     c.opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            c.opts.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					c.log.Info("leading: this appliance writes Service status and Events", "lease", c.opts.LeaseNamespace+"/"+c.opts.LeaseName)
					c.leader.Store(true)
					c.poke()
				},
				OnStoppedLeading: func() {
					if c.leader.Swap(false) {
						c.log.Info("no longer leading", "lease", c.opts.LeaseNamespace+"/"+c.opts.LeaseName)
					}
				},
				OnNewLeader: func(id string) {
					if id != c.opts.Identity {
						c.log.Info("leader", "identity", id)
					}
				},
			},
		})
		if err != nil {
			c.log.Error("leader election", "err", err)
			return
		}
		le.Run(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(c.opts.RetryPeriod):
		}
	}
}

func metaName(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
