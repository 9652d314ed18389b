package k8s

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Event component, as `kubectl describe` shows it ("From").
const eventComponent = "xlb-k8s"

// eventLog keeps the Events recorded, for tests and the log.
type eventLog struct {
	mu     sync.Mutex
	events []RecordedEvent
}

// RecordedEvent is an Event this controller recorded.
type RecordedEvent struct {
	Service, Type, Reason, Message string
}

// Events returns the Events recorded so far.
func (c *Controller) Events() []RecordedEvent {
	c.events.mu.Lock()
	defer c.events.mu.Unlock()
	return append([]RecordedEvent(nil), c.events.events...)
}

func (c *Controller) newRecorder(b record.EventBroadcaster) record.EventRecorder {
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventComponent, Host: c.opts.Identity})
}

// event records an Event on svc when this appliance is the leader (one
// appliance speaks for the fleet); the others only log.
func (c *Controller) event(svc *corev1.Service, typ, reason, msg string) {
	key := svc.Namespace + "/" + svc.Name
	if typ == corev1.EventTypeWarning {
		c.log.Warn(msg, "service", key, "reason", reason)
	} else {
		c.log.Info(msg, "service", key, "reason", reason)
	}
	if !c.leader.Load() || c.recorder == nil {
		return
	}
	c.recorder.Event(svc, typ, reason, msg)
	c.events.mu.Lock()
	c.events.events = append(c.events.events, RecordedEvent{Service: key, Type: typ, Reason: reason, Message: msg})
	c.events.mu.Unlock()
}

// setProblems records a Warning Event for each problem of this pass that
// is new or whose message changed, and remembers the pass's problems.
func (c *Controller) setProblems(problems map[string]map[string]string, byKey map[string]*corev1.Service) {
	for key, reasons := range problems {
		svc := byKey[key]
		if svc == nil {
			continue
		}
		for reason, msg := range reasons {
			if c.problems[key][reason] == msg {
				continue
			}
			c.event(svc, corev1.EventTypeWarning, reason, msg)
		}
	}
	c.problems = problems
}
