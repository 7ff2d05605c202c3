package agent

import (
	"context"
	"errors"
	"sync"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// Rest is a snapshot of the pipeline for a reader that compares the
// device with the journal's applied configuration (package drift): whether
// the sidecar is sending nothing to the device and has nothing to send,
// and a fingerprint of the state that every device write moves. A
// comparison made between two Rests that are both at rest and Equal saw
// no write of the sidecar's own: what differs is someone else's.
type Rest struct {
	// AtRest: the device is connected and synced under the current term
	// (its re-push is complete), no re-push, retry or drift revert runs,
	// every journaled proposal is finished (its commit, its apply and any
	// rollback of it), and the committed configuration is the applied one.
	AtRest bool
	// Why says what is still going on when not AtRest.
	Why string
	// Synced: the device is connected and holds the applied configuration
	// under the current term (its re-push or adoption is complete); other
	// work may still be under way.
	Synced bool

	// The fingerprint: the session, the configuration's indexes and
	// counters, and the pushes outside the applier.
	Session, Term, Repushes       uint64
	AppliedIndex, AppliedProposal uint64
	CommittedIndex, LastIndex     uint64
	RollingBack, OutOfSync        uint64
	Resolutions, Pushes           uint64
}

// Same reports whether r and o are both at rest with the same fingerprint.
func (r Rest) Same(o Rest) bool {
	return r.AtRest && o.AtRest && r == o
}

// Busy keeps the pipeline from being at rest (Rest) until done is called:
// the journal is about to change without a device Set (a baseline's
// proposals), so that no comparison of the device with the journal
// (package drift) runs in between.
func (a *Agent) Busy() (done func()) {
	a.busy.Add(1)
	var once sync.Once
	return func() { once.Do(func() { a.busy.Add(-1); a.broadcast() }) }
}

// Rest returns the pipeline's state now (see Rest).
func (a *Agent) Rest(ctx context.Context) (Rest, error) {
	a.mu.Lock()
	s := a.sess
	st := a.status
	a.mu.Unlock()
	r := Rest{Repushes: st.Repushes, Pushes: a.pushes.Load()}
	if s.up() {
		r.Session, r.Term = s.id, s.getTerm()
	}
	c, err := a.j.Configuration(ctx)
	if err != nil {
		return r, err
	}
	m, err := a.j.Mastership(ctx)
	if err != nil {
		return r, err
	}
	r.AppliedIndex, r.AppliedProposal = c.GetApplied().GetIndex(), c.GetApplied().GetProposal()
	r.CommittedIndex, r.LastIndex = c.GetCommitted().GetIndex(), c.GetLastIndex()
	r.RollingBack, r.OutOfSync, r.Resolutions = c.GetRollingBack(), c.GetOutOfSync(), c.GetResolutions()
	// Not connected is caught first below; here it only keeps s from
	// being read when there is no session.
	repushing := !s.up() || st.Repushing || r.Term != m.GetTerm() || !journal.Synced(c, m) || !s.synced.Load()
	r.Synced = !st.Fenced && r.Term != 0 && !repushing
	switch {
	case st.Fenced:
		r.Why = "fenced"
	case !s.up() || r.Term == 0:
		r.Why = "the device is not connected"
	case repushing:
		r.Why = "the configuration is being re-pushed"
	case a.busy.Load() > 0:
		r.Why = "the journal is taking the device's configuration in (a baseline)"
	case r.Pushes%2 == 1:
		r.Why = "values are being pushed to the device (a retry or a revert)"
	case r.RollingBack != 0:
		r.Why = "a rollback is under way"
	case r.CommittedIndex != r.AppliedIndex:
		r.Why = "a change is being applied"
	}
	if r.Why != "" {
		return r, nil
	}
	if last := c.GetLastIndex(); last >= c.GetFirstIndex() && last != 0 {
		p, err := a.j.Proposal(ctx, last)
		switch {
		case errors.Is(err, journal.ErrNotFound), errors.Is(err, journal.ErrCompacted):
		case err != nil:
			return r, err
		case !journal.Done(p):
			r.Why = "a proposal is not finished"
			return r, nil
		}
	}
	if a.pushes.Load() != r.Pushes {
		r.Why = "values are being pushed to the device (a retry or a revert)"
		return r, nil
	}
	r.AtRest = true
	return r, nil
}
