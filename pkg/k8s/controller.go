package k8s

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/control"
)

// Controller turns the cluster's LoadBalancer Services into rule files.
type Controller struct {
	opts   Options
	client kubernetes.Interface
	log    *slog.Logger

	factory  informers.SharedInformerFactory
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	nodes    corelisters.NodeLister

	rulesDir, socket string
	// reload applies the written files (the control socket's reload;
	// replaced by unit tests).
	reload func(ctx context.Context, force bool) error

	trigger chan struct{}
	leader  atomic.Bool

	recorder record.EventRecorder
	events   *eventLog

	// On the sync goroutine only:
	reloadPending bool
	// problems are the Warning Events of the last pass, per Service and
	// reason: an Event is recorded when one appears or its message
	// changes, not on every pass.
	problems map[string]map[string]string
	// wasLeader: the previous pass ran as leader (a new leader reports
	// every current problem once).
	wasLeader bool

	stats Stats
}

// Stats count what the controller did (tests and logs).
type Stats struct {
	Passes, Writes, Removals, Reloads, ReloadErrors, Rejected, StatusUpdates atomic.Int64
}

// New makes a controller on client. It reads o.Config for rules_dir and
// control_socket when Run starts.
func New(client kubernetes.Interface, o Options) (*Controller, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	c := &Controller{
		opts:     o,
		client:   client,
		log:      o.Logger,
		trigger:  make(chan struct{}, 1),
		problems: map[string]map[string]string{},
		events:   &eventLog{},
	}
	c.factory = informers.NewSharedInformerFactory(client, o.Resync)
	c.services = c.factory.Core().V1().Services().Lister()
	c.slices = c.factory.Discovery().V1().EndpointSlices().Lister()
	c.nodes = c.factory.Core().V1().Nodes().Lister()
	c.reload = c.reloadSocket
	return c, nil
}

// Stats returns the controller's counters.
func (c *Controller) Stats() *Stats { return &c.stats }

// IsLeader reports whether this appliance holds the Lease (writes status
// and Events).
func (c *Controller) IsLeader() bool { return c.leader.Load() }

// Run serves until ctx ends: it waits for a loadable configuration, fills
// the informers' caches, takes part in the leader election and syncs on
// every change.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.readConfig(ctx); err != nil {
		return err
	}
	on := func(obj any) { c.poke() }
	handler := cache.ResourceEventHandlerFuncs{AddFunc: on, DeleteFunc: on, UpdateFunc: func(_, obj any) { c.poke() }}
	if _, err := c.factory.Core().V1().Services().Informer().AddEventHandler(handler); err != nil {
		return err
	}
	if _, err := c.factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(handler); err != nil {
		return err
	}
	// Nodes update their status every few seconds: only what the rules
	// read wakes the controller.
	nodeHandler := cache.ResourceEventHandlerFuncs{AddFunc: on, DeleteFunc: on, UpdateFunc: func(old, obj any) {
		o, ok1 := old.(*corev1.Node)
		n, ok2 := obj.(*corev1.Node)
		if !ok1 || !ok2 || newNodeInfo(o) != newNodeInfo(n) {
			c.poke()
		}
	}}
	if _, err := c.factory.Core().V1().Nodes().Informer().AddEventHandler(nodeHandler); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	c.recorder = c.newRecorder(broadcaster)

	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	c.log.Info("waiting for the informers' caches", "class", c.opts.Class, "rules_dir", c.rulesDir)
	for typ, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.elect(ctx)
	}()
	defer wg.Wait()
	c.log.Info("serving", "class", c.opts.Class, "include_classless", c.opts.IncludeClassless, "rules_dir", c.rulesDir, "identity", c.opts.Identity)
	c.loop(ctx)
	return nil
}

// readConfig finds rules_dir and control_socket in xlb.toml. The rule
// files need not be valid (an operator's broken file must not keep the
// controller from starting; each sync then reports it), but xlb.toml must
// parse: it retries until it does.
func (c *Controller) readConfig(ctx context.Context) error {
	for {
		data, err := os.ReadFile(c.opts.Config)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		v := struct {
			RulesDir      string `toml:"rules_dir"`
			ControlSocket string `toml:"control_socket"`
		}{config.DefaultRulesDir, config.DefaultControlSocket}
		if _, err = toml.Decode(string(data), &v); err == nil {
			dir := filepath.Dir(c.opts.Config)
			c.rulesDir, c.socket = resolvePath(dir, v.RulesDir), resolvePath(dir, v.ControlSocket)
			return nil
		}
		c.log.Error("the configuration does not parse; retrying in 5s", "config", c.opts.Config, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// resolvePath is p relative to dir unless absolute, as xlb.toml's paths.
func resolvePath(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// poke asks for a sync.
func (c *Controller) poke() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// loop syncs after each burst of changes: a change starts a Debounce
// wait, changes during it extend it up to 5 × Debounce, then one sync.
// A sync that could not finish (a reload that failed) is retried.
func (c *Controller) loop(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.trigger:
		case <-retry.C:
		}
		deadline := time.After(5 * c.opts.Debounce)
	burst:
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.trigger:
			case <-time.After(c.opts.Debounce):
				break burst
			case <-deadline:
				break burst
			}
		}
		if err := c.sync(ctx); err != nil {
			// Retried with backoff (1 s doubling to 30 s) and on every
			// change.
			c.log.Error("sync failed", "err", err, "retry", backoff)
			retry.Reset(backoff)
			backoff = min(2*backoff, 30*time.Second)
		} else {
			backoff = time.Second
		}
	}
}

