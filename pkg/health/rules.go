package health

import "fmt"

// SetRules is Set for some rules only: the targets of the rules for
// which rules is true become targets (each of which must be of one of
// them), and every other rule's targets go on untouched. A reload that
// changed a few rules costs a pass over the targets' keys and the work of
// those rules' targets, not a Set of every target (a Set at 100 000
// targets is a tenth of a second).
func (c *Checker) SetRules(rules map[string]bool, targets []Target) error {
	if rules == nil {
		rules = map[string]bool{}
	}
	return c.set(rules, targets)
}

// set is Set (rules nil: every target is in targets) and SetRules.
func (c *Checker) set(rules map[string]bool, targets []Target) error {
	want := make(map[Key]Target, len(targets))
	for _, t := range targets {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("set health targets: %w", err)
		}
		if _, dup := want[t.Key]; dup {
			return fmt.Errorf("set health targets: %s listed twice", t.Key)
		}
		if rules != nil && !rules[t.Rule] {
			return fmt.Errorf("set health targets: %s is not of the rules set", t.Key)
		}
		want[t.Key] = t
	}
	c.reload.Lock()
	defer c.reload.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrStopped
	}
	var stop []*target
	for k, old := range c.targets {
		if rules != nil && !rules[k.Rule] {
			continue
		}
		if t, ok := want[k]; !ok || t.Check != old.Check {
			stop = append(stop, old)
		}
	}
	c.stopTargets(stop)
	stopped := make(map[Key]*target, len(stop))
	for _, old := range stop {
		delete(c.targets, old.Key)
		stopped[old.Key] = old
	}
	for k, t := range want {
		if _, running := c.targets[k]; running {
			continue
		}
		var prev *tracker
		if old := stopped[k]; old != nil {
			prev = &old.tr // its probe has ended: no lock needed
		}
		c.start(t, prev)
	}
	return nil
}
