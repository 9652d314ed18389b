// Package labtest starts the lab of pkg/lab for a test: a unique prefix (go
// test runs packages in parallel), the log on the test's when it runs
// verbosely, and a teardown when the test ends that fails the test if a
// namespace of the lab is left behind.
package labtest

import (
	"context"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

// Up builds a lab with o under a prefix that starts with letters, and
// tears it down when the test ends. It skips the test when not root.
func Up(tb testing.TB, letters string, o lab.Options) *lab.Lab {
	tb.Helper()
	testutil.RequireRoot(tb)
	o.Prefix = testutil.Unique(letters) + "-"
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
		if testing.Verbose() {
			o.Logf = tb.Logf
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := l.Close(); err != nil {
			tb.Errorf("lab teardown: %v", err)
		}
		if left := lab.Namespaces(o.Prefix); len(left) != 0 {
			tb.Errorf("namespaces left after the lab's teardown: %v", left)
		}
	})
	return l
}
