package journal

// Dry runs: what a Set, a rollback or a rollback to a point would change in
// the committed configuration, computed as the real thing computes it and
// refused as it would be, without writing anything.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// LeafDiff is one path a Set would change (DryRun): what the committed
// configuration holds there and what it would hold; nil or a tombstone
// for nothing.
type LeafDiff struct {
	Path          *gnmi.Path
	Before, After *PathValue
	// Unknown: a Delete or Replace of the Set removes Path, and the
	// committed values hold nothing at or under it (Before is nil): the
	// device loses whatever it holds there, which the journal does not
	// know.
	Unknown bool
}

// SchemaRefusal is DryRun's refusal of what the device's YANG forbids:
// Err, a *leaves.Error, names the path and the problem.
type SchemaRefusal struct{ Err error }

func (e *SchemaRefusal) Error() string { return e.Err.Error() }
func (e *SchemaRefusal) Unwrap() error { return e.Err }

// Schema returns the device's YANG schema the journal decomposes values
// with (Options.Schema; nil: none).
func (j *Journal) Schema() *leaves.Schema { return j.decomposer.Schema() }

// DryRun validates ops as ProposeChange would (refused the same way,
// commit-confirmed included) and returns the leaf-level changes they would
// make to the committed configuration, in path order, without writing
// anything. Paths whose value would stay the same are left out; every
// leaf a Delete or Replace removes is there with its value, and a Delete or
// Replace of a path the committed values hold nothing at or under is there
// as Unknown.
//
// With a schema (Options.Schema) it also refuses what the device's YANG
// forbids, with a *SchemaRefusal wrapping a *leaves.Error: a path it does
// not have (leaves.ErrNotInSchema), a value of the wrong type or out of
// range, a member it does not have, state data (leaves.ErrInvalid).
//
// read, if not nil, is what the device holds where the journal does not
// know (read as before a change, Sender.Read): the diff is computed as the
// change's commit would take it in, so that what a Delete or Replace
// removes there is listed with the device's values.
func (j *Journal) DryRun(ctx context.Context, ops []*Op, read *DeviceRead) ([]LeafDiff, error) {
	clean, _, err := j.cleanOps(ops)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(j.Schema(), clean); err != nil {
		return nil, &SchemaRefusal{Err: err}
	}
	ch := &Change{}
	if read != nil && len(read.Values) > 0 {
		if ch.DeviceReads, _, err = j.deviceReads(read); err != nil {
			return nil, fmt.Errorf("journal: before the change: %w", err)
		}
	}
	var out []LeafDiff
	err = j.scratch(ctx, func(txn *badger.Txn) error {
		if err := commitConfirmGuard(txn, "a commit-confirmed is outstanding", "confirm or cancel it first, or wait for its rollback"); err != nil {
			return err
		}
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		if len(ch.GetDeviceReads()) > 0 {
			// Taken into this transaction only: it is discarded.
			w := &writeTxn{txn: txn, now: j.opts.Clock()}
			if err := w.takeDeviceReads(c, ch); err != nil {
				return err
			}
		}
		out, err = j.effectDiff(txn, c.GetLastIndex()+1, clean, true)
		return err
	})
	return out, err
}

// checkSchema refuses ops (cleaned: their units decomposed) where schema
// forbids their paths or what they write.
func checkSchema(schema *leaves.Schema, ops []*Op) error {
	if schema == nil {
		return nil
	}
	for _, op := range ops {
		if IsWildcard(op.GetPath()) {
			continue
		}
		if err := schema.CheckPath(op.GetPath()); err != nil {
			return err
		}
		for _, u := range Units(op) {
			if err := schema.CheckWrite(op.GetPath(), u.GetPath(), u.GetValue()); err != nil {
				return err
			}
		}
	}
	return nil
}