// ours reports whether the controller serves svc.
func (c *Controller) ours(svc *corev1.Service) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return c.opts.IncludeClassless
	}
	return *svc.Spec.LoadBalancerClass == c.opts.Class
}

// ourServices lists the Services served, oldest first (then by name): the
// order VIPs are given in.
func (c *Controller) ourServices() ([]*corev1.Service, error) {
	all, err := c.services.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*corev1.Service
	for _, s := range all {
		if c.ours(s) && s.DeletionTimestamp == nil {
			out = append(out, s)
		}
	}
	sortServices(out)
	return out, nil
}

// sortServices orders Services oldest first, then by namespace and name.
func sortServices(svcs []*corev1.Service) {
	slices.SortFunc(svcs, func(a, b *corev1.Service) int {
		return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}

func (c *Controller) nodeInfos() ([]nodeInfo, error) {
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]nodeInfo, 0, len(all))
	for _, n := range all {
		out = append(out, newNodeInfo(n))
	}
	slices.SortFunc(out, func(a, b nodeInfo) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

func (c *Controller) endpointSlices(svc *corev1.Service) ([]*discoveryv1.EndpointSlice, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	eps, err := c.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(eps, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return eps, nil
}

// sync is one pass: (leader) give VIPs and write status, translate every
// Service, validate the changed files with the rest of the configuration,
// write what passes, reload once.
func (c *Controller) sync(ctx context.Context) error {
	pass := c.stats.Passes.Add(1)
	c.log.Debug("pass start", "pass", pass)
	svcs, err := c.ourServices()
	if err != nil {
		return err
	}
	problems := map[string]map[string]string{}
	report := func(key, reason, msg string) {
		if problems[key] == nil {
			problems[key] = map[string]string{}
		}
		problems[key][reason] = msg
	}
	leading := c.leader.Load()
	if leading && !c.wasLeader {
		c.problems = map[string]map[string]string{}
	}
	c.wasLeader = leading
	if leading {
		c.updateStatuses(ctx, svcs, report)
	}
	nodes, err := c.nodeInfos()
	if err != nil {
		return err
	}
	byKey := map[string]*corev1.Service{}
	desired := map[string]ruleFile{}
	keep := map[string]bool{} // Services whose files stay as they are
	for _, svc := range svcs {
		key := svc.Namespace + "/" + svc.Name
		byKey[key] = svc
		eps, err := c.endpointSlices(svc)
		if err != nil {
			return err
		}
		tr, err := c.translate(svc, c.statusVIPs(svc), nodes, eps)
		if err != nil {
			keep[key] = true
			report(key, "InvalidService", err.Error()+"; its running rules stay")
			continue
		}
		for _, n := range tr.notices {
			if n.warning {
				report(key, n.reason, n.message)
			}
		}
		for _, f := range tr.files {
			desired[f.name] = f
		}
	}

	owned, err := ownedFiles(c.rulesDir, c.opts.Class)
	if err != nil {
		return err
	}
	changes := map[string]map[string][]byte{} // Service → file → content (nil: remove)
	change := func(key, name string, content []byte) {
		if changes[key] == nil {
			changes[key] = map[string][]byte{}
		}
		changes[key][name] = content
	}
	for name, f := range desired {
		if old, ok := owned[name]; ok && bytes.Equal(old, f.content) {
			continue
		}
		if _, ok := owned[name]; !ok && foreignFile(c.rulesDir, name, c.opts.Class) {
			keep[f.service] = true
			report(f.service, "RuleFileConflict", fmt.Sprintf("%s in rules_dir was not written by this controller (class %s): it is left alone and the Service is not served", name, c.opts.Class))
			continue
		}
		change(f.service, name, f.content)
	}
	for name, content := range owned {
		if _, ok := desired[name]; ok {
			continue
		}
		_, key, _ := parseMarker(content)
		if keep[key] {
			continue
		}
		change(key, name, nil)
	}
	// A Service kept as it is keeps all its files (a conflict on one file
	// must not half-apply the others).
	for key := range keep {
		delete(changes, key)
	}

	var applied []string
	if len(changes) > 0 {
		overlay, rejected, err := c.validate(changes)
		if err != nil {
			c.setProblems(problems, byKey)
			return err
		}
		for key, issues := range rejected {
			c.stats.Rejected.Add(1)
			report(key, "RulesRejected", fmt.Sprintf("the Service's rules do not validate; its running rules stay: %s", strings.Join(issues, "; ")))
		}
		names := slices.Sorted(maps.Keys(overlay))
		for _, name := range names {
			if content := overlay[name]; content != nil {
				if err := writeFileAtomic(c.rulesDir, name, content); err != nil {
					return err
				}
				c.stats.Writes.Add(1)
				c.log.Info("rule file written", "file", name)
			} else {
				if err := removeFile(c.rulesDir, name); err != nil {
					return err
				}
				c.stats.Removals.Add(1)
				c.log.Info("rule file removed", "file", name)
			}
		}
		if len(overlay) > 0 {
			c.reloadPending = true
			for key := range changes {
				if _, bad := rejected[key]; !bad {
					applied = append(applied, key)
				}
			}
		}
	}
	c.setProblems(problems, byKey)
	if c.reloadPending {
		// With no file of ours left (the cluster's last Service went),
		// the reload may leave the appliance without rules, which the
		// daemon refuses unless forced: the cluster asked for it.
		if err := c.reload(ctx, len(desired) == 0); err != nil {
			c.stats.ReloadErrors.Add(1)
			return fmt.Errorf("reload: %w", err)
		}
		c.reloadPending = false
		c.stats.Reloads.Add(1)
		slices.Sort(applied)
		for _, key := range applied {
			if svc := byKey[key]; svc != nil {
				c.event(svc, corev1.EventTypeNormal, "RulesApplied", "rules written and reloaded: "+strings.Join(slices.Sorted(maps.Keys(changes[key])), ", "))
			}
		}
	}
	// The end of a pass, for an operator following the controller and for
	// tests that must know it has seen a change.
	c.log.Debug("pass done", "pass", pass, "services", len(svcs), "leading", leading, "applied", len(applied))
	return nil
}

// validate checks the changes with the whole configuration, as `xlb
// validate` does. When all of them pass it returns them; otherwise it adds
// one Service's changes at a time (in name order) and leaves out those
// that make the configuration fail, with their issues. An error means
// the configuration fails without any change (an operator's file is
// broken): nothing may be written.
func (c *Controller) validate(changes map[string]map[string][]byte) (map[string][]byte, map[string][]string, error) {
	all := map[string][]byte{}
	for _, files := range changes {
		maps.Copy(all, files)
	}
	if _, err := c.check(all); err == nil {
		return all, nil, nil
	}
	base := map[string][]byte{}
	if issues, err := c.check(base); err != nil {
		return nil, nil, fmt.Errorf("the configuration fails without this controller's changes, nothing written: %s", strings.Join(issues, "; "))
	}
	rejected := map[string][]string{}
	for _, key := range slices.Sorted(maps.Keys(changes)) {
		try := maps.Clone(base)
		maps.Copy(try, changes[key])
		if issues, err := c.check(try); err != nil {
			rejected[key] = issues
			continue
		}
		base = try
	}
	return base, rejected, nil
}

// check loads the configuration with overlay and, unless Offline, checks
// this machine, as `xlb validate`.
func (c *Controller) check(overlay map[string][]byte) ([]string, error) {
	cfg, _, err := config.LoadWithRules(c.opts.Config, overlay)
	if err != nil {
		var cerr *config.Error
		if !errors.As(err, &cerr) {
			return []string{err.Error()}, err
		}
		var out []string
		for _, i := range cerr.Issues {
			out = append(out, i.String())
		}
		return out, err
	}
	if c.opts.Offline {
		return nil, nil
	}
	if host := config.CheckHost(cfg); len(host) > 0 {
		var out []string
		for _, i := range host {
			out = append(out, i.String())
		}
		return out, errors.New("this machine: " + strings.Join(out, "; "))
	}
	return nil, nil
}

// reloadSocket asks the daemon to reload through its control socket.
func (c *Controller) reloadSocket(ctx context.Context, force bool) error {
	if _, err := os.Stat(c.socket); err != nil {
		return fmt.Errorf("control socket: %w (is xlb run running?)", err)
	}
	cl := control.NewClient(c.socket)
	defer cl.Close()
	res, err := cl.Reload(ctx, control.ReloadRequest{Force: force})
	if err != nil {
		return err
	}
	c.log.Info("reloaded", "rules", res.Rules, "warnings", len(res.Warnings))
	return nil
}

// statusVIPs are the Service's VIPs: the addresses of its
// status.loadBalancer.ingress that lie in a pool and are of a family it
// has, one per family. The status is the record of what the leader gave,
// so every appliance derives the same rules from it.
func (c *Controller) statusVIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		a, err := netip.ParseAddr(ing.IP)
		if err != nil {
			continue
		}
		a = a.Unmap()
		if !c.opts.Pools.Contains(a) || !hasFamily(svc, a.Is4()) {
			continue
		}
		if slices.ContainsFunc(out, func(b netip.Addr) bool { return b.Is4() == a.Is4() }) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// hasFamily reports whether the Service has the family (spec.ipFamilies;
// an empty list, as before dual-stack, accepts either).
func hasFamily(svc *corev1.Service, v4 bool) bool {
	if len(svc.Spec.IPFamilies) == 0 {
		return true
	}
	want := corev1.IPv6Protocol
	if v4 {
		want = corev1.IPv4Protocol
	}
	return slices.Contains(svc.Spec.IPFamilies, want)
}
