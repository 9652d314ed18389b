package lab_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/lab"
	"github.com/xlbnet/xlb/pkg/testutil"
)

func TestDriveCountsMatchServers(t *testing.T) {
	l := up(t, lab.Options{Backends: 3, ClientAddrs: 50})
	if err := l.KernelForward(0, 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := l.Drive(ctx, lab.DriveOptions{Requests: 300, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("drive: %d errors (first %v), %d mismatched", res.Errors, res.FirstError, res.Mismatched)
	}
	if res.Sources != 100 {
		t.Errorf("used %d client addresses, want 100 (50 per family)", res.Sources)
	}
	for i, b := range l.Backends {
		if got := int(b.Stats().HTTPRequests); got != res.PerBackend[i] {
			t.Errorf("%s: server counted %d, client counted %d", b.Name, got, res.PerBackend[i])
		}
	}
	// ECMP over backends 0 and 2: both get traffic, backend 1 none.
	if res.PerBackend[0] == 0 || res.PerBackend[2] == 0 || res.PerBackend[1] != 0 {
		t.Errorf("per backend %v, want traffic on 0 and 2 only", res.PerBackend)
	}
	if res.PerBackend[0]+res.PerBackend[2] != 300 {
		t.Errorf("per backend %v, want 300 in total", res.PerBackend)
	}
	var out bytes.Buffer
	if err := res.WriteTable(&out, l); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"be0", "be1", "be2", "total", "300 requests from 100 client addresses"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := l.Drive(ctx, lab.DriveOptions{Family: 5}); err == nil {
		t.Error("Drive accepted family 5")
	}
}

func TestDemoTearsDown(t *testing.T) {
	testutil.RequireRoot(t)
	prefix := testutil.Unique("dm") + "-"
	var out bytes.Buffer
	started, stopped := false, false
	err := lab.Demo(context.Background(), lab.DemoOptions{
		Lab:   lab.Options{Prefix: prefix, ClientAddrs: 100},
		Drive: lab.DriveOptions{Requests: 400, Concurrency: 16},
		Start: func(ctx context.Context, l *lab.Lab) (func() error, error) {
			started = true
			if err := l.KernelForward(0, 1, 2); err != nil {
				return nil, err
			}
			return func() error { stopped = true; return l.StopKernelForward() }, nil
		},
		Out: &out,
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if !started || !stopped {
		t.Errorf("forwarder started %v, stopped %v", started, stopped)
	}
	if left := lab.Namespaces(prefix); len(left) != 0 {
		t.Errorf("demo left %v", left)
	}
	t.Logf("demo output:\n%s", out.String())
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 5 && strings.HasPrefix(f[0], "be") && f[3] == "0" {
			t.Errorf("a backend got nothing through 3-way ECMP: %q", line)
		}
	}
	if !strings.Contains(out.String(), "400 requests from 200 client addresses") {
		t.Errorf("summary missing:\n%s", out.String())
	}
}

func TestDemoCancelledTearsDown(t *testing.T) {
	testutil.RequireRoot(t)
	prefix := testutil.Unique("dc") + "-"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := lab.Demo(ctx, lab.DemoOptions{
		Lab:   lab.Options{Prefix: prefix, Backends: 1, ClientAddrs: 4, NoDecap: true},
		Drive: lab.DriveOptions{Requests: 1_000_000, Concurrency: 4},
		Start: func(ctx context.Context, l *lab.Lab) (func() error, error) {
			time.AfterFunc(300*time.Millisecond, cancel) // Ctrl-C while driving
			return func() error { return nil }, l.KernelForward(0)
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled demo returned %v, want context.Canceled", err)
	}
	if left := lab.Namespaces(prefix); len(left) != 0 {
		t.Errorf("cancelled demo left %v", left)
	}
}
