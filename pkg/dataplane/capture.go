package dataplane

import (
	"time"

	"github.com/xlbnet/xlb/pkg/capture"
	"github.com/xlbnet/xlb/pkg/packet"
	"github.com/xlbnet/xlb/ring"
)

// The capture hook (`xlb capture`, package capture). A worker loads its
// tap once per batch; without a capture that load is all it costs. With
// one, each packet is offered twice: before forward rewrites the frame
// (tapRX stages a copy of it as received) and after, with the final
// outcome (tapOut publishes the staged copy and copies what was sent).

// SetCapture makes the worker offer its packets to t from its next batch
// on; nil stops. Safe from any goroutine. The worker may still be writing
// into the previous tap during its current batch.
func (w *Worker) SetCapture(t *capture.Tap) { w.tap.Store(t) }

// tapBatch loads the tap for a batch and starts the batch on it.
func (w *Worker) tapBatch() *capture.Tap {
	t := w.tap.Load()
	if t != nil {
		t.Begin(time.Now().UnixNano())
	}
	return t
}

// tapRX stages a copy of the frame as received when the capture may want
// it; it reports whether it did.
func (w *Worker) tapRX(t *capture.Tap, snap *Snapshot, d ring.Desc, m *packet.Meta, dec *Decision) bool {
	if !t.Wants(capture.RX) {
		return false
	}
	o := outcomeOf(snap, dec)
	return t.MatchFlow(m, &o) && t.Stage(w.rings.Frame(d))
}

// tapOut publishes the staged RX copy and copies the frames sent (tx),
// with the packet's final outcome dec.
func (w *Worker) tapOut(t *capture.Tap, snap *Snapshot, staged bool, m *packet.Meta, dec *Decision, tx []ring.Desc) {
	o := outcomeOf(snap, dec)
	if staged && t.Match(capture.RX, m, &o) {
		t.Commit(&o)
	}
	if len(tx) == 0 || !t.Match(capture.TX, m, &o) {
		return
	}
	for _, d := range tx {
		t.Put(capture.TX, &o, w.rings.Frame(d))
	}
}

// outcomeOf says what dec did with a packet in the tap's terms: the rule
// is known for a packet sent on and for the drops that come after a rule
// matched, the backend for a packet sent on and for the drops that come
// after one was chosen.
func outcomeOf(snap *Snapshot, dec *Decision) capture.Outcome {
	o := capture.Outcome{Verdict: uint8(dec.Verdict), Reason: uint8(dec.Reason)}
	chosen := dec.Verdict == Tx
	if dec.Verdict == Drop {
		switch dec.Reason {
		case ReasonNoNextHop, ReasonPacketTooBig, ReasonEncapFailed, ReasonNoFrames:
			chosen = true
		case ReasonNoBackend:
			o.HasRule, o.Rule = true, dec.Rule
		case ReasonSourceRange:
			o.HasRule, o.Rule = dec.Denied, dec.Rule
		}
	}
	if chosen {
		o.HasRule, o.Rule = true, dec.Rule
		o.HasBackend, o.BackendAddr = true, snap.Rules[dec.Rule].Backends[dec.Backend].Addr
	}
	return o
}
