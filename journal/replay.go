package journal

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// ReplayApplied streams the applied values in an order a re-push can send
// them in: applied one after another in that order (a tombstone as a
// delete, a value as an update), they leave a device as the applied
// changes did, in the order they were applied (by proposal index, within
// one index tombstones first).
//
// The order is the values' path-key order, read in one scan, with two
// exceptions (replayOrder):
//
//   - a value that a delete written after it covers (a tombstone at or
//     above its path with a higher index) is left out: the delete removed
//     it. A delete tombstones every value the journal holds under its path
//     (expand), so such a value is found only where the applied values
//     went their own way (a device read taken under an older delete, say);
//   - what is stored under a value that is not a marker (an opaque value,
//     such as ASCII configuration, that may hold its subtree) goes out with
//     that value in index order, within one index tombstones first: there
//     only write order reproduces the device's state.
//
// Elsewhere path order is write order for the device: a parent sorts
// before its children, so a delete goes before the values written under
// it after it; a marker only makes its node exist, whatever was written or
// deleted under it before or after; values at paths where neither is under
// the other do not touch each other.
func (j *Journal) ReplayApplied(ctx context.Context, fn func(*PathValue) error) error {
	return j.view(ctx, func(txn *badger.Txn) error {
		order := &replayOrder{emit: fn}
		err := scanValues(ctx, txn, nsApplied, nil, func(pathKey, val []byte) error {
			pv := &PathValue{}
			if err := decodeRecord(val, pv); err != nil {
				return fmt.Errorf("journal: decode value of %q: %w", pathKey, err)
			}
			return order.add(pathKey, pv)
		})
		if err != nil {
			return err
		}
		return order.flush()
	})
}

// ReplayOrder returns applied values (one per path, as a journal holds
// them) in the order ReplayApplied would stream them. values is not
// modified.
func ReplayOrder(values []*PathValue) ([]*PathValue, error) {
	type keyed struct {
		key []byte
		pv  *PathValue
	}
	sorted := make([]keyed, len(values))
	for n, pv := range values {
		sorted[n] = keyed{PathKey(pv.GetPath()), pv}
	}
	slices.SortFunc(sorted, func(a, b keyed) int { return bytes.Compare(a.key, b.key) })
	var out []*PathValue
	order := &replayOrder{emit: func(pv *PathValue) error {
		out = append(out, pv)
		return nil
	}}
	for n, v := range sorted {
		if n > 0 && bytes.Equal(v.key, sorted[n-1].key) {
			return nil, fmt.Errorf("journal: two applied values at %q", v.key)
		}
		if err := order.add(v.key, v.pv); err != nil {
			return nil, err
		}
	}
	err := order.flush()
	return out, err
}

// replayOrder reorders applied values that arrive in path-key order into
// the order ReplayApplied gives them in. It buffers only the subtree of an
// opaque value.
type replayOrder struct {
	emit func(*PathValue) error

	// deletes are the tombstones at and above the current path, outermost
	// first, each with the newest index among it and those above it.
	deletes []enclosingDelete

	// held is a value that is not a marker and what follows it under its
	// path (heldKey), while its subtree is read; heldFloor is the newest
	// index of the deletes above it.
	held      []*PathValue
	heldKey   []byte
	heldFloor uint64
}

type enclosingDelete struct {
	key    []byte
	newest uint64
}

// add takes the next applied value, at path key pathKey (keys come in
// increasing order).
func (r *replayOrder) add(pathKey []byte, pv *PathValue) error {
	if len(r.held) > 0 {
		if keyUnder(r.heldKey, pathKey) {
			r.held = append(r.held, pv)
			return nil
		}
		if err := r.flush(); err != nil {
			return err
		}
	}
	for len(r.deletes) > 0 && !keyUnder(r.deletes[len(r.deletes)-1].key, pathKey) {
		r.deletes = r.deletes[:len(r.deletes)-1]
	}
	var floor uint64
	if n := len(r.deletes); n > 0 {
		floor = r.deletes[n-1].newest
	}
	switch {
	case pv.GetIndex() < floor:
		return nil // deleted after it was written
	case pv.GetDeleted():
		r.deletes = append(r.deletes, enclosingDelete{key: pathKey, newest: max(floor, pv.GetIndex())})
		return r.emit(pv)
	case leaves.IsMarker(pv.GetValue()):
		return r.emit(pv)
	}
	r.held, r.heldKey, r.heldFloor = append(r.held, pv), pathKey, floor
	return nil
}

// flush emits the values held, if any: a value alone at once; an opaque
// value and what is stored under it in index order, tombstones first
// within one index, leaving out those an enclosing delete removed.
func (r *replayOrder) flush() error {
	held := r.held
	r.held = r.held[:0]
	if len(held) > 1 {
		slices.SortStableFunc(held, writeOrder)
	}
	for _, pv := range held {
		if pv.GetIndex() < r.heldFloor {
			continue
		}
		if err := r.emit(pv); err != nil {
			return err
		}
	}
	clear(held)
	return nil
}

// writeOrder orders values as they were written: by index, within one
// index tombstones first (a Set's deletes take effect before its updates).
func writeOrder(a, b *PathValue) int {
	if c := cmp.Compare(a.GetIndex(), b.GetIndex()); c != 0 {
		return c
	}
	return cmp.Compare(boolInt(!a.GetDeleted()), boolInt(!b.GetDeleted()))
}
