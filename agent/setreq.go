package agent

import (
	"bytes"
	"cmp"
	"fmt"
	"iter"
	"slices"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// This file turns journal records into southbound SetRequests. The requests
// alias the records' paths and values instead of cloning them: the records
// are never modified once read, and the requests are only marshaled. Neither
// must be modified afterwards.

// changeRequest returns the SetRequest that applies a proposal's change to
// the device exactly as the client sent it: the delete paths in Delete, the
// values of replaces in Replace and of updates in Update, each in op order.
// Paths are full paths; the request has no prefix.
//
// An operation kind other than delete, replace or update (which the journal
// refuses to store) is an error.
func changeRequest(ops []*journal.Op) (*gpb.SetRequest, error) {
	req := &gpb.SetRequest{}
	for _, op := range ops {
		switch op.GetKind() {
		case journal.OpDelete:
			req.Delete = append(req.Delete, op.GetPath())
		case journal.OpReplace:
			req.Replace = appendLeaves(req.Replace, op.GetValues())
		case journal.OpUpdate:
			req.Update = appendLeaves(req.Update, op.GetValues())
		default:
			return nil, fmt.Errorf("journaled operation on %s has kind %v", journal.PathString(op.GetPath()), op.GetKind())
		}
	}
	return req, nil
}

func appendLeaves(dst []*gpb.Update, leaves []*journal.Leaf) []*gpb.Update {
	for _, leaf := range leaves {
		dst = append(dst, &gpb.Update{Path: leaf.GetPath(), Val: leaf.GetValue()})
	}
	return dst
}

// rollbackRequests returns the requests that restore a proposal's rollback
// values: each path gets back what it held before the change (a tombstone,
// possibly with index 0 for "absent before", becomes a delete).
//
// The values are applied in the order they were originally written: by
// index and, within one index (one original Set), tombstones before values,
// each group by path key. Tombstones go first because that is how the
// original Set took effect (gNMI deletes before it writes); setBatcher
// relies on it. values is not modified.
func rollbackRequests(values []*journal.PathValue, limits setLimits) []*gpb.SetRequest {
	return batchValues(inWriteOrder(values), limits)
}

// inWriteOrder returns a copy of values sorted the way they were originally
// written: by index and, within one index, tombstones first, then by path.
func inWriteOrder(values []*journal.PathValue) []*journal.PathValue {
	type keyed struct {
		pv  *journal.PathValue
		key []byte
	}
	sorted := make([]keyed, len(values))
	for n, pv := range values {
		sorted[n] = keyed{pv: pv, key: journal.PathKey(pv.GetPath())}
	}
	slices.SortStableFunc(sorted, func(a, b keyed) int {
		if c := cmp.Compare(a.pv.GetIndex(), b.pv.GetIndex()); c != 0 {
			return c
		}
		if a.pv.GetDeleted() != b.pv.GetDeleted() {
			if a.pv.GetDeleted() {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.key, b.key)
	})
	out := make([]*journal.PathValue, len(sorted))
	for n, k := range sorted {
		out[n] = k.pv
	}
	return out
}

// inPathOrder returns a copy of values sorted by path key, the order
// topTombstones needs (a path's key sorts before those of the paths under
// it).
func inPathOrder(values []*journal.PathValue) []*journal.PathValue {
	keys := make(map[*journal.PathValue][]byte, len(values))
	for _, pv := range values {
		keys[pv] = journal.PathKey(pv.GetPath())
	}
	out := slices.Clone(values)
	slices.SortStableFunc(out, func(a, b *journal.PathValue) int { return bytes.Compare(keys[a], keys[b]) })
	return out
}

// batchValues packs values, already in the order they must take effect,
// into requests with a setBatcher.
func batchValues(values []*journal.PathValue, limits setLimits) []*gpb.SetRequest {
	var reqs []*gpb.SetRequest
	b := newSetBatcher(limits)
	for _, pv := range values {
		if req := b.add(pv); req != nil {
			reqs = append(reqs, req)
		}
	}
	if req := b.flush(); req != nil {
		reqs = append(reqs, req)
	}
	return reqs
}

// topTombstones returns a tombstone for each top-most path among a
// change's values (in path-key order, as the journal keeps them): deleting
// them clears everything the change wrote. Written back after them, the
// applied values at and under those paths put the device back to the
// applied configuration wherever the change wrote (see Agent.restore).
func topTombstones(changeValues []*journal.PathValue) []*journal.PathValue {
	var out []*journal.PathValue
	top := make(map[string]bool)
	for _, pv := range changeValues {
		covered := false
		for key := range coveringKeys(pv.GetPath()) {
			if top[string(key)] {
				covered = true
				break
			}
		}
		if !covered {
			top[string(journal.PathKey(pv.GetPath()))] = true
			out = append(out, &journal.PathValue{Path: pv.GetPath(), Deleted: true})
		}
	}
	return out
}

// setBatcher packs per-path values, fed in the order they must take effect,
// into as few SetRequests as gNMI semantics allow. A tombstone becomes a
// Delete of its path and a value an Update with the TypedValue exactly as
// stored (the client's original encoding, scalar or JSON).
//
// Within one SetRequest the target applies all deletes, then all replaces,
// then the updates in list order. Appending values to Update therefore keeps
// their order, but a delete after an overlapping update would be hoisted
// before it. So a tombstone joins the pending request unless it overlaps (is
// at, above or below) an update there written by another proposal; then the
// pending request is sent first. The requests, sent one after another, leave
// the device as the values applied one by one would.
//
// The values of one proposal index (one original Set) must come tombstones
// first, the order in which that Set took effect: its per-path values may
// hold a JSON value at /a and a tombstone at /a/b, and applying the
// tombstone second would remove part of what /a holds. In plain path order
// the batcher cannot fix this up: when the tombstone also overlaps an
// earlier proposal's pending update, it must go between that update and its
// own Set's value, which already share the pending request. (An overlap with
// an update of the same index alone does not split the request, since
// deletes take effect first inside it, as they did in the original Set.)
//
// Requests are kept within limits.bytes (their proto.Size), so that they
// stay under gRPC's maximum message size; callers leave room for what they
// add to a request (extensions). A single value larger than that is sent
// alone. They also hold at most limits.values values, so that a device
// that takes long per value answers each one within the agent's
// ApplyTimeout.
//
// A setBatcher is not safe for concurrent use.
type setBatcher struct {
	limits setLimits
	values int // in pending

	// pending is the request being filled and size its encoded size.
	pending *gpb.SetRequest
	size    int

	// The proposal indexes of pending's updates, for an overlap check that
	// costs O(path depth) map lookups rather than O(updates pending).
	// updatesAt maps the path key of each update's path to the indexes of
	// the updates at exactly that path; updatesUnder maps the key of every
	// path covering an update's path (see coveringKeys) to the indexes of
	// all updates at or under it.
	updatesAt    map[string]indexSpan
	updatesUnder map[string]indexSpan
}

// Field numbers of SetRequest's repeated fields (gnmi.proto), to size the
// entries a setBatcher adds.
const (
	setRequestDeleteField protowire.Number = 2
	setRequestUpdateField protowire.Number = 4
)

// setLimits bound the requests of a setBatcher: their encoded size and
// their number of values (0: no bound).
type setLimits struct {
	bytes, values int
}

// newSetBatcher returns an empty batcher whose requests keep within limits,
// except for a single value that alone exceeds them.
func newSetBatcher(limits setLimits) *setBatcher {
	return &setBatcher{
		limits:       limits,
		updatesAt:    make(map[string]indexSpan),
		updatesUnder: make(map[string]indexSpan),
	}
}

// add adds pv to the pending request. If pv cannot join it, add returns the
// pending request, which must be sent before the one pv is now pending in;
// otherwise it returns nil.
func (b *setBatcher) add(pv *journal.PathValue) *gpb.SetRequest {
	var update *gpb.Update
	var size int
	if pv.GetDeleted() {
		size = protowire.SizeTag(setRequestDeleteField) + protowire.SizeBytes(proto.Size(pv.GetPath()))
	} else {
		update = &gpb.Update{Path: pv.GetPath(), Val: pv.GetValue()}
		size = protowire.SizeTag(setRequestUpdateField) + protowire.SizeBytes(proto.Size(update))
	}

	var ready *gpb.SetRequest
	full := b.size+size > b.limits.bytes || b.limits.values > 0 && b.values >= b.limits.values
	if b.pending != nil && (full || pv.GetDeleted() && b.overlapsOtherUpdate(pv)) {
		ready = b.flush()
	}
	if b.pending == nil {
		b.pending = &gpb.SetRequest{}
	}
	b.size += size
	b.values++
	if update == nil {
		b.pending.Delete = append(b.pending.Delete, pv.GetPath())
		return ready
	}
	b.pending.Update = append(b.pending.Update, update)
	widen(b.updatesAt, journal.PathKey(pv.GetPath()), pv.GetIndex())
	for key := range coveringKeys(pv.GetPath()) {
		widen(b.updatesUnder, key, pv.GetIndex())
	}
	return ready
}

// flush returns the pending request and starts a new one; nil if nothing is
// pending.
func (b *setBatcher) flush() *gpb.SetRequest {
	req := b.pending
	b.pending = nil
	b.size, b.values = 0, 0
	clear(b.updatesAt)
	clear(b.updatesUnder)
	return req
}

// overlapsOtherUpdate reports whether the tombstone pv is at, above or below
// the path of a pending update written by a proposal other than pv's.
func (b *setBatcher) overlapsOtherUpdate(pv *journal.PathValue) bool {
	i := pv.GetIndex()
	if s, ok := b.updatesUnder[string(journal.PathKey(pv.GetPath()))]; ok && !s.only(i) {
		return true // updates at or below pv's path
	}
	for key := range coveringKeys(pv.GetPath()) {
		if s, ok := b.updatesAt[string(key)]; ok && !s.only(i) {
			return true // an update at or above pv's path
		}
	}
	return false
}

// indexSpan is the range of proposal indexes of a set of updates.
type indexSpan struct{ min, max uint64 }

// only reports whether every index in s is i.
func (s indexSpan) only(i uint64) bool { return s.min == i && s.max == i }

// widen adds index i to the span m holds for key.
func widen(m map[string]indexSpan, key []byte, i uint64) {
	s, ok := m[string(key)]
	switch {
	case !ok:
		m[string(key)] = indexSpan{min: i, max: i}
	case i < s.min:
		m[string(key)] = indexSpan{min: i, max: s.max}
	case i > s.max:
		m[string(key)] = indexSpan{min: s.min, max: i}
	}
}

// coveringKeys yields the path keys of the paths that p is under in the sense
// of journal.IsUnder (a delete of any of them deletes p): the root of p's
// origin, each element prefix of p and p itself, and, for each prefix ending
// in a list element with keys, that prefix with the keys removed, because a
// list path without keys covers all of the list's entries. That is at most
// 2×depth+1 keys. p is not modified.
func coveringKeys(p *gpb.Path) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		elems := p.GetElem()
		prefix := &gpb.Path{Origin: p.GetOrigin()}
		if !yield(journal.PathKey(prefix)) {
			return
		}
		for n, e := range elems {
			if len(e.GetKey()) > 0 {
				// The full slice expression makes append copy instead of
				// overwriting p's next element.
				prefix.Elem = append(elems[:n:n], &gpb.PathElem{Name: e.GetName()})
				if !yield(journal.PathKey(prefix)) {
					return
				}
			}
			prefix.Elem = elems[:n+1]
			if !yield(journal.PathKey(prefix)) {
				return
			}
		}
	}
}

// tombstonesFirst regroups values that arrive ordered by index (then path,
// as journal.ScanAppliedByIndex streams them) so that within each index the
// tombstones come before the values, the order setBatcher needs. It buffers
// one index's values at a time.
type tombstonesFirst struct {
	index  uint64
	values []*journal.PathValue
	emit   func(*journal.PathValue) error
}

func (t *tombstonesFirst) add(pv *journal.PathValue) error {
	if len(t.values) > 0 && pv.GetIndex() != t.index {
		if err := t.flush(); err != nil {
			return err
		}
	}
	t.index = pv.GetIndex()
	t.values = append(t.values, pv)
	return nil
}

func (t *tombstonesFirst) flush() error {
	for _, deleted := range []bool{true, false} {
		for _, pv := range t.values {
			if pv.GetDeleted() == deleted {
				if err := t.emit(pv); err != nil {
					return err
				}
			}
		}
	}
	t.values = t.values[:0]
	return nil
}
