package journal

import "context"

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

// Configuration returns the configuration record as the transaction sees it.
func (tx *Tx) Configuration() (*Configuration, error) {
	return tx.w.configuration()
}

// Mastership returns the mastership record as the transaction sees it.
func (tx *Tx) Mastership() (*Mastership, error) {
	m := &Mastership{}
	_, err := tx.w.get(keyMastership, m)
	return m, err
}

// Proposal returns proposal i as the transaction sees it, with errors as
// Journal.Proposal's.
func (tx *Tx) Proposal(i uint64) (*Proposal, error) {
	c, err := tx.w.configuration()
	if err != nil {
		return nil, err
	}
	return tx.w.proposal(c, i)
}
