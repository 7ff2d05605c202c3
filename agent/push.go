package agent

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// This file pushes journal values that must all reach the device — a
// rollback's, a re-push's, an operator's retry — in a way that cannot wedge
// the pipeline (DESIGN "never stuck, never silent"): a Set the device
// refuses for good is split in halves, down to the single values it will
// not take, and everything else still goes through.

// valueBatch is one SetRequest and the journal values it carries.
type valueBatch struct {
	req    *gpb.SetRequest
	values []*journal.PathValue
}

// trackingBatcher is a setBatcher that remembers which values went into
// each request, so that a refused request can be split.
type trackingBatcher struct {
	b       *setBatcher
	pending []*journal.PathValue
}

func newTrackingBatcher(limits setLimits) *trackingBatcher {
	return &trackingBatcher{b: newSetBatcher(limits)}
}

// add is setBatcher.add, returning the finished request with its values.
func (t *trackingBatcher) add(pv *journal.PathValue) *valueBatch {
	var out *valueBatch
	if req := t.b.add(pv); req != nil {
		out = &valueBatch{req: req, values: t.pending}
		t.pending = nil
	}
	t.pending = append(t.pending, pv)
	return out
}

// flush is setBatcher.flush, with the request's values.
func (t *trackingBatcher) flush() *valueBatch {
	values := t.pending
	t.pending = nil
	if req := t.b.flush(); req != nil {
		return &valueBatch{req: req, values: values}
	}
	return nil
}

// valueBatches packs values, in the order they must take effect, into
// tracked requests.
func valueBatches(values []*journal.PathValue, limits setLimits) []*valueBatch {
	var out []*valueBatch
	t := newTrackingBatcher(limits)
	for _, pv := range values {
		if b := t.add(pv); b != nil {
			out = append(out, b)
		}
	}
	if b := t.flush(); b != nil {
		out = append(out, b)
	}
	return out
}

// pushOutcome is what a push left behind: the values the device refused
// for good, with its first refusal, and the Sets it took.
type pushOutcome struct {
	refused []*journal.PathValue
	// err is the device's first definitive refusal (nil if none).
	err  *status.Status
	sets int
}

func (o *pushOutcome) refuse(values []*journal.PathValue, err error) {
	o.refused = append(o.refused, values...)
	if o.err == nil {
		o.err = status.Convert(err)
	}
}

// code and message describe the refusal for the journal.
func (o *pushOutcome) code() uint32 {
	if o.err == nil {
		return uint32(codes.OK)
	}
	return uint32(o.err.Code())
}

func (o *pushOutcome) message() string {
	if o.err == nil {
		return ""
	}
	return o.err.Message()
}

// pushSplitting sends batch on session s under term. A definitive refusal
// splits the batch's values in halves, each sent (and split) in turn, so
// that what the device refuses is narrowed to single values, recorded in
// out; the device takes the rest. It returns the first error that is not
// a definitive refusal (the session is then unusable and the caller ends
// it): what was sent until then may or may not be on the device.
func (a *Agent) pushSplitting(s *session, term uint64, batch *valueBatch, out *pushOutcome) error {
	out.sets++
	_, err := a.send(s, term, batch.req)
	switch a.classify(err) {
	case accepted:
		return nil
	case rejected:
	default:
		return err
	}
	if len(batch.values) <= 1 {
		out.refuse(batch.values, err)
		return nil
	}
	mid := len(batch.values) / 2
	for _, half := range [][]*journal.PathValue{batch.values[:mid], batch.values[mid:]} {
		for _, b := range valueBatches(half, a.setLimits()) {
			if err := a.pushSplitting(s, term, b, out); err != nil {
				return err
			}
		}
	}
	return nil
}
