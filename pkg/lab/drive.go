package lab

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// DriveOptions say how much HTTP traffic Drive sends.
type DriveOptions struct {
	// Requests is the number of HTTP requests (default 3000).
	Requests int
	// Concurrency is the number of requests in flight (default 32).
	Concurrency int
	// Family is 4 or 6 to use one VIP, 0 to alternate between both.
	Family int
	// Timeout bounds each request (default 5 s).
	Timeout time.Duration
}

func (o *DriveOptions) setDefaults() error {
	if o.Requests == 0 {
		o.Requests = 3000
	}
	if o.Concurrency == 0 {
		o.Concurrency = 32
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Requests < 0 || o.Concurrency < 0 || o.Timeout < 0 {
		return fmt.Errorf("drive: negative requests, concurrency or timeout")
	}
	if o.Family != 0 && o.Family != 4 && o.Family != 6 {
		return fmt.Errorf("drive: family %d, want 4, 6 or 0", o.Family)
	}
	return nil
}

// DriveResult counts what Drive saw.
type DriveResult struct {
	// PerBackend[i] is the number of requests backend i answered.
	PerBackend []int
	// Errors is the number of failed requests; FirstError the first one.
	Errors     int
	FirstError error
	// Mismatched counts answers in which the server saw another client
	// address than the one that sent, or a local address that is not the
	// VIP: NAT somewhere, which a passthrough load balancer must not do.
	Mismatched int
	// Sources is the number of distinct client addresses used.
	Sources int
	Elapsed time.Duration
}

// OK reports whether every request was answered without a mismatch.
func (r DriveResult) OK() bool { return r.Errors == 0 && r.Mismatched == 0 }

// Drive sends HTTP requests to the VIPs from the client namespace, one new
// connection per request, rotating over the client addresses, and counts
// which backend answered each. It stops early when ctx ends.
func (l *Lab) Drive(ctx context.Context, o DriveOptions) (DriveResult, error) {
	if err := o.setDefaults(); err != nil {
		return DriveResult{}, err
	}
	res := DriveResult{PerBackend: make([]int, len(l.Backends))}
	var (
		mu   sync.Mutex
		next atomic.Int64
		wg   sync.WaitGroup
		used = map[netip.Addr]bool{}
	)
	start := time.Now()
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				k := int(next.Add(1)) - 1
				if k >= o.Requests {
					return
				}
				six := o.Family == 6 || (o.Family == 0 && k%2 == 1)
				j := k // one family: every request a new source until all are used
				if o.Family == 0 {
					j = k / 2
				}
				src, vip := l.ClientAddrs4[j%len(l.ClientAddrs4)], l.Opts.VIP4
				if six {
					src, vip = l.ClientAddrs6[j%len(l.ClientAddrs6)], l.Opts.VIP6
				}
				rctx, cancel := context.WithTimeout(ctx, o.Timeout)
				rep, err := l.HTTPGet(rctx, src, l.VIPURL(vip))
				cancel()
				mu.Lock()
				used[src] = true
				switch {
				case err != nil:
					if ctx.Err() == nil {
						res.Errors++
						if res.FirstError == nil {
							res.FirstError = err
						}
					}
				case rep.Index < 0 || rep.Index >= len(res.PerBackend):
					res.Errors++
					if res.FirstError == nil {
						res.FirstError = fmt.Errorf("reply names backend %d of %d", rep.Index, len(res.PerBackend))
					}
				default:
					res.PerBackend[rep.Index]++
					if rep.Remote.Addr() != src || rep.Local.Addr() != vip {
						res.Mismatched++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Sources = len(used)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("drive: %w", err)
	}
	return res, nil
}

// WriteTable prints the per-backend counts as a table.
func (r DriveResult) WriteTable(w io.Writer, l *Lab) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\ttunnel address\tlink address\trequests\tshare\t")
	total := 0
	for _, n := range r.PerBackend {
		total += n
	}
	for i, n := range r.PerBackend {
		b := l.Backends[i]
		share := 0.0
		if total > 0 {
			share = 100 * float64(n) / float64(total)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f%%\t\n", b.Name, b.Tunnel4, b.Link4, n, share)
	}
	fmt.Fprintf(tw, "total\t\t\t%d\t\t\n", total)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d requests from %d client addresses in %v, %d failed, %d with a rewritten address\n",
		total+r.Errors, r.Sources, r.Elapsed.Round(time.Millisecond), r.Errors, r.Mismatched)
	return err
}

// DemoOptions configure Demo.
type DemoOptions struct {
	Lab   Options
	Drive DriveOptions
	// Start starts the forwarder on the lab (typically xlb in the xlb
	// namespace, attached to XLBInterface) and returns a function that
	// stops it. Nil uses the kernel stand-in over all backends (ECMP,
	// 5-tuple hash, no connection tracking).
	Start func(ctx context.Context, l *Lab) (stop func() error, err error)
	// Out receives the progress lines and the table.
	Out io.Writer
}

// Demo builds a lab, starts the forwarder, drives HTTP traffic from many
// client addresses, prints the per-backend table and tears everything
// down, also when ctx ends (Ctrl-C) or a step fails. It returns an error
// when a step failed, a request failed or an address was rewritten.
func Demo(ctx context.Context, o DemoOptions) (err error) {
	if err := o.Drive.setDefaults(); err != nil {
		return err
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	if o.Lab.Logf == nil {
		o.Lab.Logf = func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	}
	l, err := Up(ctx, o.Lab)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintf(out, "lab %s: tearing down\n", l.Opts.Prefix)
		if cerr := l.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var stop func() error
	if o.Start != nil {
		stop, err = o.Start(ctx, l)
		if err != nil {
			return fmt.Errorf("demo: start forwarder: %w", err)
		}
	} else {
		fmt.Fprintf(out, "lab %s: no forwarder given: kernel ECMP routes stand in for xlb\n", l.Opts.Prefix)
		all := make([]int, len(l.Backends))
		for i := range all {
			all[i] = i
		}
		if err := l.KernelForward(all...); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		stop = l.StopKernelForward
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = fmt.Errorf("demo: stop forwarder: %w", serr)
		}
	}()
	if l.Opts.BGP {
		if err := l.waitFleetRoutes(ctx, out); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	fmt.Fprintf(out, "lab %s: driving %d HTTP requests\n", l.Opts.Prefix, o.Drive.Requests)
	res, err := l.Drive(ctx, o.Drive)
	if werr := res.WriteTable(out, l); werr != nil && err == nil {
		err = werr
	}
	if l.Opts.BGP {
		if werr := l.writeApplianceTable(out); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if !res.OK() {
		return fmt.Errorf("demo: %d requests failed (first: %v), %d with a rewritten address", res.Errors, res.FirstError, res.Mismatched)
	}
	return nil
}

// BackendAddrs returns the addresses a forwarding rule for this lab lists
// as backends: the link addresses on the bridge for DIRECT (the appliance
// needs their MACs), otherwise the tunnel addresses reached through the
// router.
func (l *Lab) BackendAddrs(direct bool) (v4, v6 []netip.Addr) {
	for _, b := range l.Backends {
		if direct {
			v4, v6 = append(v4, b.Link4), append(v6, b.Link6)
		} else {
			v4, v6 = append(v4, b.Tunnel4), append(v6, b.Tunnel6)
		}
	}
	return v4, v6
}
