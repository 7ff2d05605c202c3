package journal

import (
	"context"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// heads are the journal's three singleton records, decoded: the
// configuration, the mastership and the outstanding commit-confirmed (nil:
// none). Every step of every Set reads them (the agent's loops, the proxy,
// the transitions themselves) and only the writer's transactions change
// them, so the writer keeps them as of the newest durable transaction
// (Journal.heads) and such reads neither open a Badger transaction nor
// decode. A published heads is never changed: a transaction works on its
// own copy (writeTxn.heads) and the writer publishes it once the
// transaction is durable. So the heads are never ahead of Badger; between
// Badger's commit and their publication they lag it by that one
// transaction, which no reader relies on (none reads a record from Badger
// and then a head expecting the head as new).
type heads struct {
	config     *Configuration
	mastership *Mastership
	confirm    *CommitConfirm
}

// loadHeads reads the singleton records in txn.
func loadHeads(txn *badger.Txn) (*heads, error) {
	c, err := loadConfiguration(txn)
	if err != nil {
		return nil, err
	}
	m := &Mastership{}
	if _, err := getRecord(txn, keyMastership, m); err != nil {
		return nil, err
	}
	rec, _, err := loadCommitConfirm(txn)
	if err != nil {
		return nil, err
	}
	return &heads{config: c, mastership: m, confirm: rec}, nil
}

// publishedHeads returns the heads of the newest durable transaction, or
// nil if the writer has none (before its first transaction, after a
// failed one): the caller then reads Badger. It is refused as a read is
// (ErrClosed, a failed journal's error, ctx's error).
func (j *Journal) publishedHeads(ctx context.Context) (*heads, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if j.closing.Load() {
		return nil, ErrClosed
	}
	if err := j.failure(); err != nil {
		return nil, err
	}
	return j.heads.Load(), nil
}

// forgetHeads drops the published heads and the records the writer keeps
// (recent.go): the next reads and the next transaction read the records
// from Badger. For tests that write to Badger behind the writer's back,
// while no transaction runs (one running would publish its own heads
// again); the writer's list-keys cache (Journal.keptLists) is not dropped.
func (j *Journal) forgetHeads() {
	j.heads.Store(nil)
	j.recent.clear()
	j.statuses.clear()
	j.values.clear()
}

// startHeads gives w the published heads, loading them in w's
// transaction when none are published. If they cannot be loaded (a
// damaged record), w works without them: its reads go to Badger and
// report the damage.
func (w *writeTxn) startHeads(published *heads) {
	if published == nil {
		var err error
		if published, err = loadHeads(w.txn); err != nil {
			return
		}
	}
	w.heads = *published
	w.hasHeads = true
}

// noteWrite keeps w's heads in step with a record it writes (m nil: a
// delete). m is copied: the caller may go on changing it.
func (w *writeTxn) noteWrite(key []byte, m proto.Message) {
	if !w.hasHeads {
		return
	}
	switch string(key) {
	case string(keyConfiguration), string(keyMastership):
		if m == nil {
			w.hasHeads = false // never deleted; if one were, read Badger from now on
			return
		}
		if string(key) == string(keyConfiguration) {
			w.heads.config = withDefaults(cloneConfiguration(m.(*Configuration)))
		} else {
			w.heads.mastership = cloneMastership(m.(*Mastership))
		}
	case string(keyCommitConfirm):
		w.heads.confirm = nil
		if m != nil {
			w.heads.confirm = proto.CloneOf(m.(*CommitConfirm))
		}
	}
}

// withDefaults gives a configuration record its always-present parts, as
// every reader of it expects.
func withDefaults(c *Configuration) *Configuration {
	if c.Committed == nil {
		c.Committed = &journalpb.Committed{}
	}
	if c.Applied == nil {
		c.Applied = &journalpb.Applied{}
	}
	return c
}
