package agent

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// This file pushes journal values that must all reach the device — a
// rollback's, a re-push's, an operator's retry — in a way that cannot wedge
// the pipeline (docs/design.md "never stuck, never silent"): a Set the device
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
	// md is the client request metadata the push's Sets carry (nil: none;
	// with a device account, the client's custom headers alone; see
	// credentials.go).
	md metadata.MD
	// noAccount: the push carried no credentials (no device account, no
	// client's).
	noAccount bool
}

// newPushOutcome starts the outcome of a push whose Sets carry md.
func (a *Agent) newPushOutcome(md metadata.MD) *pushOutcome {
	md = a.clientMetadata(md)
	return &pushOutcome{md: md, noAccount: md == nil && !a.deviceAccount()}
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
	if c := o.err.Code(); o.noAccount && (c == codes.Unauthenticated || c == codes.PermissionDenied) {
		return o.err.Message() + noAccountHint
	}
	return o.err.Message()
}

// noAccountHint completes a device's refusal of credentials for a Set of
// the sidecar's own made without a device account.
const noAccountHint = " (the sidecar's own Sets, such as re-pushes and drift reverts, carry no client's credentials: give it a device account with --device-username)"

// credentialsRefused reports whether a push was refused for want of
// credentials: then every value would be, and splitting it down to single
// values only costs Sets.
func credentialsRefused(err error) bool {
	c := status.Code(err)
	return c == codes.Unauthenticated || c == codes.PermissionDenied && !strings.Contains(strings.ToLower(status.Convert(err).Message()), "election")
}

