package journal

import (
	"context"
	"time"
)

// Tx is one journal transaction seen from inside: the transitions called on
// it run in order, each against the state the previous ones left, and
// become durable together with one fsync. A Tx is only valid during the
// function it was passed to (Update, or a then function of ProposeChange);
// that function runs on the journal's writer goroutine, so it must be quick
// and must not call the Journal.
//
// A transition refused by its guards writes nothing and leaves the Tx
// usable: the function may carry on with other transitions. If the function
// returns an error after a transition wrote, the whole transaction is
// dropped and nothing of it is written.
type Tx struct {
	w *writeTxn
}

// Update runs fn in one transaction (shared, as every transition, with
// whatever other requests the writer groups with it) and returns once it is
// durable, or fn's error.
func (j *Journal) Update(ctx context.Context, fn func(*Tx) error) error {
	return j.submit(ctx, func(w *writeTxn) error { return fn(&Tx{w: w}) })
}

// UpdateLingering is Update for a transaction that need not be durable at
// once: if no other request is queued, the writer waits up to linger for
// one to share the transaction and its fsync, so that a write nobody waits
// for does not cost the next client's proposal a second fsync. Any other
// request ends the wait. queued, if not nil, is called once the request is
// queued (before it waits), so that what it sets off (a client answered,
// and its next proposal) queues behind it.
func (j *Journal) UpdateLingering(ctx context.Context, linger time.Duration, fn func(*Tx) error, queued func()) error {
	return j.submitRequest(ctx, &request{
		fn:     func(w *writeTxn) error { return fn(&Tx{w: w}) },
		linger: linger,
		queued: queued,
		done:   make(chan struct{}),
	})
}

// Configuration returns the configuration record as the transaction sees
// it. It is the writer's own, not a copy (the agent reads it at every
// decision): the caller must not change it.
func (tx *Tx) Configuration() (*Configuration, error) {
	return tx.w.configurationView()
}

// Mastership returns the mastership record as the transaction sees it,
// the writer's own, as Configuration.
func (tx *Tx) Mastership() (*Mastership, error) {
	return tx.w.mastershipView()
}

// Proposal returns proposal i as the transaction sees it, with errors as
// Journal.Proposal's.
func (tx *Tx) Proposal(i uint64) (*Proposal, error) {
	c, err := tx.w.configurationView()
	if err != nil {
		return nil, err
	}
	return tx.w.proposal(c, i)
}

// ProposalStatus is Journal.ProposalStatus as the transaction sees it,
// for a decision to read: when the writer holds the proposal decoded, it
// is the writer's record itself (with all of it), which must not be
// changed. It costs no copy: the agent's decisions read several per Set.
func (tx *Tx) ProposalStatus(i uint64) (*Proposal, error) {
	c, err := tx.w.configurationView()
	if err != nil {
		return nil, err
	}
	return tx.w.proposalStatusView(c, i)
}
