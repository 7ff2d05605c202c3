package agent

import (
	"context"
	"errors"
	"time"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// The commit-confirmed timer (gnmi_ext.Commit; docs/design.md §4, OpenConfig
// gnmi-commit-confirmed.md). The spec has no timer: expiry is a
// ProposeRollback the agent makes on the client's behalf. The record of
// the outstanding commit, its deadline included, lives in the journal, so
// a restarted sidecar rolls back on time: the timer is re-derived from the
// record, never kept only in memory.

// confirmLoop runs the commit-confirmed timer until ctx ends.
func (a *Agent) confirmLoop(ctx context.Context) error {
	log := a.log.With("loop", "commit-confirm")
	for {
		changed := a.Changes()
		d, rec, err := a.decideExpiry(ctx)
		if err == nil && d.Kind == ExpiryRollBack {
			var p *journal.Proposal
			p, _, err = a.j.ExpireCommit(ctx, rec.GetId())
			if err == nil {
				reason := "deadline passed"
				if rec.GetCancelled() {
					reason = "cancelled"
				}
				if p.GetPhase() == journal.PhaseRollback {
					log.Info("commit-confirmed not confirmed: rolling back", "proposal", rec.GetProposal(), "reason", reason)
				} else {
					log.Info("commit-confirmed dropped: its change did not take effect", "proposal", rec.GetProposal(), "reason", reason)
				}
				a.Notify()
				continue
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, journal.ErrClosed):
			return err
		case errors.Is(err, journal.ErrGuard), errors.Is(err, journal.ErrNotFound), errors.Is(err, journal.ErrInvalid):
			// The record moved on (confirmed, cancelled, or the change is
			// still being applied) since the decision: decide again.
			log.Debug("commit-confirmed expiry refused", "proposal", rec.GetProposal(), "err", err)
		default:
			log.Error("commit-confirmed expiry", "proposal", rec.GetProposal(), "err", err)
		}
		wait := a.opts.Resync
		if err != nil {
			wait = a.retryPeriod()
		}
		if d.Kind == ExpiryWait {
			wait = min(wait, time.Until(d.Until))
		}
		if err := waitFor(ctx, changed, wait); err != nil {
			return err
		}
	}
}

// decideExpiry loads the outstanding commit-confirmed and decides.
func (a *Agent) decideExpiry(ctx context.Context) (Expiry, *journal.CommitConfirm, error) {
	rec, err := a.j.CommitConfirm(ctx)
	if errors.Is(err, journal.ErrNotFound) {
		return Expiry{Kind: ExpiryIdle}, nil, nil
	}
	if err != nil {
		return Expiry{}, nil, err
	}
	p, err := a.j.Proposal(ctx, rec.GetProposal())
	if errors.Is(err, journal.ErrCompacted) || errors.Is(err, journal.ErrNotFound) {
		p, err = nil, nil
	}
	if err != nil {
		return Expiry{}, nil, err
	}
	return Decide(View{}, Event{Kind: EventExpiryTick, Confirm: rec, Next: p, Now: time.Now()}).Expiry, rec, nil
}

// waitFor waits until changed is closed, d passes or ctx ends.
func waitFor(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