// effectDiff expands ops (cleaned) for proposal i against the committed
// values of txn, as their commit would, and returns the paths whose value
// it changes, in path order. With unknown, each Delete and Replace path the
// committed values hold nothing at or under shows as Unknown.
func (j *Journal) effectDiff(txn *badger.Txn, i uint64, ops []*Op, unknown bool) ([]LeafDiff, error) {
	// expand only reads: a read-only transaction serves.
	w := &writeTxn{txn: txn, now: j.opts.Clock()}
	eff, err := w.expand(i, ops)
	if err != nil {
		return nil, err
	}
	befores := make(map[string]*PathValue, len(eff.keys))
	var out []LeafDiff
	for _, k := range eff.keys {
		before, err := w.value(nsCommitted, []byte(k))
		if err != nil {
			return nil, err
		}
		befores[k] = before
		after := eff.values[k]
		beforeLive, afterLive := before != nil && !before.GetDeleted(), !after.GetDeleted()
		if beforeLive == afterLive && (!afterLive || leaves.Equal(before.GetValue(), after.GetValue())) {
			continue
		}
		out = append(out, LeafDiff{Path: after.GetPath(), Before: before, After: after})
	}
	if !unknown {
		return out, nil
	}
	for _, op := range ops {
		if op.GetKind() == OpUpdate {
			continue
		}
		sub := subtreeOf(op.GetPath())
		held := false
		for k, pv := range befores {
			if pv != nil && !pv.GetDeleted() && sub.contains([]byte(k)) {
				held = true
				break
			}
		}
		if held {
			continue
		}
		key := string(sub.key)
		n, found := slices.BinarySearchFunc(out, key, func(d LeafDiff, k string) int {
			return strings.Compare(string(PathKey(d.Path)), k)
		})
		if found {
			out[n].Unknown = true
			continue
		}
		after := eff.values[key]
		if after == nil {
			after = &PathValue{Path: op.GetPath(), Index: i, Deleted: true}
		}
		out = slices.Insert(out, n, LeafDiff{Path: op.GetPath(), After: after, Unknown: true})
	}
	return out, nil
}

// RollbackDiff returns what rolling back proposal i (0: the newest change
// in effect) would change in the committed configuration, in path order,
// without writing anything, and the proposal it would roll back. It is
// refused as ProposeRollback would refuse it (the same errors and
// messages): a proposal that does not exist (ErrNotFound), a guard that
// does not hold (ErrGuard), a commit-confirmed outstanding.
func (j *Journal) RollbackDiff(ctx context.Context, i uint64) ([]LeafDiff, uint64, error) {
	if i == 0 {
		newest, err := j.NewestRollbackable(ctx)
		if err != nil {
			return nil, 0, err
		}
		i = newest
	}
	var out []LeafDiff
	err := j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		p, err := loadProposal(txn, c, i)
		if err != nil {
			return err
		}
		if err := commitConfirmGuard(txn, "a commit-confirmed is outstanding",
			"cancel it with the commit extension (or `gnmi-sidecar commit cancel`) instead"); err != nil {
			return err
		}
		if err := rollbackGuard(txn, c, p); err != nil {
			return err
		}
		values := slices.Clone(p.GetRollback().GetValues())
		slices.SortStableFunc(values, func(a, b *PathValue) int {
			return strings.Compare(string(PathKey(a.GetPath())), string(PathKey(b.GetPath())))
		})
		for _, after := range values {
			before := &PathValue{}
			found, err := getRecord(txn, valueKey(nsCommitted, PathKey(after.GetPath())), before)
			if err != nil {
				return fmt.Errorf("journal: %w", err)
			}
			if !found {
				before = nil
			}
			beforeLive, afterLive := before != nil && !before.GetDeleted(), !after.GetDeleted()
			if beforeLive == afterLive && (!afterLive || leaves.Equal(before.GetValue(), after.GetValue())) {
				continue
			}
			out = append(out, LeafDiff{Path: after.GetPath(), Before: before, After: after})
		}
		return nil
	})
	return out, i, err
}

// RestoreDiff returns what going back to point pt (ProposeRestore) would
// change in the committed configuration, in path order, without writing
// anything, and the proposal after whose commit the point is. It is
// refused as ProposeRestore would refuse it, but for ErrNoChange: a
// configuration that is as at the point already gives an empty diff.
func (j *Journal) RestoreDiff(ctx context.Context, pt Point) ([]LeafDiff, uint64, error) {
	var out []LeafDiff
	var index uint64
	err := j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		rp, ops, err := restorePlan(ctx, txn, c, pt, j.opts.Clock())
		index = rp.index
		if err != nil || len(ops) == 0 {
			return err
		}
		if _, err := restoreTarget(pt, ops); err != nil {
			return err
		}
		if err := commitConfirmGuard(txn, "a commit-confirmed is outstanding", "confirm or cancel it first, or wait for its rollback"); err != nil {
			return err
		}
		clean, _, err := j.cleanOps(ops)
		if err != nil {
			return err
		}
		out, err = j.effectDiff(txn, c.GetLastIndex()+1, clean, false)
		return err
	})
	return out, index, err
}