// pushSplitting sends batch on session s under term, the core deciding on
// each answer (EventSetAnswer). A definitive refusal splits the batch's values in halves, each sent (and split) in turn, so
// that what the device refuses is narrowed to single values, recorded in
// out; the device takes the rest. It returns the first error that is not
// a definitive refusal (the session is then unusable and the caller ends
// it): what was sent until then may or may not be on the device.
func (a *Agent) pushSplitting(s *session, term uint64, batch *valueBatch, out *pushOutcome) error {
	out.sets++
	_, err := a.sendAs(s, term, batch.req, out.md)
	r := a.answered(Event{Kind: EventSetAnswer, Err: err})
	switch {
	case r.Session != SessionKeep:
		return err
	case r.Answer == Accepted:
		return nil
	case len(batch.values) <= 1, out.noAccount && credentialsRefused(err):
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

// pushValues sends values, in the order they must take effect, with
// pushSplitting; the error is pushSplitting's (the caller ends the
// session).
func (a *Agent) pushValues(s *session, term uint64, values []*journal.PathValue, md metadata.MD) (*pushOutcome, error) {
	out := a.newPushOutcome(md)
	for _, b := range valueBatches(values, a.setLimits()) {
		if err := a.pushSplitting(s, term, b, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// reportRefused counts the refusal of a push that left values out of sync
// and logs them, one WARN line each (they are few: single values the
// device refused for good).
func (a *Agent) reportRefused(log *slog.Logger, msg string, out *pushOutcome) {
	if len(out.refused) == 0 {
		return
	}
	err, noCredentials := out.err.Err(), out.noAccount && credentialsRefused(out.err.Err())
	if noCredentials {
		err = status.Error(out.err.Code(), out.message()) // with the fix
	}
	a.noteRefused(err)
	if noCredentials {
		// Every value was refused for the same reason: one line, with the
		// fix (the values are in gnmi-sidecar status).
		log.Error(msg+": the device refuses the sidecar's own Sets without credentials", "values", len(out.refused),
			"code", out.err.Code(), "err", out.err.Message(),
			"fix", "run gnmi-sidecar with a device account (--device-username); then gnmi-sidecar resolve retry")
		return
	}
	for _, pv := range out.refused {
		log.Warn(msg, "path", gnmipath.String(pv.GetPath()), "deleted", pv.GetDeleted(),
			"code", out.err.Code(), "err", out.err.Message(),
			"resolve", "gnmi-sidecar resolve retry|skip|adopt (docs/cli.md)")
	}
}

// syncedSession returns the session of the current term and the term, if
// the device is connected and its configuration re-pushed; else
// Unavailable, saying what happens then (then).
func (a *Agent) syncedSession(ctx context.Context, then string) (*session, uint64, error) {
	v, err := a.view(ctx)
	if err != nil {
		return nil, 0, err
	}
	term := v.Mastership.GetTerm()
	s := a.termSession(term)
	if !v.synced() || s == nil {
		return nil, 0, status.Error(codes.Unavailable,
			"the device is not connected or its configuration is being re-pushed; "+then)
	}
	return s, term, nil
}

// RetryOutOfSync pushes the applied values of the out-of-sync paths at or
// under paths (all of them if paths is empty) to the device again, as an
// operator's `resolve retry` asks, and records the outcome
// (journal.SettleOutOfSync): the paths the device takes are settled, those
// it refuses again stay out of sync with its new answer. It returns the
// journal's Resolution record, naming author (nil when nothing there was
// out of sync). The device must be connected and synced (else
// Unavailable).
func (a *Agent) RetryOutOfSync(ctx context.Context, paths []*gpb.Path, author string) (*journal.Resolution, error) {
	a.deviceMu.Lock()
	defer a.deviceMu.Unlock()
	defer a.pushing()()
	s, term, err := a.syncedSession(ctx, "retry once it is (gnmi-sidecar status)")
	if err != nil {
		return nil, err
	}
	recs, err := a.j.OutOfSync(ctx)
	if err != nil {
		return nil, err
	}
	recs = journal.SelectOutOfSync(recs, paths)
	if len(recs) == 0 {
		return nil, nil
	}
	var values []*journal.PathValue
	for _, rec := range recs {
		n := len(values)
		err := a.j.Applied(ctx, rec.GetValue().GetPath(), func(pv *journal.PathValue) error {
			values = append(values, pv)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(values) == n {
			// Nothing applied there any more: the journal holds nothing.
			values = append(values, &journal.PathValue{Path: rec.GetValue().GetPath(), Deleted: true})
		}
	}
	log := a.log.With("step", "RetryOutOfSync", "term", term)
	// The operator's retry carries the operator's credentials.
	out, err := a.pushValues(s, term, inWriteOrder(values), credentialsFrom(ctx))
	if err != nil {
		_ = a.endSession(ctx, s, err, log)
		return nil, status.Errorf(codes.Unavailable, "the device did not answer the retry (%v); nothing recorded, try again", err)
	}
	refused := make(map[*journal.PathValue]bool, len(out.refused))
	for _, pv := range out.refused {
		refused[pv] = true
	}
	accepted := slices.DeleteFunc(slices.Clone(values), func(pv *journal.PathValue) bool { return refused[pv] })
	res, err := a.j.SettleOutOfSync(ctx, term, accepted, out.refused, out.code(), out.message(), author)
	if err != nil {
		return nil, err
	}
	a.reportRefused(log, "device refused the retry of out-of-sync paths", out)
	log.Info("retried out-of-sync paths", "retried", len(recs), "settled", len(res.GetSettled()), "values", len(values))
	a.broadcast()
	return res, nil
}

// pushing marks a push outside the applier as running, for Rest, until the
// function it returns is called.
func (a *Agent) pushing() func() {
	a.pushes.Add(1)
	return func() { a.pushes.Add(1) }
}

// DriftRevert is what RevertDrift did.
type DriftRevert struct {
	// Sent are the journal values pushed to the device, in the order they
	// were sent (tombstones as deletes).
	Sent []*journal.PathValue
	// Refused are those the device refused for good, now out of sync
	// (cause DRIFT), with the device's first refusal.
	Refused []*journal.PathValue
	Err     *status.Status
}

// RevertDrift puts the journal's applied configuration back on the device
// at paths, where the device was changed behind the sidecar's back (drift,
// package drift; --drift-policy revert): for each path, the applied values
// at and under it as the journal holds them now, or a delete of the path
// where it holds none but tombstones. Values the device refuses for good
// are narrowed down (pushSplitting) and marked out of sync with cause
// DRIFT, once: nothing is retried (the operator resolves them). The device
// must be connected and synced (else Unavailable); a device that does not
// answer ends the session, as for any Set (Unavailable).
func (a *Agent) RevertDrift(ctx context.Context, paths []*gpb.Path) (*DriftRevert, error) {
	a.deviceMu.Lock()
	defer a.deviceMu.Unlock()
	defer a.pushing()()
	s, term, err := a.syncedSession(ctx, "the drift is reverted once it is")
	if err != nil {
		return nil, err
	}
	var values []*journal.PathValue
	for _, p := range paths {
		var here []*journal.PathValue
		live := false
		err := a.j.Applied(ctx, p, func(pv *journal.PathValue) error {
			here = append(here, pv)
			live = live || !pv.GetDeleted()
			return nil
		})
		if err != nil {
			return nil, err
		}
		if !live {
			// Nothing lives there in the journal: delete what the device
			// holds (one delete covers the tombstones under it).
			here = []*journal.PathValue{{Path: p, Deleted: true}}
		}
		values = append(values, here...)
	}
	if len(values) == 0 {
		return &DriftRevert{}, nil
	}
	values = inWriteOrder(values)
	log := a.log.With("step", "RevertDrift", "term", term)
	out, err := a.pushValues(s, term, values, nil)
	if err != nil {
		_ = a.endSession(ctx, s, err, log)
		return nil, status.Errorf(codes.Unavailable, "the device did not answer the revert (%v); it is tried again on the next check", err)
	}
	res := &DriftRevert{Sent: values, Refused: out.refused, Err: out.err}
	if len(out.refused) > 0 {
		if _, err := a.j.MarkOutOfSync(ctx, out.refused, journal.CauseDrift, 0, out.code(), out.message()); err != nil {
			return nil, err
		}
		a.reportRefused(log, "device refused the revert of drift; those paths are out of sync until resolved", out)
	}
	log.Info("reverted drift", "paths", len(paths), "values", len(values), "sets", out.sets, "refused", len(out.refused))
	a.broadcast()
	return res, nil
}
