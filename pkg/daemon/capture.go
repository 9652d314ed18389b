package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/xlbnet/xlb/pkg/capture"
	"github.com/xlbnet/xlb/pkg/control"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/packet"
)

// captureDrainEvery is how often a capture's rings are drained: at the
// most a queue's tap admits (capture.MaxRate) that is 2 000 records, the
// default ring (1024 slots) holds the default rate's 10 000/s for 100 ms.
const captureDrainEvery = 20 * time.Millisecond

// Capture implements control.Capturer: GET /v1/capture. It runs on the
// request's goroutine: it builds the filter (rule names resolved on the
// control goroutine), hands each worker its tap, drains the taps every
// captureDrainEvery and emits what they hold, and takes the taps back when
// the count or the duration is reached or the client goes away. One
// capture runs at a time.
func (o *ops) Capture(ctx context.Context, q control.CaptureQuery, emit func(*capture.Packet) error) (*control.CaptureDone, error) {
	e := o.d.engine
	if e == nil {
		return nil, errors.New("capture: the data plane is not running")
	}
	f, err := o.captureFilter(ctx, q)
	if err != nil {
		return nil, err
	}
	if !o.d.capturing.CompareAndSwap(false, true) {
		return nil, control.Errorf(http.StatusConflict, "capture: another capture is running (one at a time)")
	}
	defer o.d.capturing.Store(false)
	s, err := capture.NewSession(f, len(e.Queues()), capture.Options{Snaplen: q.Snaplen, Rate: q.Rate})
	if err != nil {
		return nil, control.BadRequest("%v", err)
	}
	var deadline <-chan time.Time
	if q.Duration != "" {
		d, _ := time.ParseDuration(q.Duration) // checked by control
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	e.SetCapture(s)
	defer e.SetCapture(nil)
	queues := e.Queues()
	o.d.log.Info("capture started", "query", q)
	done := &control.CaptureDone{}
	tick := time.NewTicker(captureDrainEvery)
	defer tick.Stop()
	var emitErr error
	for {
		select {
		case <-ctx.Done():
			done.Ended = "client"
		case <-deadline:
			done.Ended = "duration"
		case <-tick.C:
		}
		snap := e.Snapshot()
		s.Drain(func(i int, r *capture.Record, data []byte) {
			if emitErr != nil || q.Count > 0 && done.Packets >= q.Count {
				return
			}
			p := packetOf(snap, queues[i], r, data)
			if emitErr = emit(&p); emitErr == nil {
				done.Packets++
			}
		})
		if emitErr != nil {
			done.Ended = "client"
		} else if q.Count > 0 && done.Packets >= q.Count {
			done.Ended = "count"
		}
		if done.Ended != "" {
			done.TapStats = s.Stats()
			o.d.log.Info("capture ended", "ended", done.Ended, "packets", done.Packets, "rate_limited", done.Limited, "ring_full", done.Lost)
			return done, nil
		}
	}
}

// packetOf names a record's outcome: rule and reason names, the backend's
// address.
func packetOf(snap *dataplane.Snapshot, queue int, r *capture.Record, data []byte) capture.Packet {
	p := capture.Packet{
		Time: time.Unix(0, r.Time), Queue: queue, Point: r.Point.String(),
		Verdict: dataplane.Verdict(r.Verdict).String(), Len: int(r.Len), Data: append([]byte(nil), data...),
	}
	if v := dataplane.Verdict(r.Verdict); v == dataplane.Drop || v == dataplane.Pass {
		p.Reason = dataplane.Reason(r.Reason).String()
	}
	if r.HasRule && snap != nil && int(r.Rule) < len(snap.Rules) {
		p.Rule = snap.Rules[r.Rule].Name
	}
	if r.HasBackend {
		p.Backend = netip.AddrFrom16(r.BackendAddr).Unmap().String()
	}
	return p
}

// captureFilter turns a query's names into the workers' numbers.
func (o *ops) captureFilter(ctx context.Context, q control.CaptureQuery) (capture.Filter, error) {
	var f capture.Filter
	if q.Point != "" {
		f.Points, _ = capture.ParsePoint(q.Point)
	}
	if q.Rule != "" {
		var ok bool
		if err := o.d.do(ctx, func() { f.Rule, ok = o.d.reg.rules[q.Rule] }); err != nil {
			return f, err
		}
		if !ok {
			return f, control.BadRequest("capture: no rule %q", q.Rule)
		}
		f.ByRule = true
	}
	if q.Backend != "" {
		a, err := netip.ParseAddr(q.Backend)
		if err != nil {
			return f, control.BadRequest("capture: backend %q is not an IP address", q.Backend)
		}
		f.Backend = a.Unmap()
	}
	if q.Verdict != "" {
		for _, name := range strings.Split(q.Verdict, ",") {
			v, ok := dataplane.ParseVerdict(strings.TrimSpace(name))
			if !ok {
				return f, control.BadRequest("capture: verdict %q: want tx, reply, drop or pass", name)
			}
			f.Verdicts |= 1 << v
		}
	}
	if q.Reason != "" {
		r, ok := dataplane.ParseReason(q.Reason)
		if !ok {
			return f, control.BadRequest("capture: no drop reason %q (the reasons are the labels of xlb_drop_packets_total)", q.Reason)
		}
		f.ByReason, f.Reason = true, uint8(r)
	}
	var err error
	if f.Src, f.SrcPort, err = flowEnd(q.Src); err != nil {
		return f, control.BadRequest("capture: src %v", err)
	}
	if f.Dst, f.DstPort, err = flowEnd(q.Dst); err != nil {
		return f, control.BadRequest("capture: dst %v", err)
	}
	f.Port = uint16(q.Port)
	if q.Proto != "" {
		if f.Proto, err = packet.ParseProto(q.Proto); err != nil {
			return f, control.BadRequest("capture: %v", err)
		}
	}
	return f, nil
}

// flowEnd parses ADDR, ADDR:PORT, [ADDR]:PORT or PREFIX ("" is any).
func flowEnd(s string) (netip.Prefix, uint16, error) {
	if s == "" {
		return netip.Prefix{}, 0, nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), 0, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), 0, nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		a := ap.Addr().Unmap()
		return netip.PrefixFrom(a, a.BitLen()), ap.Port(), nil
	}
	return netip.Prefix{}, 0, errors.New("\"" + s + "\": want ADDR, ADDR:PORT or PREFIX")
}
