package journal

import (
	"context"

	"google.golang.org/protobuf/types/known/anypb"
)

// FailApplyWithDetails is FailApply that also records the details of the
// device's status (google.rpc.Status.details) with the proposal's error
// (Error.details), so that its client is refused with them, unchanged,
// whenever it asks (a SYNC client at once, an ASYNC one or any client
// after a restart from the journal).
func (j *Journal) FailApplyWithDetails(ctx context.Context, i uint64, code uint32, message string, details []*anypb.Any) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, withErrorDetails(failApplyTransition(i, code, message), details))
}

// withErrorDetails returns t recording details with the change's error once
// t has set it.
func withErrorDetails(t proposalTransition, details []*anypb.Any) proposalTransition {
	if len(details) == 0 {
		return t
	}
	fn := t.fn
	t.fn = func(w *writeTxn, c *Configuration, p *Proposal) error {
		if err := fn(w, c, p); err != nil {
			return err
		}
		if e := p.GetChange().GetError(); e != nil {
			e.Details = details
		}
		return nil
	}
	return t
}
