package journal

import (
	"context"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// Out-of-sync paths (docs/design.md "never stuck, never silent"): when the device
// definitively refuses a rollback's or a re-push's values, the journal
// still records them as applied, so that the pipeline moves on, and keeps
// an OutOfSync record for each refused value saying that the device may
// hold something else there. A record goes when a later write of its path
// is accepted (CompleteApply, CompleteApplyRollback), when a re-push gets it
// accepted (CompleteReconcile), or when an operator resolves it.

// OutOfSync is the record of one out-of-sync path.
type OutOfSync = journalpb.OutOfSync

// OutOfSyncCause is what the sidecar was writing when the device refused.
type OutOfSyncCause = journalpb.OutOfSyncCause

// The causes.
const (
	CauseRollback = journalpb.OutOfSyncCause_OUT_OF_SYNC_CAUSE_ROLLBACK
	CauseRepush   = journalpb.OutOfSyncCause_OUT_OF_SYNC_CAUSE_REPUSH
	CauseRetry    = journalpb.OutOfSyncCause_OUT_OF_SYNC_CAUSE_RETRY
	CauseRestore  = journalpb.OutOfSyncCause_OUT_OF_SYNC_CAUSE_RESTORE
	CauseDrift    = journalpb.OutOfSyncCause_OUT_OF_SYNC_CAUSE_DRIFT
	CauseChange   = journalpb.OutOfSyncCause_OUT_OF_SYNC_CAUSE_CHANGE
)

var nsOutOfSync = []byte("os/")

// OutOfSync returns the out-of-sync records, in path-key order.
func (j *Journal) OutOfSync(ctx context.Context) ([]*OutOfSync, error) {
	var out []*OutOfSync
	err := j.view(ctx, func(txn *badger.Txn) error {
		var err error
		out, err = loadOutOfSync(txn)
		return err
	})
	return out, err
}

// SelectOutOfSync returns the records of recs at or under one of paths (all
// of them when paths is empty), in place.
func SelectOutOfSync(recs []*OutOfSync, paths []*gnmi.Path) []*OutOfSync {
	if len(paths) == 0 {
		return recs
	}
	return slices.DeleteFunc(recs, func(rec *OutOfSync) bool {
		return !slices.ContainsFunc(paths, func(p *gnmi.Path) bool { return IsUnder(rec.GetValue().GetPath(), p) })
	})
}

// SettledPaths returns the paths of the records of before that after no
// longer holds.
func SettledPaths(before, after []*OutOfSync) []*gnmi.Path {
	still := make(map[string]bool, len(after))
	for _, rec := range after {
		still[string(PathKey(rec.GetValue().GetPath()))] = true
	}
	var out []*gnmi.Path
	for _, rec := range before {
		if !still[string(PathKey(rec.GetValue().GetPath()))] {
			out = append(out, rec.GetValue().GetPath())
		}
	}
	return out
}

func loadOutOfSync(txn *badger.Txn) ([]*OutOfSync, error) {
	var out []*OutOfSync
	err := iteratePrefix(txn, nsOutOfSync, func(key, val []byte) error {
		rec := &OutOfSync{}
		if err := decodeRecord(val, rec); err != nil {
			return fmt.Errorf("%w: decode %q: %w", ErrCorrupt, key, err)
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// markOutOfSync records that the device refused value pv (cause, the
// proposal concerned, the device's error), replacing a record of the same
// path, and keeps c.OutOfSync counting the records.
func (w *writeTxn) markOutOfSync(c *Configuration, pv *PathValue, cause OutOfSyncCause, proposal uint64, code uint32, message string) error {
	key := valueKey(nsOutOfSync, PathKey(pv.GetPath()))
	found, err := w.get(key, &OutOfSync{})
	if err != nil {
		return err
	}
	rec := &OutOfSync{Value: pv, Cause: cause, Proposal: proposal,
		Error: &journalpb.Error{Code: code, Message: message}, Since: w.stamp()}
	if err := w.put(key, rec); err != nil {
		return err
	}
	if !found {
		c.OutOfSync++
	}
	return nil
}

// clearOutOfSync removes the records the device's acceptance of values
// settles: a value settles the record of its own path, a tombstone those
// at and under its path.
func (w *writeTxn) clearOutOfSync(c *Configuration, values []*PathValue) error {
	if c.GetOutOfSync() == 0 || len(values) == 0 {
		return nil
	}
	recs, err := loadOutOfSync(w.txn)
	if err != nil {
		return err
	}
	written := make(map[string]bool, len(values))
	var tombstones []*gnmi.Path
	for _, pv := range values {
		if pv.GetDeleted() {
			tombstones = append(tombstones, pv.GetPath())
		} else {
			written[string(PathKey(pv.GetPath()))] = true
		}
	}
	for _, rec := range recs {
		path := rec.GetValue().GetPath()
		if written[string(PathKey(path))] || slices.ContainsFunc(tombstones, func(t *gnmi.Path) bool { return IsUnder(path, t) }) {
			if err := w.dropOutOfSync(c, rec); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *writeTxn) dropOutOfSync(c *Configuration, rec *OutOfSync) error {
	if err := w.delete(valueKey(nsOutOfSync, PathKey(rec.GetValue().GetPath()))); err != nil {
		return err
	}
	if c.OutOfSync > 0 {
		c.OutOfSync--
	}
	return nil
}

// ProposeAdoption journals ops, which write values the device already
// holds (read from it), as a proposal marked adopted with its author: it is
// committed like any change and, under the term the values were read in,
// its apply completes without a device Set (an operator's `resolve
// skip|adopt`); applying it settles the out-of-sync records of the paths
// it writes. Refused like ProposeChange while a
// commit-confirmed is outstanding.
func (j *Journal) ProposeAdoption(ctx context.Context, by Sender, ops []*Op, then ...func(*Tx) error) (*Proposal, error) {
	return j.propose(ctx, by, ops, "a commit-confirmed is outstanding", "confirm or cancel it first, or wait for its rollback",
		func(w *writeTxn, p *Proposal) error {
			if err := w.markAdopted(p); err != nil {
				return err
			}
			return w.put(proposalKey(p.GetIndex()), p)
		}, then)
}

// markAdopted marks p's change as the device's values, read under the
// applied term: applied without a device Set while that term lasts.
func (w *writeTxn) markAdopted(p *Proposal) error {
	c, err := w.configuration()
	if err != nil {
		return err
	}
	p.Change.Adopted = true
	p.Change.AdoptedTerm = c.GetApplied().GetTerm()
	return nil
}

// FailApplyRollback records the device's definitive refusal of proposal
// i's rollback values, sent under term (docs/design.md "never stuck, never
// silent"): the rollback takes effect in the journal as
// CompleteApplyRollback would record it (applied values, applied.index,
// no rollback under way), so later proposals go on; its apply is Failed
// with the device's error; and every value in refused (those the device
// would not take; the others it took) is marked out of sync.
func (j *Journal) FailApplyRollback(ctx context.Context, i, term uint64, refused []*PathValue, code uint32, message string) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, proposalTransition{action: ActionFailApplyRollback, index: i,
		fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
			if err := w.finishApplyRollback(c, p, i, term); err != nil {
				return err
			}
			p.Rollback.Apply = StatusFailed
			p.Rollback.Error = &journalpb.Error{Code: code, Message: message}
			for _, pv := range refused {
				if err := w.markOutOfSync(c, pv, CauseRollback, i, code, message); err != nil {
					return err
				}
			}
			return nil
		}})
}

// MarkOutOfSync records values the device refused for good outside a
// rollback or a re-push (cause), for proposal, with the device's answer.
func (j *Journal) MarkOutOfSync(ctx context.Context, values []*PathValue, cause OutOfSyncCause, proposal uint64, code uint32, message string) (*Configuration, error) {
	var out *Configuration
	err := j.submit(ctx, func(w *writeTxn) error {
		c, err := w.configuration()
		if err != nil {
			return err
		}
		for _, pv := range values {
			if err := w.markOutOfSync(c, pv, cause, proposal, code, message); err != nil {
				return err
			}
		}
		out = c
		return w.put(keyConfiguration, c)
	})
	return out, err
}

// SettleOutOfSync records the outcome of an operator's retry of the
// out-of-sync paths, sent under term: the records of the values the device
// accepted go (see clearOutOfSync), each refused value is marked again
// with the device's error, and the Resolution it returns names author,
// what was settled and what is still out of sync (the refused values).
func (j *Journal) SettleOutOfSync(ctx context.Context, term uint64, accepted, refused []*PathValue, code uint32, message, author string) (*Resolution, error) {
	var out *Resolution
	err := j.submit(ctx, func(w *writeTxn) error {
		c, err := w.configuration()
		if err != nil {
			return err
		}
		if err := w.requireSynced(c, "record a retry of the out-of-sync paths", 0); err != nil {
			return err
		}
		if term != c.Applied.Term {
			return guardf("record a retry of the out-of-sync paths: sent under term %d, current term is %d", term, c.Applied.Term)
		}
		before, err := loadOutOfSync(w.txn)
		if err != nil {
			return err
		}
		if err := w.clearOutOfSync(c, accepted); err != nil {
			return err
		}
		for _, pv := range refused {
			if err := w.markOutOfSync(c, pv, CauseRetry, 0, code, message); err != nil {
				return err
			}
		}
		after, err := loadOutOfSync(w.txn)
		if err != nil {
			return err
		}
		res := &Resolution{Author: author, Action: "RETRY", Settled: SettledPaths(before, after)}
		for _, pv := range refused {
			res.StillOutOfSync = append(res.StillOutOfSync, pv.GetPath())
		}
		if out, err = w.recordResolution(c, res); err != nil {
			return err
		}
		if err := w.put(keyConfiguration, c); err != nil {
			return err
		}
		w.emit(Event{Action: ActionSettleOutOfSync, Configuration: c})
		return nil
	})
	return out, err
}

// RepushOutcome is what a re-push leaves out of sync (CompleteReconcile):
// the values the device refused, with its error, and the records of the
// paths it did not send (Kept, by path).
type RepushOutcome struct {
	Refused []*PathValue
	Code    uint32
	Message string
	Kept    func(*OutOfSync) bool
}

func (w *writeTxn) recordRepush(c *Configuration, o RepushOutcome) error {
	if c.GetOutOfSync() > 0 {
		recs, err := loadOutOfSync(w.txn)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if o.Kept == nil || !o.Kept(rec) {
				if err := w.dropOutOfSync(c, rec); err != nil {
					return err
				}
			}
		}
	}
	for _, pv := range o.Refused {
		if err := w.markOutOfSync(c, pv, CauseRepush, 0, o.Code, o.Message); err != nil {
			return err
		}
	}
	return nil
}

// Resolution is the record of an operator's resolve.
type Resolution = journalpb.Resolution

var nsResolution = []byte("rs/")

// keepResolutions bounds the Resolution records kept.
const keepResolutions = 1000

// RecordResolution journals r (its seq and time are set here) and drops the
// records beyond the newest keepResolutions.
func (j *Journal) RecordResolution(ctx context.Context, r *Resolution) (*Resolution, error) {
	var out *Resolution
	err := j.submit(ctx, func(w *writeTxn) error {
		c, err := w.configuration()
		if err != nil {
			return err
		}
		rec, err := w.recordResolution(c, r)
		if err != nil {
			return err
		}
		out = rec
		return w.put(keyConfiguration, c)
	})
	return out, err
}

func (w *writeTxn) recordResolution(c *Configuration, r *Resolution) (*Resolution, error) {
	rec := proto.CloneOf(r)
	c.Resolutions++
	rec.Seq, rec.Time = c.Resolutions, w.stamp()
	if err := w.put(uint64Key(nsResolution, rec.Seq), rec); err != nil {
		return nil, err
	}
	if rec.Seq > keepResolutions {
		if err := w.delete(uint64Key(nsResolution, rec.Seq-keepResolutions)); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// Resolutions returns the newest n Resolution records (all kept if n is
// 0), oldest first.
func (j *Journal) Resolutions(ctx context.Context, n int) ([]*Resolution, error) {
	var out []*Resolution
	err := j.view(ctx, func(txn *badger.Txn) error {
		return iteratePrefix(txn, nsResolution, func(key, val []byte) error {
			r := &Resolution{}
			if err := decodeRecord(val, r); err != nil {
				return fmt.Errorf("%w: decode %q: %w", ErrCorrupt, key, err)
			}
			out = append(out, r)
			return nil
		})
	})
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out, err
}
