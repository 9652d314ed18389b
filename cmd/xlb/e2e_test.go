package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// labWith builds a lab with a unique prefix, torn down when the test ends.
func labWith(t *testing.T, o lab.Options) *lab.Lab {
	t.Helper()
	testutil.RequireRoot(t)
	o.Prefix = testutil.Unique("x") + "-"
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab teardown: %v", err)
		}
	})
	return l
}

// xlbIn starts xlb in the lab with rules and stops it when the test ends.
func xlbIn(t *testing.T, l *lab.Lab, rules []labRule) *labXLB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, err := startLabXLB(ctx, l, t.TempDir(), rules, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := x.Stop(); err != nil {
			t.Errorf("stop xlb: %v", err)
		}
	})
	return x
}

const healthNone = "type = \"NONE\"\n"

func TestEndToEndEncapsulations(t *testing.T) {
	testutil.RequireRoot(t)
	for _, encap := range []string{"IPIP", "GUE", "GRE", "DIRECT"} {
		t.Run(encap, func(t *testing.T) {
			l := labWith(t, lab.Options{Backends: 3, ClientAddrs: 253})
			rules := defaultLabRules(l, encap)
			for i := range rules {
				rules[i].Health = healthNone
			}
			xlbIn(t, l, rules)
			for _, fam := range []int{4, 6} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				res, err := l.Drive(ctx, lab.DriveOptions{Requests: 300, Family: fam})
				cancel()
				if err != nil {
					t.Fatalf("IPv%d: %v", fam, err)
				}
				if !res.OK() {
					t.Fatalf("IPv%d: %d of 300 requests failed (first: %v), %d saw a rewritten address", fam, res.Errors, res.FirstError, res.Mismatched)
				}
				for i, n := range res.PerBackend {
					share := float64(n) / 300
					if share < 0.25 || share > 0.42 {
						t.Errorf("IPv%d: backend %d served %d of 300 (%.0f%%), want 25-42%%", fam, i, n, 100*share)
					}
				}
				t.Logf("IPv%d: %v from %d sources", fam, res.PerBackend, res.Sources)
			}
		})
	}
}

var _ = fmt.Sprintf
