package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime/trace"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Every method below is one transition: it checks its guards and, only if
// they hold, writes its effect in one Badger transaction. A refused
// transition returns an error wrapping ErrGuard, ErrNotFound or ErrCompacted
// and writes nothing. Methods return the proposal and configuration as the
// transition left them.

// ProposeChange journals a Set as a new proposal with commit and apply
// Pending (spec ProposeChange). Its index is the returned proposal's Index.
// It is refused (ErrGuard) while a commit-confirmed is outstanding (docs/design.md
// §4): until it is confirmed, cancelled or rolled back, no other change may
// be stacked on top of the change the client may still have undone.
//
// Each then function runs after the proposal is written, in the same
// transaction (see Tx): the agent uses it to take the steps the new proposal
// enables without another fsync. An error from one of them fails the whole
// transition, proposal included.
func (j *Journal) ProposeChange(ctx context.Context, ops []*Op, then ...func(*Tx) error) (*Proposal, error) {
	return j.ProposeChangeBy(ctx, Sender{}, ops, then...)
}

// Sender says who proposed a change or a rollback, and why
// (Change.author and comment, Rollback.author and comment), and what the
// client's Set carried besides its operations that its device Set carries
// again (Change.extensions).
type Sender struct {
	// Author names the requester: a client certificate's subject, a gRPC
	// metadata username or a client address; "device" for a drift
	// adoption. Never a secret.
	Author string
	// Comment is the requester's free text (a commit message), if any.
	Comment string
	// Extensions are the client's gnmi_ext.Extensions the sidecar does not
	// handle itself, each serialized as received: relayed with the
	// change's device Set. Only a change records them.
	Extensions [][]byte
	// Prefix is the prefix of the client's SetRequest as sent (nil: none):
	// the change's device Set has it too, and its target is the target of
	// the values the change writes. Only a change records it.
	Prefix *gnmi.Path
	// Read is what the device held at the change's paths the journal
	// knew nothing of, read just before it was journaled (nil: nothing
	// read). Only a change records it.
	Read *DeviceRead

	// emptyOK lets a baseline of a device that holds nothing be journaled
	// without operations.
	emptyOK bool
}

// ProposeChangeBy is ProposeChange recording who proposed the change.
func (j *Journal) ProposeChangeBy(ctx context.Context, by Sender, ops []*Op, then ...func(*Tx) error) (*Proposal, error) {
	return j.propose(ctx, by, ops, "a commit-confirmed is outstanding", "confirm or cancel it first, or wait for its rollback", nil, then)
}

// Units returns what op writes, leaf by leaf (Op.units, or its values with
// the markers of the list entries on their paths when Op.units_are_values).
func Units(op *Op) []*Leaf {
	if op.GetUnitsAreValues() {
		return impliedUnits(op.GetValues())
	}
	return op.GetUnits()
}

// impliedUnits returns values, each after a marker ({} in JSON_IETF) for
// every list entry on its path not yet marked: the units scalar values at
// their own paths decompose into.
func impliedUnits(values []*Leaf) []*Leaf {
	out := make([]*Leaf, 0, len(values))
	// The entries on one value's path are distinct (each one element
	// longer): only a second value can mark one again.
	var marked map[string]bool
	for _, v := range values {
		elems := v.GetPath().GetElem()
		for k := range len(elems) - 1 {
			if len(elems[k].GetKey()) == 0 {
				continue
			}
			entry := &gnmi.Path{Origin: v.GetPath().GetOrigin(), Elem: elems[:k+1]}
			if len(values) > 1 {
				key := string(PathKey(entry))
				if marked[key] {
					continue
				}
				if marked == nil {
					marked = make(map[string]bool)
				}
				marked[key] = true
			}
			out = append(out, &Leaf{Path: entry, Value: markerValue})
		}
		out = append(out, v)
	}
	return out
}

var markerValue = &gnmi.TypedValue{Value: &gnmi.TypedValue_JsonIetfVal{JsonIetfVal: []byte("{}")}}

// propose cleans ops, decomposes their values leaf by leaf and journals
// them as a new proposal, refused while a commit-confirmed is outstanding
// (the refusal's words: lead and advice); then, in the same transaction, it
// calls also (if set) with the new proposal, and the then functions.
func (j *Journal) propose(ctx context.Context, by Sender, ops []*Op, lead, advice string, also func(w *writeTxn, p *Proposal) error, then []func(*Tx) error) (*Proposal, error) {
	region := trace.StartRegion(ctx, "journal.clean")
	var clean []*Op
	var lists []leaves.List
	var err error
	if len(ops) > 0 || !by.emptyOK {
		clean, lists, err = j.cleanOps(ops)
	}
	region.End()
	if err != nil {
		return nil, err
	}
	var reads []*Op
	if by.Read != nil && len(by.Read.Values) > 0 {
		var readLists []leaves.List
		if reads, readLists, err = j.deviceReads(by.Read); err != nil {
			return nil, fmt.Errorf("journal: before the change: %w", err)
		}
		lists = append(lists, readLists...)
	}
	var out *Proposal
	err = j.submit(ctx, func(w *writeTxn) error {
		out = nil
		if err := w.commitConfirmGuard(lead, advice); err != nil {
			return err
		}
		p, _, err := w.proposeChange(by, clean)
		if err != nil {
			return err
		}
		if by.Read != nil {
			p.Change.DeviceReads, p.Change.ReadScopes, p.Change.Unread = reads, by.Read.Scopes, by.Read.Unread
			if err := w.put(proposalKey(p.GetIndex()), p); err != nil {
				return err
			}
		}
		if err := w.recordLists(lists); err != nil {
			return err
		}
		if also != nil {
			if err := also(w, p); err != nil {
				return err
			}
		}
		for _, fn := range then {
			if err := fn(&Tx{w: w}); err != nil {
				return err
			}
		}
		out = p
		return nil
	})
	return out, err
}

// proposeChange writes ops (already cleaned) as a new proposal and emits
// its ProposeChange event. Its guards are the caller's.
func (w *writeTxn) proposeChange(by Sender, ops []*Op) (*Proposal, *Configuration, error) {
	c, err := w.configuration()
	if err != nil {
		return nil, nil, err
	}
	c.LastIndex++
	p := &Proposal{
		Index: c.LastIndex,
		Phase: PhaseChange,
		Change: &Change{
			Ops:        ops,
			Commit:     StatusPending,
			Apply:      StatusPending,
			Proposed:   w.stamp(),
			Author:     by.Author,
			Comment:    by.Comment,
			Extensions: by.Extensions,
			Prefix:     by.Prefix,
		},
	}
	if err := w.put(proposalKey(p.Index), p); err != nil {
		return nil, nil, err
	}
	if err := w.putOwnedConfiguration(c); err != nil {
		return nil, nil, err
	}
	w.emit(Event{Action: ActionProposeChange, Index: p.Index, Proposal: p, Configuration: c})
	return p, c, nil
}

// cleanOps validates ops and returns a copy with targets dropped and the
// values of replaces and updates decomposed into units (package leaves),
// and the lists their keyed paths name. A value that cannot be recorded
// exactly is refused with an error wrapping leaves.ErrNeedSchema or
// leaves.ErrInvalid (and ErrInvalid).
func (j *Journal) cleanOps(ops []*Op) ([]*Op, []leaves.List, error) {
	if len(ops) == 0 {
		return nil, nil, fmt.Errorf("journal: propose: no operations: %w", ErrInvalid)
	}
	// Learn from every update and replace first: one may name the keys of
	// a list another holds as JSON.
	for _, op := range ops {
		if writes(op.GetKind()) {
			j.keys.Learn(op.GetPath())
		}
	}
	out := make([]*Op, len(ops))
	lists := newListSet()
	for n, op := range ops {
		op = copyToClean(op)
		validate := ValidatePath
		if op.GetKind() == OpDelete {
			validate = ValidateDeletePath
		}
		if err := validate(op.GetPath()); err != nil {
			return nil, nil, fmt.Errorf("journal: propose: operation %d: %v: %w", n, err, ErrInvalid)
		}
		op.Path.Target = ""
		op.Units, op.ImpliedDeletes = nil, nil
		switch op.GetKind() {
		case OpDelete:
			if len(op.GetValues()) > 0 {
				return nil, nil, fmt.Errorf("journal: propose: delete of %s carries values: %w", gnmipath.String(op.Path), ErrInvalid)
			}
		case OpReplace, OpUpdate, OpUnionReplace:
			if len(op.GetValues()) == 0 {
				return nil, nil, fmt.Errorf("journal: propose: %s of %s has no value: %w", op.GetKind(), gnmipath.String(op.Path), ErrInvalid)
			}
			lists.add(op.GetPath())
		default:
			return nil, nil, fmt.Errorf("journal: propose: operation %d has kind %v: %w", n, op.GetKind(), ErrInvalid)
		}
		var under *subtree // made for the first value not at op's path itself
		for _, leaf := range op.GetValues() {
			if err := ValidatePath(leaf.GetPath()); err != nil {
				return nil, nil, fmt.Errorf("journal: propose: value under %s: %v: %w", gnmipath.String(op.Path), err, ErrInvalid)
			}
			leaf.Path.Target = ""
			if leaf.GetValue() == nil {
				return nil, nil, fmt.Errorf("journal: propose: %s has no value: %w", gnmipath.String(leaf.Path), ErrInvalid)
			}
			if !sameElems(leaf.Path, op.Path) {
				if under == nil {
					s := subtreeOf(op.Path)
					under = &s
				}
				if !under.contains(PathKey(leaf.Path)) {
					return nil, nil, fmt.Errorf("journal: propose: value at %s is not under %s: %w",
						gnmipath.String(leaf.Path), gnmipath.String(op.Path), ErrInvalid)
				}
			}
			w, err := j.decomposer.Decompose(leaf.GetPath(), leaf.GetValue())
			if errors.Is(err, leaves.ErrInvalid) {
				return nil, nil, fmt.Errorf("journal: propose: %w: %w", err, ErrInvalid)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("journal: propose: %w", err)
			}
			op.ImpliedDeletes = append(op.ImpliedDeletes, w.Deletes...)
			for _, u := range w.Units {
				if err := ValidatePath(u.GetPath()); err != nil {
					return nil, nil, fmt.Errorf("journal: propose: value under %s: %v: %w", gnmipath.String(op.Path), err, ErrInvalid)
				}
				op.Units = append(op.Units, &Leaf{Path: u.GetPath(), Value: u.GetVal()})
				lists.add(u.GetPath())
			}
		}
		if writes(op.GetKind()) && len(op.GetImpliedDeletes()) == 0 &&
			slices.EqualFunc(op.GetUnits(), impliedUnits(op.GetValues()), sameLeaf) {
			op.Units, op.UnitsAreValues = nil, true // kept once
		}
		out[n] = op
	}
	return out, lists.lists, nil
}

// copyToClean copies op for cleanOps to change: a new Op with copies of
// its paths (and origin_on_path); the values themselves (TypedValues, never changed) are
// shared. The units, implied deletes and units_are_values are cleanOps'
// to fill in.
func copyToClean(op *Op) *Op {
	out := &Op{Kind: op.GetKind(), Path: ownPath(op.GetPath()), OriginOnPath: op.GetOriginOnPath()}
	if vs := op.GetValues(); len(vs) > 0 {
		out.Values = make([]*Leaf, len(vs))
		for k, v := range vs {
			out.Values[k] = &Leaf{Path: ownPath(v.GetPath()), Value: v.GetValue()}
		}
	}
	return out
}

// ownPath is a new Path with p's origin, target and elements, the
// elements shared (nothing changes a path's elements), for cleanOps to
// change its target; a path with legacy elements or unknown fields is
// cloned whole.
func ownPath(p *gnmi.Path) *gnmi.Path {
	//lint:ignore SA1019 a path's deprecated elements are copied too
	if p == nil || len(p.GetElement()) > 0 || len(p.ProtoReflect().GetUnknown()) > 0 {
		return proto.CloneOf(p)
	}
	return &gnmi.Path{Origin: p.GetOrigin(), Target: p.GetTarget(), Elem: slices.Clip(p.GetElem())}
}

// sameLeaf is proto.Equal for two leaves, without reflection when they
// share their parts (a scalar value's unit shares the value's path
// elements and value).
func sameLeaf(a, b *Leaf) bool {
	pa, pb := a.GetPath(), b.GetPath()
	//lint:ignore SA1019 a path's deprecated elements still make it differ
	legacy := len(pa.GetElement()) + len(pb.GetElement())
	shared := (a == nil) == (b == nil) && (pa == nil) == (pb == nil) &&
		sameTypedValue(a.GetValue(), b.GetValue()) && pa.GetOrigin() == pb.GetOrigin() && pa.GetTarget() == pb.GetTarget() &&
		legacy == 0 && len(pa.GetElem()) == len(pb.GetElem()) &&
		len(pa.ProtoReflect().GetUnknown()) == 0 && len(pb.ProtoReflect().GetUnknown()) == 0 &&
		len(a.ProtoReflect().GetUnknown()) == 0 && len(b.ProtoReflect().GetUnknown()) == 0
	for k := 0; shared && k < len(pa.GetElem()); k++ {
		shared = sameElem(pa.GetElem()[k], pb.GetElem()[k])
	}
	return shared || proto.Equal(a, b)
}

// sameTypedValue is proto.Equal for two values that are the same one, or both
// the same flavour of JSON (a list entry's marker {} from the decomposer
// and from impliedUnits), without reflection; otherwise false.
func sameTypedValue(a, b *gnmi.TypedValue) bool {
	if a == b {
		return true
	}
	if len(a.ProtoReflect().GetUnknown()) > 0 || len(b.ProtoReflect().GetUnknown()) > 0 {
		return false
	}
	switch av := a.GetValue().(type) {
	case *gnmi.TypedValue_JsonIetfVal:
		bv, ok := b.GetValue().(*gnmi.TypedValue_JsonIetfVal)
		return ok && bytes.Equal(av.JsonIetfVal, bv.JsonIetfVal)
	case *gnmi.TypedValue_JsonVal:
		bv, ok := b.GetValue().(*gnmi.TypedValue_JsonVal)
		return ok && bytes.Equal(av.JsonVal, bv.JsonVal)
	}
	return false
}

// sameElems reports whether paths a and b have the same origin and
// elements (so the same PathKey), without reflection.
func sameElems(a, b *gnmi.Path) bool {
	return a.GetOrigin() == b.GetOrigin() && slices.EqualFunc(a.GetElem(), b.GetElem(), sameElem)
}

// sameElem is proto.Equal for two path elements without unknown fields,
// without reflection.
func sameElem(a, b *gnmi.PathElem) bool {
	return a == b || a != nil && b != nil && a.GetName() == b.GetName() && maps.Equal(a.GetKey(), b.GetKey()) &&
		len(a.ProtoReflect().GetUnknown()) == 0 && len(b.ProtoReflect().GetUnknown()) == 0
}

// writes reports whether an operation of kind k writes values: a replace,
// an update or a union_replace.
func writes(k OpKind) bool {
	return k == OpReplace || k == OpUpdate || k == OpUnionReplace
}

// proposalTransition is one transition of one proposal: fn checks its
// guards against the configuration c and proposal p and, only if they hold,
// changes them (and may write other keys). fn returning errUnchanged means
// the transition holds but has nothing to write (a re-entry).
type proposalTransition struct {
	action Action
	index  uint64
	fn     func(w *writeTxn, c *Configuration, p *Proposal) error
}

// proposalTransition runs t in a transaction of its own.
func (j *Journal) proposalTransition(ctx context.Context, t proposalTransition) (*Proposal, *Configuration, error) {
	var outP *Proposal
	var outC *Configuration
	err := j.submit(ctx, func(w *writeTxn) (err error) {
		outP, outC, err = w.proposalTransition(t)
		return err
	})
	return outP, outC, err
}

// proposalTransition runs t in w: after t.fn, the proposal and the
// configuration are written back, and the transition's event is emitted,
// followed by the events t.fn queued in w.followUps. The results are c and
// p as the transition left them.
func (w *writeTxn) proposalTransition(t proposalTransition) (*Proposal, *Configuration, error) {
	c, p, err := w.load(t.index)
	if err != nil {
		return nil, nil, err
	}
	w.followUps, w.read = nil, nil
	switch err := t.fn(w, c, p); {
	case errors.Is(err, errUnchanged):
	case err != nil:
		return nil, nil, err
	default:
		if err := w.putProposalAndConfiguration(p, c); err != nil {
			return nil, nil, err
		}
		w.emit(Event{Action: t.action, Index: t.index, Proposal: p, Configuration: c, Read: w.read})
		for _, e := range w.followUps {
			w.emit(e)
		}
	}
	return p, c, nil
}

// errUnchanged tells proposalTransition that a transition holds but has
// nothing to write.
var errUnchanged = errors.New("unchanged")

// CommitChange commits proposal i (spec CommitChange, its steps merged into
// one transaction): it expands the operations against the committed values
// (all deletes, then replaces, then updates; a delete or replace tombstones
// the whole stored subtree), records what every touched path held before as
// the rollback values, writes the effective values with index i and marks
// the commit Complete.
func (j *Journal) CommitChange(ctx context.Context, i uint64) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, commitChangeTransition(i))
}

// CommitChange is Journal.CommitChange inside tx.
func (tx *Tx) CommitChange(i uint64) (*Proposal, *Configuration, error) {
	return tx.w.proposalTransition(commitChangeTransition(i))
}

func commitChangeTransition(i uint64) proposalTransition {
	return proposalTransition{action: ActionCommitChange, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		if err := w.commitGuard(c, p); err != nil {
			return err
		}
		ch := p.GetChange()
		if err := w.takeDeviceReads(c, ch); err != nil {
			return err
		}
		eff, err := w.expand(i, ch.GetOps())
		if err != nil {
			return err
		}
		if ch.GetBaseline() {
			// A baseline records every node the device holds: a marker
			// the committed values hold already (which expand leaves
			// out, see writeUnit) is the baseline's too, or removeStale
			// would take the entry for one the device no longer holds
			// and tombstone it above its live values. A baseline is never
			// rolled back, so the marker's before-image is never undone.
			for _, op := range ch.GetOps() {
				for _, u := range Units(op) {
					key := PathKey(u.GetPath())
					if _, ok := eff.values[string(key)]; !ok && leaves.IsMarker(u.GetValue()) {
						eff.put(key, &PathValue{Path: u.GetPath(), Index: i, Value: u.GetValue()})
					}
				}
			}
			slices.Sort(eff.keys)
		}
		if ch.GetBaseline() && ch.GetFinalChunk() {
			if err := w.removeStale(eff, i, baselineStart(p), ch.GetReadScopes()); err != nil {
				return err
			}
			slices.Sort(eff.keys)
			c.BaselineIndex = i
		}
		eff.setTarget(ch.GetPrefix().GetTarget())
		var before, undo []*PathValue
		for _, k := range eff.keys {
			prev, err := w.value(nsCommitted, []byte(k))
			if err != nil {
				return err
			}
			if prev == nil && len(ch.GetUnread()) > 0 {
				prev = unknownBefore(ch.GetUnread(), eff.values[k])
			}
			before, undo = append(before, prev), append(undo, rollbackValue(prev, eff.values[k]))
		}
		// Guards hold and everything is read: write.
		history := make([]*journalpb.HistoryEntry, 0, len(eff.keys))
		rollback := &Rollback{Index: c.Committed.Index, Values: undo}
		values := make([]*PathValue, 0, len(eff.keys))
		for n, k := range eff.keys {
			pv := eff.values[k]
			values = append(values, pv)
			history = append(history, &journalpb.HistoryEntry{Before: before[n], After: pv})
			if err := w.put(valueKey(nsCommitted, []byte(k)), pv); err != nil {
				return err
			}
		}
		if err := w.appendHistory(c, i, HistoryKindCommitChange, history); err != nil {
			return err
		}
		p.Change.Values = values
		p.Change.Commit = StatusComplete
		p.Change.Committed = w.stamp()
		p.Rollback = rollback
		c.Committed.Proposal = i
		c.Committed.Index = i
		return nil
	}}
}

// commitGuard checks CommitChangeGuard for proposal p and that no
// proposal before its predecessor has its commit pending: one FailApply
// re-based, which a commit failed before p's predecessor does not hold
// back (spec CommitChange: commits go in index order). Committed.proposal
// is the proposal before the first one re-based, so only the proposals
// after it are read, none once commits went on in order.
func (w *writeTxn) commitGuard(c *Configuration, p *Proposal) error {
	if err := w.guardWithPrevious(c, p, CommitChangeGuard); err != nil {
		return err
	}
	i := p.GetIndex()
	for k := max(c.GetCommitted().GetProposal()+1, c.GetFirstIndex()); k+1 < i; k++ {
		pk, err := w.proposalStatusView(c, k)
		if err != nil {
			return err
		}
		if pk.GetPhase() == PhaseChange && pk.GetChange().GetCommit() == StatusPending {
			return guardf("commit proposal %d: proposal %d, re-based by a failed apply, commits first", i, k)
		}
	}
	return nil
}

// rollbackValue is what a rollback writes back at the path of value pv,
// which held prev (nil: nothing the journal knows of): prev, or a tombstone
// with index 0.
func rollbackValue(prev, pv *PathValue) *PathValue {
	if prev == nil {
		return &PathValue{Path: pv.GetPath(), Deleted: true}
	}
	return prev
}

// FailCommit marks proposal i's commit Failed (spec CommitChange, invalid
// branch): nothing is written to the committed values and committed.index
// keeps naming the newest proposal whose effect they hold. A commit-confirmed
// of proposal i is cleared with it (docs/design.md §4; OpenConfig
// gnmi-commit-confirmed.md v0.1.0): a failed commit leaves nothing to
// confirm or roll back, so the client may commit again at once.
func (j *Journal) FailCommit(ctx context.Context, i uint64, code uint32, message string) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, failCommitTransition(i, code, message))
}

// FailCommit is Journal.FailCommit inside tx.
func (tx *Tx) FailCommit(i uint64, code uint32, message string) (*Proposal, *Configuration, error) {
	return tx.w.proposalTransition(failCommitTransition(i, code, message))
}

func failCommitTransition(i uint64, code uint32, message string) proposalTransition {
	return proposalTransition{action: ActionFailCommit, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		if err := w.commitGuard(c, p); err != nil {
			return err
		}
		p.Change.Commit = StatusFailed
		p.Change.Committed = w.stamp()
		p.Change.Error = &journalpb.Error{Code: code, Message: message}
		c.Committed.Proposal = i
		return w.clearFailedCommitConfirm(i)
	}}
}

// StartApply marks proposal i's apply InProgress and makes it
// applied.proposal (spec ApplyChange, first and third branches): the agent
// is about to send it to the device. It requires the commit Complete, the
// previous proposal's apply Finished and the configuration re-pushed for
// the current mastership term. Calling it again for the proposal already in
// progress (after a transient failure and a re-push) is allowed and writes
// nothing.
func (j *Journal) StartApply(ctx context.Context, i uint64) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, startApplyTransition(i))
}

// StartApply is Journal.StartApply inside tx.
func (tx *Tx) StartApply(i uint64) (*Proposal, *Configuration, error) {
	return tx.w.proposalTransition(startApplyTransition(i))
}

func startApplyTransition(i uint64) proposalTransition {
	return proposalTransition{action: ActionStartApply, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		m, err := w.mastershipView()
		if err != nil {
			return err
		}
		if err := w.guardWithPrevious(c, p, func(c *Configuration, p, prev *Proposal) error {
			return StartApplyGuard(c, m, p, prev)
		}); err != nil {
			return err
		}
		if p.GetChange().GetApply() == StatusInProgress {
			return errUnchanged // re-entry after a transient failure
		}
		p.Change.Apply = StatusInProgress
		p.Change.ApplyStarted = w.stamp()
		c.Applied.Proposal = i
		return nil
	}}
}

// CompleteApply records that the device accepted proposal i, sent over the
// connection of mastership term `term` (spec ApplyChange, success and
// Complete branches merged): the effective values go into the applied
// values, applied.index = i, apply Complete. It is refused if the term has
// moved on since: the device may have restarted, so the agent must re-push
// and apply again.
func (j *Journal) CompleteApply(ctx context.Context, i, term uint64) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, completeApplyTransition(i, term))
}

// CompleteApply is Journal.CompleteApply inside tx.
func (tx *Tx) CompleteApply(i, term uint64) (*Proposal, *Configuration, error) {
	return tx.w.proposalTransition(completeApplyTransition(i, term))
}

func completeApplyTransition(i, term uint64) proposalTransition {
	return proposalTransition{action: ActionCompleteApply, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		m, err := w.mastershipView()
		if err != nil {
			return err
		}
		if err := CompleteApplyGuard(c, m, p, term); err != nil {
			return err
		}
		if err := w.writeApplied(p.GetChange().GetValues()); err != nil {
			return err
		}
		if err := w.clearOutOfSync(c, p.GetChange().GetValues()); err != nil {
			return err
		}
		p.Change.Apply = StatusComplete
		p.Change.Applied = w.stamp()
		c.Applied.Index = i
		return nil
	}}
}

// CompleteApplyOutOfSync records proposal i, in progress, applied under
// term with every value it writes out of sync, for the device's error
// (code, message): an acknowledged change the device kept refusing with a
// code the operator configured to retry, past the retries' bounds (docs/agent.md,
// "Answers"). Its client was told it is committed: it stays in the
// journal, and resolve settles it (retry, or accept what the device holds).
func (j *Journal) CompleteApplyOutOfSync(ctx context.Context, i, term uint64, code uint32, message string) (*Proposal, *Configuration, error) {
	complete := completeApplyTransition(i, term)
	return j.proposalTransition(ctx, proposalTransition{action: ActionCompleteApply, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		if err := complete.fn(w, c, p); err != nil {
			return err
		}
		for _, pv := range p.GetChange().GetValues() {
			if err := w.markOutOfSync(c, pv, CauseChange, i, code, message); err != nil {
				return err
			}
		}
		return nil
	}})
}

// FailApply records the device's definitive rejection of proposal i
// (spec ApplyChange, failure branch; docs/design.md §4): apply Failed with the
// device's error, and the committed values of the paths i wrote go back to
// the applied ones (with a history delta). No other Set fails for i's
// failure: the later proposals whose commit is Complete and whose apply is
// still Pending were committed on top of i's values, so they are re-based
// (each with an ActionRebase event): their commit goes back to Pending,
// the committed values they wrote go back to the applied ones too, and
// their values and rollback values are dropped; their operations and
// device reads stay, so that CommitChange commits them again, in index
// order, over what the device actually holds, as if i never existed, and
// the agent then applies them. The spec's FailApply leaves them committed;
// re-basing them is a refinement of it (docs/design.md §3). A proposal
// whose commit failed keeps it and gets AbortApply in its turn, as does an
// older journal's proposal aborted by an earlier failure
// (Change.aborted_by). committed.index becomes applied.index and
// committed.proposal the proposal before the first re-based one. A
// commit-confirmed of i is cleared with it (docs/design.md §4): its change
// did not take effect; one of a re-based proposal stays, as its change
// still takes effect.
func (j *Journal) FailApply(ctx context.Context, i uint64, code uint32, message string) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, failApplyTransition(i, code, message))
}

// FailApply is Journal.FailApply inside tx.
func (tx *Tx) FailApply(i uint64, code uint32, message string) (*Proposal, *Configuration, error) {
	return tx.w.proposalTransition(failApplyTransition(i, code, message))
}

func failApplyTransition(i uint64, code uint32, message string) proposalTransition {
	return proposalTransition{action: ActionFailApply, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		if err := FailApplyGuard(c, p); err != nil {
			return err
		}
		p.Change.Apply = StatusFailed
		p.Change.Applied = w.stamp()
		p.Change.Error = &journalpb.Error{Code: code, Message: message}
		// undone: the committed values of i and of the re-based
		// proposals, which go back to the applied ones.
		undone := slices.Clone(p.GetChange().GetValues())
		if p.GetChange().GetCommit() != StatusComplete || i > c.Committed.Index {
			undone = nil
		}
		rebased, err := w.rebaseAfter(c, i)
		if err != nil {
			return err
		}
		for _, pk := range rebased {
			undone = append(undone, pk.GetChange().GetValues()...)
		}
		var history []*journalpb.HistoryEntry
		restored := make(map[string]bool)
		for _, pv := range undone {
			key := PathKey(pv.GetPath())
			if restored[string(key)] {
				continue
			}
			restored[string(key)] = true
			entry, err := w.restoreCommitted(key)
			if err != nil {
				return err
			}
			if entry != nil {
				history = append(history, entry)
			}
		}
		if err := w.appendHistory(c, i, HistoryKindFailApply, history); err != nil {
			return err
		}
		c.Committed.Index = c.Applied.Index
		if len(rebased) > 0 {
			c.Committed.Proposal = rebased[0].GetIndex() - 1
		}
		if err := w.clearFailedCommitConfirm(i); err != nil {
			return err
		}
		for _, pk := range rebased {
			uncommit(pk)
			if err := w.put(proposalKey(pk.GetIndex()), pk); err != nil {
				return err
			}
			w.followUps = append(w.followUps, Event{Action: ActionRebase, Index: pk.GetIndex(), Proposal: pk, Configuration: c})
		}
		return nil
	}}
}

// rebaseAfter returns the proposals after i, up to committed.proposal,
// that FailApply of i re-bases: a change whose commit is Complete and
// whose apply is Pending, not aborted by an earlier failure (an older
// journal's Change.aborted_by), as committed (their values still set).
func (w *writeTxn) rebaseAfter(c *Configuration, i uint64) ([]*Proposal, error) {
	var out []*Proposal
	for k := i + 1; k <= c.Committed.Proposal; k++ {
		pk, err := w.proposal(c, k)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrCompacted) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ch := pk.GetChange()
		if pk.GetPhase() != PhaseChange || ch.GetCommit() != StatusComplete || ch.GetApply() != StatusPending || ch.GetAbortedBy() != 0 {
			continue // its commit failed: AbortApply in its turn
		}
		out = append(out, pk)
	}
	return out, nil
}

// uncommit puts proposal p's commit back to Pending for CommitChange to
// redo: what its commit computed (the values, the rollback values and
// index, the commit time) is dropped; its operations, device reads, read
// scopes and unread subtrees, from which CommitChange computes it, stay.
func uncommit(p *Proposal) {
	p.Change.Commit = StatusPending
	p.Change.Committed = nil
	p.Change.Values = nil
	if p.Rollback == nil {
		p.Rollback = &Rollback{}
	}
	p.Rollback.Index = 0
	p.Rollback.Values = nil
}

// restoreCommitted sets the committed value of key to its applied value
// (or removes it), and returns the history entry, nil if nothing changed.
func (w *writeTxn) restoreCommitted(key []byte) (*journalpb.HistoryEntry, error) {
	cur, err := w.value(nsCommitted, key)
	if err != nil {
		return nil, err
	}
	app, err := w.value(nsApplied, key)
	if err != nil {
		return nil, err
	}
	if proto.Equal(cur, app) {
		return nil, nil
	}
	if app == nil {
		err = w.delete(valueKey(nsCommitted, key))
	} else {
		err = w.put(valueKey(nsCommitted, key), app)
	}
	if err != nil {
		return nil, err
	}
	return &journalpb.HistoryEntry{Before: cur, After: app}, nil
}

// AbortApply marks the apply of proposal i Aborted without device I/O,
// because its commit failed or was aborted (spec ApplyChange, second
// branch). It keeps apply order: proposal i-1's apply must be Finished. A
// commit-confirmed of proposal i, if still there, is cleared with it (docs/design.md
// §4).
func (j *Journal) AbortApply(ctx context.Context, i uint64) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, abortApplyTransition(i))
}

// AbortApply is Journal.AbortApply inside tx.
func (tx *Tx) AbortApply(i uint64) (*Proposal, *Configuration, error) {
	return tx.w.proposalTransition(abortApplyTransition(i))
}

func abortApplyTransition(i uint64) proposalTransition {
	return proposalTransition{action: ActionAbortApply, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		if err := w.guardWithPrevious(c, p, func(_ *Configuration, p, prev *Proposal) error { return AbortApplyGuard(p, prev) }); err != nil {
			return err
		}
		ch := p.GetChange()
		ch.Apply = StatusAborted
		ch.Applied = w.stamp()
		return w.clearFailedCommitConfirm(i)
	}}
}

// ProposeRollback starts the rollback of proposal i (spec ProposeRollback,
// with the product's stricter rules so a request can be refused up front):
// i must be the newest change in effect (committed.index = applied.index =
// i), applied, not itself a rollback, with every later proposal Finished and
// no other rollback under way. It is refused while a commit-confirmed is
// outstanding (docs/design.md §4): that change is undone by cancelling it, which
// ExpireCommit turns into this same rollback.
func (j *Journal) ProposeRollback(ctx context.Context, i uint64) (*Proposal, *Configuration, error) {
	return j.ProposeRollbackBy(ctx, i, Sender{})
}

// ProposeRollbackBy is ProposeRollback recording who asked for it.
func (j *Journal) ProposeRollbackBy(ctx context.Context, i uint64, by Sender) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, proposeRollbackTransition(i, by))
}

func proposeRollbackTransition(i uint64, by Sender) proposalTransition {
	return proposalTransition{action: ActionProposeRollback, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		if err := w.commitConfirmGuard("a commit-confirmed is outstanding",
			"cancel it with the commit extension (or `gnmi-sidecar commit cancel`) instead"); err != nil {
			return err
		}
		if err := w.proposeRollback(c, p); err != nil {
			return err
		}
		p.Rollback.Author, p.Rollback.Comment = by.Author, by.Comment
		return nil
	}}
}

// proposeRollback is ProposeRollback's guards and effect on c and p, for
// the caller to write: it checks rollbackGuard and, only if it holds, puts
// p in the Rollback phase with its rollback commit and apply Pending and
// makes it the rollback under way.
func (w *writeTxn) proposeRollback(c *Configuration, p *Proposal) error {
	if err := w.flushPending(); err != nil { // rollbackGuard reads the later proposals in Badger
		return err
	}
	if err := rollbackGuard(w.txn, c, p); err != nil {
		return err
	}
	if p.Rollback == nil {
		p.Rollback = &Rollback{}
	}
	p.Phase = PhaseRollback
	p.Rollback.Commit = StatusPending
	p.Rollback.Apply = StatusPending
	p.Rollback.Proposed = w.stamp()
	c.RollingBack = p.GetIndex()
	return nil
}

// rollbackGuard checks that proposal p may be rolled back now.
func rollbackGuard(txn *badger.Txn, c *Configuration, p *Proposal) error {
	i := p.GetIndex()
	switch {
	case p.GetChange().GetBaseline():
		return guardf("roll back proposal %d: it is the device's own configuration as the sidecar read it (a baseline, tag %q): it changed nothing on the device, and rolling it back would delete that configuration; `gnmi-sidecar rollback --to %s` goes back to it",
			i, BaselineTag, BaselineTag)
	case p.GetPhase() == PhaseRollback:
		return guardf("roll back proposal %d: it is already rolled back (a rollback cannot itself be rolled back)", i)
	case c.GetRollingBack() != 0:
		return guardf("roll back proposal %d: rollback of proposal %d is in progress", i, c.GetRollingBack())
	case p.GetChange().GetApply() != StatusComplete:
		return guardf("roll back proposal %d: it is not applied (commit %v, apply %v)",
			i, p.GetChange().GetCommit(), p.GetChange().GetApply())
	case c.Committed.Index != c.Applied.Index:
		return guardf("roll back proposal %d: proposal %d is committed but not yet applied", i, c.Committed.Index)
	case c.Committed.Index != i:
		return guardf("roll back proposal %d: roll back proposal %d first", i, c.Committed.Index)
	}
	for k := i + 1; k <= c.LastIndex; k++ {
		later, err := loadProposalStatus(txn, c, k)
		if err != nil {
			return err
		}
		if !proposalDone(later) {
			return guardf("roll back proposal %d: proposal %d is still in progress", i, k)
		}
	}
	return refuseUnknown(fmt.Sprintf("roll back proposal %d", i), p.GetRollback().GetValues())
}

// CommitRollback writes proposal i's rollback values into the committed
// values and moves committed.index back to rollback.index (spec
// CommitRollback, its steps merged).
func (j *Journal) CommitRollback(ctx context.Context, i uint64) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, commitRollbackTransition(i))
}

func commitRollbackTransition(i uint64) proposalTransition {
	return proposalTransition{action: ActionCommitRollback, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		if err := CommitRollbackGuard(c, p); err != nil {
			return err
		}
		rb := p.GetRollback()
		var before []*PathValue
		for _, pv := range rb.GetValues() {
			prev, err := w.value(nsCommitted, PathKey(pv.GetPath()))
			if err != nil {
				return err
			}
			before = append(before, prev)
		}
		history := make([]*journalpb.HistoryEntry, 0, len(rb.GetValues()))
		for n, pv := range rb.GetValues() {
			if err := w.put(valueKey(nsCommitted, PathKey(pv.GetPath())), pv); err != nil {
				return err
			}
			history = append(history, &journalpb.HistoryEntry{Before: before[n], After: pv})
		}
		if err := w.appendHistory(c, i, HistoryKindCommitRollback, history); err != nil {
			return err
		}
		rb.Commit = StatusComplete
		rb.Committed = w.stamp()
		c.Committed.Index = rb.GetIndex()
		c.Committed.Proposal = rb.GetIndex()
		return nil
	}}
}

// StartApplyRollback marks proposal i's rollback apply InProgress (spec
// ApplyRollback, first branches): the agent is about to send the rollback
// values to the device. Re-entry for a rollback already in progress writes
// nothing.
func (j *Journal) StartApplyRollback(ctx context.Context, i uint64) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, startApplyRollbackTransition(i))
}

func startApplyRollbackTransition(i uint64) proposalTransition {
	return proposalTransition{action: ActionStartApplyRollback, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		m, err := w.mastershipView()
		if err != nil {
			return err
		}
		if err := StartApplyRollbackGuard(c, m, p); err != nil {
			return err
		}
		rb := p.GetRollback()
		if rb.GetApply() == StatusInProgress {
			return errUnchanged // re-entry after a transient failure
		}
		rb.Apply = StatusInProgress
		rb.ApplyStarted = w.stamp()
		c.Applied.Proposal = rb.GetIndex()
		return nil
	}}
}

// CompleteApplyRollback records that the device accepted proposal i's
// rollback values, sent under mastership term `term` (spec ApplyRollback,
// last branches merged): they go into the applied values, applied.index =
// rollback.index, rollback apply Complete. A rollback the device refuses
// for good is recorded by FailApplyRollback.
func (j *Journal) CompleteApplyRollback(ctx context.Context, i, term uint64) (*Proposal, *Configuration, error) {
	return j.proposalTransition(ctx, completeApplyRollbackTransition(i, term))
}

func completeApplyRollbackTransition(i, term uint64) proposalTransition {
	return proposalTransition{action: ActionCompleteApplyRollback, index: i, fn: func(w *writeTxn, c *Configuration, p *Proposal) error {
		if err := w.finishApplyRollback(c, p, i, term); err != nil {
			return err
		}
		p.Rollback.Apply = StatusComplete
		return w.clearOutOfSync(c, p.GetRollback().GetValues())
	}}
}

// finishApplyRollback is the effect both outcomes of a rollback's apply
// share: the rollback values become the applied values, applied.index =
// rollback.index, no rollback under way.
func (w *writeTxn) finishApplyRollback(c *Configuration, p *Proposal, i, term uint64) error {
	m, err := w.mastershipView()
	if err != nil {
		return err
	}
	if err := FinishApplyRollbackGuard(c, m, p, term); err != nil {
		return err
	}
	rb := p.GetRollback()
	if err := w.writeApplied(rb.GetValues()); err != nil {
		return err
	}
	rb.Applied = w.stamp()
	c.Applied.Index = rb.GetIndex()
	c.Applied.Proposal = rb.GetIndex()
	c.RollingBack = 0
	return nil
}

// Connect records a new southbound connection: it increments the
// mastership term and the connection id and returns them (spec
// ReconcileMastership). They are never reused, even across crashes. The
// first Connect of a journal also draws its incarnation number.
func (j *Journal) Connect(ctx context.Context) (*Mastership, error) {
	var out *Mastership
	err := j.submit(ctx, func(w *writeTxn) error {
		m, err := w.mastership()
		if err != nil {
			return err
		}
		m.Term++
		m.Conn++
		for m.Incarnation == 0 {
			m.Incarnation = rand.Uint64() // math/rand/v2: seeded from the OS, ChaCha8
		}
		if err := w.put(keyMastership, m); err != nil {
			return err
		}
		w.emit(Event{Action: ActionConnect, Mastership: m})
		out = m
		return nil
	})
	return out, err
}

// StartReconcile marks the configuration's re-push for mastership term
// `term` InProgress (spec ReconcileConfiguration, first branch). term must be
// the current term and newer than the applied term. Starting again (after a
// crash or another reconnect during a re-push) is allowed.
func (j *Journal) StartReconcile(ctx context.Context, term uint64) (*Configuration, error) {
	var out *Configuration
	err := j.submit(ctx, func(w *writeTxn) error {
		c, m, err := w.configurationAndMastership()
		if err != nil {
			return err
		}
		if err := ReconcileGuard(c, m, term); err != nil {
			return err
		}
		c.Status = StatusInProgress
		if err := w.put(keyConfiguration, c); err != nil {
			return err
		}
		w.emit(Event{Action: ActionStartReconcile, Configuration: c})
		out = c
		return nil
	})
	return out, err
}

// CompleteReconcile records that the applied values were re-pushed to the
// device under term `term` (spec ReconcileConfiguration, second branch):
// applied.term = term, applied.target = target (the device incarnation the
// agent saw; 0 means "the previous one + 1"), status Complete.
//
// The re-push sent every applied value, so the out-of-sync records are
// replaced: those of the values the device refused (refused, with its
// error) and those in kept (paths the re-push left out) remain; the rest
// the device now holds. A persistent device's term (no re-push, no
// outcome given) leaves the records as they are.
func (j *Journal) CompleteReconcile(ctx context.Context, term, target uint64, outcome ...RepushOutcome) (*Configuration, error) {
	var out *Configuration
	err := j.submit(ctx, func(w *writeTxn) error {
		c, m, err := w.configurationAndMastership()
		if err != nil {
			return err
		}
		if err := CompleteReconcileGuard(c, m, term); err != nil {
			return err
		}
		if target == 0 {
			target = c.Applied.Target + 1
		}
		for _, o := range outcome {
			if err := w.recordRepush(c, o); err != nil {
				return err
			}
		}
		c.Applied.Term = term
		c.Applied.Target = target
		c.Status = StatusComplete
		if err := w.put(keyConfiguration, c); err != nil {
			return err
		}
		w.emit(Event{Action: ActionCompleteReconcile, Configuration: c})
		out = c
		return nil
	})
	return out, err
}

// mastership is the mastership record for a transition that changes it
// (Connect): its own copy of w's head.
func (w *writeTxn) mastership() (*Mastership, error) {
	if w.hasHeads {
		return cloneMastership(w.heads.mastership), nil
	}
	return w.mastershipView()
}

// mastershipView is mastership for a caller that only reads it (the
// guards): w's head itself, no copy (as configurationView).
func (w *writeTxn) mastershipView() (*Mastership, error) {
	if w.hasHeads {
		return w.heads.mastership, nil
	}
	m := &Mastership{}
	if _, err := w.get(keyMastership, m); err != nil {
		return nil, err
	}
	return m, nil
}

func (w *writeTxn) configurationAndMastership() (*Configuration, *Mastership, error) {
	c, err := w.configuration()
	if err != nil {
		return nil, nil, err
	}
	m, err := w.mastershipView()
	return c, m, err
}

// --- helpers shared by the transitions ---

func (w *writeTxn) configuration() (*Configuration, error) {
	if w.hasHeads {
		return cloneConfiguration(w.heads.config), nil
	}
	return loadConfiguration(w.txn)
}

// configurationView is configuration for a caller that only reads it, and
// not after its transition: w's head itself, no copy (a head is replaced
// when the configuration is written, never changed, see noteWrite).
func (w *writeTxn) configurationView() (*Configuration, error) {
	if w.hasHeads {
		return w.heads.config, nil
	}
	return loadConfiguration(w.txn)
}

func loadConfiguration(txn *badger.Txn) (*Configuration, error) {
	c := &Configuration{}
	found, err := getRecord(txn, keyConfiguration, c)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("journal: configuration record missing")
	}
	return withDefaults(c), nil
}

// proposal is loadProposal in w, which may hold the proposal decoded
// (writeTxn.pending, or kept, recent.go): then a shallow copy of it.
func (w *writeTxn) proposal(c *Configuration, i uint64) (*Proposal, error) {
	return w.heldOr(c, i, shallowProposal, loadProposal)
}

// proposalStatusView is loadProposalStatus in w, for readers that only
// read it (the writer's guards, the agent's decisions in Tx): a proposal
// w holds decoded is returned itself, with all of it, not a status view
// (it must not be changed).
func (w *writeTxn) proposalStatusView(c *Configuration, i uint64) (*Proposal, error) {
	return w.heldOr(c, i, func(p *Proposal) *Proposal { return p }, loadProposalStatus)
}

// heldOr reads proposal i: as held(p) if w holds it decoded (its pending
// or kept record p, once kept checks it is retained), else with load from
// Badger.
func (w *writeTxn) heldOr(c *Configuration, i uint64, held func(*Proposal) *Proposal,
	load func(*badger.Txn, *Configuration, uint64) (*Proposal, error)) (*Proposal, error) {
	p := w.recentProposal(i)
	if p == nil {
		return load(w.txn, c, i)
	}
	if err := kept(c, i); err != nil {
		return nil, err
	}
	return held(p), nil
}

// kept checks that proposal i exists and retention kept it.
func kept(c *Configuration, i uint64) error {
	if i == 0 || i > c.GetLastIndex() {
		return fmt.Errorf("journal: proposal %d: %w", i, ErrNotFound)
	}
	if i < c.GetFirstIndex() {
		return fmt.Errorf("journal: proposal %d (oldest kept is %d): %w", i, c.GetFirstIndex(), ErrCompacted)
	}
	return nil
}

// shallowProposal copies p's own fields and those of its change and
// rollback, sharing everything below them (operations, values, errors,
// timestamps): what a transition changes of a proposal it read. The copies
// are written out field by field: copying by reflection (protoreflect's
// Range and Set) was one of the writer's largest costs per Set ("CPU per
// Set" in docs/bench.md). TestShallowCopiesAreWhole fails when a field is
// added to these messages and not here.
func shallowProposal(p *Proposal) *Proposal {
	cp := &proposalCopy{}
	out := &cp.proposal
	out.Index, out.Phase = p.GetIndex(), p.GetPhase()
	out.Change, out.Rollback = &cp.change, &cp.rollback
	copyChange(out.Change, p.GetChange())
	copyRollback(out.Rollback, p.GetRollback())
	out.CopyUnknownOf(p)
	return out
}

// proposalCopy holds a shallowProposal and its change and rollback in one
// allocation.
type proposalCopy struct {
	proposal Proposal
	change   Change
	rollback Rollback
}

// shallowChange is a new Change with c's fields (an empty one for nil).
func shallowChange(c *Change) *Change {
	out := &Change{}
	copyChange(out, c)
	return out
}

// copyChange sets the new, empty Change out to c's fields (none for nil).
func copyChange(out, c *Change) {
	if c == nil {
		return
	}
	out.Ops, out.Values, out.Commit, out.Apply = c.Ops, c.Values, c.Commit, c.Apply
	out.Proposed, out.Committed, out.ApplyStarted, out.Applied = c.Proposed, c.Committed, c.ApplyStarted, c.Applied
	out.Error, out.Adopted, out.Author, out.AbortedBy, out.AdoptedTerm = c.Error, c.Adopted, c.Author, c.AbortedBy, c.AdoptedTerm
	out.Comment, out.Restores, out.Extensions, out.Prefix = c.Comment, c.Restores, c.Extensions, c.Prefix
	out.Baseline, out.DeviceReads, out.ReadScopes, out.Unread = c.Baseline, c.DeviceReads, c.ReadScopes, c.Unread
	out.FinalChunk, out.BaselineFirst, out.CommitActions = c.FinalChunk, c.BaselineFirst, c.CommitActions
	out.CopyUnknownOf(c)
}

// shallowRollback is a new Rollback with r's fields (an empty one for nil).
func shallowRollback(r *Rollback) *Rollback {
	out := &Rollback{}
	copyRollback(out, r)
	return out
}

// copyRollback sets the new, empty Rollback out to r's fields (none for nil).
func copyRollback(out, r *Rollback) {
	if r == nil {
		return
	}
	out.Index, out.Values, out.Commit, out.Apply = r.Index, r.Values, r.Commit, r.Apply
	out.Proposed, out.Committed, out.ApplyStarted, out.Applied = r.Proposed, r.Committed, r.ApplyStarted, r.Applied
	out.Error, out.Author, out.Comment = r.Error, r.Author, r.Comment
	out.CopyUnknownOf(r)
}

// cloneConfiguration is proto.CloneOf(c) written out (see shallowProposal),
// but for its timestamps, which the clone shares: the writer clones the
// configuration at every transition, and every Journal.Configuration is
// one. The clone and its parts are one allocation (configurationCopy).
func cloneConfiguration(c *Configuration) *Configuration {
	if c == nil {
		return nil
	}
	cp := &configurationCopy{}
	out := &cp.config
	out.Status, out.LastIndex, out.FirstIndex, out.RollingBack = c.Status, c.LastIndex, c.FirstIndex, c.RollingBack
	out.HistorySeq, out.OutOfSync, out.Resolutions, out.TagChanges, out.BaselineIndex = c.HistorySeq, c.OutOfSync, c.Resolutions, c.TagChanges, c.BaselineIndex
	out.AppliesCompletedThrough = c.AppliesCompletedThrough
	// Timestamps are shared: a transition replaces one, never changes it
	// (as a proposal's, see stamp).
	out.HistoryFloor, out.HistoryTime = c.HistoryFloor, c.HistoryTime
	if m := c.Committed; m != nil {
		cp.committed.Proposal, cp.committed.Index = m.Proposal, m.Index
		cp.committed.CopyUnknownOf(m)
		out.Committed = &cp.committed
	}
	if m := c.Applied; m != nil {
		cp.applied.Proposal, cp.applied.Index, cp.applied.Term, cp.applied.Target = m.Proposal, m.Index, m.Term, m.Target
		cp.applied.CopyUnknownOf(m)
		out.Applied = &cp.applied
	}
	out.CopyUnknownOf(c)
	return out
}

// configurationCopy holds a cloned configuration and the messages it
// points to in one allocation.
type configurationCopy struct {
	config    Configuration
	committed journalpb.Committed
	applied   journalpb.Applied
}

// cloneMastership is proto.CloneOf(m) written out, as cloneConfiguration.
func cloneMastership(m *Mastership) *Mastership {
	if m == nil {
		return nil
	}
	out := &Mastership{Term: m.Term, Conn: m.Conn, Incarnation: m.Incarnation}
	out.CopyUnknownOf(m)
	return out
}

func loadProposal(txn *badger.Txn, c *Configuration, i uint64) (*Proposal, error) {
	if err := kept(c, i); err != nil {
		return nil, err
	}
	p := &Proposal{}
	found, err := getRecord(txn, proposalKey(i), p)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("journal: proposal %d record missing", i)
	}
	if p.Change == nil {
		p.Change = &Change{}
	}
	if p.Rollback == nil {
		p.Rollback = &Rollback{}
	}
	if err := completeIfDerived(txn, c, p); err != nil {
		return nil, err
	}
	return p, nil
}

// loadProposalStatus reads proposal i's phase and step statuses only (a
// ProposalStatus view of its record: what a guard or a decision needs,
// without decoding its operations and values), as a Proposal.
func loadProposalStatus(txn *badger.Txn, c *Configuration, i uint64) (*Proposal, error) {
	if err := kept(c, i); err != nil {
		return nil, err
	}
	item, err := txn.Get(proposalKey(i))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("journal: proposal %d record missing", i)
	}
	if err != nil {
		return nil, fmt.Errorf("read proposal %d: %w", i, err)
	}
	var p *Proposal
	err = readValue(item, func(v []byte) (err error) {
		p, err = decodeProposalStatus(v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("decode proposal %d: %w", i, err)
	}
	if derivedComplete(c, p) {
		completeAt(p, nil)
	}
	return p, nil
}

// decodeProposalStatus decodes of a proposal record only what
// ProposalStatus reads.
func decodeProposalStatus(v []byte) (*Proposal, error) {
	st := &journalpb.ProposalStatus{}
	if err := decodeRecordWith(proto.UnmarshalOptions{DiscardUnknown: true}, v, st); err != nil {
		return nil, err
	}
	ch := st.GetChange()
	return &Proposal{Index: st.GetIndex(), Phase: st.GetPhase(),
		Change: &Change{Commit: ch.GetCommit(), Apply: ch.GetApply(), Adopted: ch.GetAdopted(),
			AbortedBy: ch.GetAbortedBy(), AdoptedTerm: ch.GetAdoptedTerm(), Baseline: ch.GetBaseline()},
		Rollback: &Rollback{Commit: st.GetRollback().GetCommit(), Apply: st.GetRollback().GetApply()}}, nil
}

// load reads the configuration and proposal i.
func (w *writeTxn) load(i uint64) (*Configuration, *Proposal, error) {
	c, err := w.configuration()
	if err != nil {
		return nil, nil, err
	}
	p, err := w.proposal(c, i)
	if err != nil {
		return nil, nil, err
	}
	return c, p, nil
}

// guardWithPrevious checks guard for proposal p and its predecessor, if
// it is still kept (retention keeps only finished ones).
func (w *writeTxn) guardWithPrevious(c *Configuration, p *Proposal, guard func(c *Configuration, p, prev *Proposal) error) error {
	var prev *Proposal
	if i := p.GetIndex(); i > 1 && i-1 >= c.GetFirstIndex() {
		var err error
		if prev, err = w.proposalStatusView(c, i-1); err != nil {
			return err
		}
	}
	return guard(c, p, prev)
}

// requireSynced checks syncedGuard against the stored mastership.
func (w *writeTxn) requireSynced(c *Configuration, what string, i uint64) error {
	m, err := w.mastershipView()
	if err != nil {
		return err
	}
	return syncedGuard(c, m, what, i)
}

// putProposalAndConfiguration writes a transition's results: p, and c,
// the caller's own copy of the configuration (putOwnedConfiguration).
func (w *writeTxn) putProposalAndConfiguration(p *Proposal, c *Configuration) error {
	if err := w.put(proposalKey(p.GetIndex()), p); err != nil {
		return err
	}
	return w.putOwnedConfiguration(c)
}

// putOwnedConfiguration is put of the configuration record c, the
// caller's own copy (writeTxn.configuration) which nobody changes from now
// on: the writer's heads take it as it is rather than a copy of it (a
// head is never changed, see noteWrite), which saves a Set's transitions
// a copy each.
func (w *writeTxn) putOwnedConfiguration(c *Configuration) error {
	if !w.deferProposals || !w.hasHeads {
		return w.put(keyConfiguration, c)
	}
	w.heads.config = withDefaults(c)
	w.configPending = true
	w.wrote = true
	return nil
}

// value reads the committed or applied value of a path key (nil if
// absent). The PathValue may be the one the writer keeps (recentValues):
// the caller must not change it.
func (w *writeTxn) value(ns, pathKey []byte) (*PathValue, error) {
	key := valueKey(ns, pathKey)
	if v, ok := w.recentValue(key); ok {
		if v.deleted {
			return nil, nil
		}
		if v.pv != nil {
			if checkSharedValues {
				mustDecodeAs(key, v.b, v.pv)
			}
			if v.plain != nil {
				w.notePlain(v.pv, v.plain)
			}
			return v.pv, nil
		}
		pv := &PathValue{}
		if err := decodeRecord(v.b, pv); err != nil {
			return nil, fmt.Errorf("decode %q: %w", key, err)
		}
		return pv, nil
	}
	pv := &PathValue{}
	found, err := w.get(key, pv)
	if err != nil || !found {
		return nil, err
	}
	return pv, nil
}

// valueState reports whether a committed or applied value is stored at a
// path key, and whether it is a tombstone: value without decoding a kept
// record.
func (w *writeTxn) valueState(ns, pathKey []byte) (stored bool, tombstone bool, err error) {
	if v, ok := w.recentValue(valueKey(ns, pathKey)); ok {
		return !v.deleted, v.tombstone, nil
	}
	pv, err := w.value(ns, pathKey)
	return pv != nil, pv.GetDeleted(), err
}

// recentValue returns the newest record of the value at key if the writer
// holds it (this transaction's, or a recent durable one's).
func (w *writeTxn) recentValue(key []byte) (recentValue, bool) {
	if v, ok := w.valuesWritten[string(key)]; ok {
		return v, true
	}
	if w.values == nil {
		return recentValue{}, false
	}
	return w.values.get(key)
}

// writeApplied writes values into the applied values, and each tombstone
// into the tombstone index (lt/) too. The index entry of a tombstone a
// value replaces is left for retention to drop (dropTombstones): finding
// it would cost a read of the old value on every write.
func (w *writeTxn) writeApplied(values []*PathValue) error {
	for _, pv := range values {
		key := PathKey(pv.GetPath())
		if err := w.putApplied(key, pv); err != nil {
			return err
		}
		if pv.GetDeleted() {
			if err := w.putEmpty(appliedTombstoneKey(pv.GetIndex(), key)); err != nil {
				return err
			}
		}
	}
	return nil
}

// putApplied writes pv as the applied value of key. Most often pv is the
// committed value of key itself (the change's values, applied), whose
// record the writer keeps: then that record is written again rather than
// pv encoded again.
func (w *writeTxn) putApplied(key []byte, pv *PathValue) error {
	if v, ok := w.recentValue(valueKey(nsCommitted, key)); ok && v.pv == pv {
		return w.putRecord(valueKey(nsApplied, key), pv, v.b, v.plain)
	}
	return w.put(valueKey(nsApplied, key), pv)
}

func (w *writeTxn) appendHistory(c *Configuration, proposal uint64, kind journalpb.HistoryKind, entries []*journalpb.HistoryEntry) error {
	if len(entries) == 0 {
		return nil
	}
	// Strictly later than the newest delta, even when the clock is not:
	// a point's time then names exactly the configuration after it (a
	// History snapshot at a tag's time, see checkpoints.go).
	at := w.now
	if last := c.GetHistoryTime(); last != nil && !at.After(last.AsTime()) {
		at = last.AsTime().Add(time.Nanosecond)
	}
	c.HistorySeq++
	c.HistoryTime = timestamppb.New(at)
	key, d := historyKey(c.HistorySeq), &journalpb.HistoryDelta{
		Time:     c.HistoryTime,
		Proposal: proposal,
		Kind:     kind,
		Entries:  entries,
	}
	plain, err := w.plains.marshalHistoryDelta(d)
	if err != nil {
		return fmt.Errorf("encode %q: %w", key, err)
	}
	if checkSharedValues {
		mustDecodeAs(key, plain, d)
	}
	return w.putRecord(key, d, compressRecord(plain), plain)
}

// effective is the set of per-path writes of one proposal, by path key.
type effective struct {
	keys   []string // sorted once expansion is done
	values map[string]*PathValue
}

// setTarget gives every value the target of the change that writes it (a
// value's path keeps its writer's target; keys ignore targets).
func (e *effective) setTarget(target string) {
	for k, pv := range e.values {
		if pv.GetPath().GetTarget() == target {
			continue
		}
		p := proto.CloneOf(pv.GetPath())
		p.Target = target
		e.values[k] = &PathValue{Path: p, Index: pv.GetIndex(), Deleted: pv.GetDeleted(), Value: pv.GetValue()}
	}
}

func (e *effective) put(key []byte, pv *PathValue) {
	if _, ok := e.values[string(key)]; !ok {
		e.keys = append(e.keys, string(key))
	}
	e.values[string(key)] = pv
}

// expand computes the effective writes of ops for proposal i against the
// committed values, in gNMI order: deletes, then replaces, then the
// union_replaces, then updates. A delete or replace tombstones the whole
// stored subtree at its path; the implied deletes of an operation (other
// cases of a choice) tombstone what is stored there; then its units are
// written in order, a marker only where nothing is stored at or under its
// path (see writeUnit). The union_replaces act as one: every one of their
// paths is tombstoned first, then all their units are written, so that the
// union of their values replaces the data at each path (gNMI 0.10).
func (w *writeTxn) expand(i uint64, ops []*Op) (*effective, error) {
	eff := &effective{values: make(map[string]*PathValue)}
	clear := func(op *Op) error {
		if op.GetKind() == OpDelete && IsWildcard(op.GetPath()) {
			return w.deleteMatches(eff, i, op.GetPath())
		}
		if op.GetKind() != OpUpdate {
			if err := w.tombstoneSubtree(eff, i, op.GetPath(), true); err != nil {
				return err
			}
		}
		for _, p := range op.GetImpliedDeletes() {
			if err := w.tombstoneSubtree(eff, i, p, false); err != nil {
				return err
			}
		}
		return nil
	}
	write := func(op *Op) error {
		for _, u := range Units(op) {
			if err := w.writeUnit(eff, i, u); err != nil {
				return err
			}
		}
		return nil
	}
	for _, kind := range []OpKind{OpDelete, OpReplace, OpUnionReplace, OpUpdate} {
		var union []*Op
		for _, op := range ops {
			if op.GetKind() != kind {
				continue
			}
			if kind == OpUnionReplace {
				union = append(union, op)
				if err := clear(op); err != nil {
					return nil, err
				}
				continue
			}
			if err := clear(op); err != nil {
				return nil, err
			}
			if err := write(op); err != nil {
				return nil, err
			}
		}
		for _, op := range union {
			if err := write(op); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(eff.keys)
	return eff, nil
}

// writeUnit adds unit u of proposal i to eff. A marker ({} at a list entry
// or container) records that the node exists: it is written only if
// nothing is stored at or under its path, so that it stands for the node's
// creation, which a rollback undoes by deleting the node; where the node
// already holds values, it exists already and the marker is left out.
// Values this proposal wrote count as stored only if they were stored
// before: a rollback deletes the node and then writes back what was.
func (w *writeTxn) writeUnit(eff *effective, i uint64, u *Leaf) error {
	key := PathKey(u.GetPath())
	if leaves.IsMarker(u.GetValue()) {
		if pv, ok := eff.values[string(key)]; ok && !pv.GetDeleted() {
			return nil // written by an earlier unit of this proposal
		}
		stored, err := w.storedAtOrUnder(eff, u.GetPath())
		if err != nil || stored {
			return err
		}
	}
	eff.put(key, &PathValue{Path: u.GetPath(), Index: i, Value: u.GetValue()})
	return nil
}

// storedAtOrUnder reports whether the committed values hold a value (not a
// tombstone) at or under p that eff does not tombstone.
func (w *writeTxn) storedAtOrUnder(eff *effective, p *gnmi.Path) (bool, error) {
	sub := subtreeOf(p)
	live := func(key []byte, tombstone bool) bool {
		if e, ok := eff.values[string(key)]; ok && e.GetDeleted() {
			return false
		}
		return !tombstone
	}
	stored, tombstone, err := w.valueState(nsCommitted, sub.key)
	if err != nil {
		return false, err
	}
	if stored && live(sub.key, tombstone) {
		return true, nil
	}
	for _, prefix := range sub.prefixes {
		err := iteratePrefix(w.txn, valueKey(nsCommitted, prefix), func(key, val []byte) error {
			pv := &PathValue{}
			if err := decodeRecord(val, pv); err != nil {
				return fmt.Errorf("decode %q: %w", key, err)
			}
			if live(key[len(nsCommitted):], pv.GetDeleted()) {
				return errFound
			}
			return nil
		})
		if errors.Is(err, errFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// errFound ends a scan that found what it looked for.
var errFound = errors.New("found")

// tombstoneSubtree deletes every value stored at or under p, both committed
// ones and ones written earlier by the same proposal. With atPath, p itself
// gets a tombstone even if nothing is stored there (a Set's delete or
// replace: the device may hold data there the journal does not know). It
// costs O(subtree).
func (w *writeTxn) tombstoneSubtree(eff *effective, i uint64, p *gnmi.Path, atPath bool) error {
	sub := subtreeOf(p)
	if atPath {
		eff.put(sub.key, &PathValue{Path: p, Index: i, Deleted: true})
	} else if pv, err := w.value(nsCommitted, sub.key); err != nil {
		return err
	} else if pv != nil && !pv.GetDeleted() {
		eff.put(sub.key, &PathValue{Path: pv.GetPath(), Index: i, Deleted: true})
	}
	for _, prefix := range sub.prefixes {
		err := iteratePrefix(w.txn, valueKey(nsCommitted, prefix), func(key, val []byte) error {
			pv := &PathValue{}
			if err := decodeRecord(val, pv); err != nil {
				return fmt.Errorf("decode %q: %w", key, err)
			}
			if !pv.GetDeleted() {
				eff.put(key[len(nsCommitted):], &PathValue{Path: pv.GetPath(), Index: i, Deleted: true})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for k, pv := range eff.values {
		if !pv.GetDeleted() && sub.contains([]byte(k)) {
			eff.values[k] = &PathValue{Path: pv.GetPath(), Index: i, Deleted: true}
		}
	}
	return nil
}

// deleteMatches tombstones, as a delete of each would, every subtree the
// committed values hold (or eff wrote before) that the wildcard pattern
// names: the journal's expansion of a wildcard delete, which the device
// expands on its own data (gNMI 3.4.6).
func (w *writeTxn) deleteMatches(eff *effective, i uint64, pattern *gnmi.Path) error {
	elems := pattern.GetElem()
	// Elements before the first wildcard: where matches live.
	n := slices.IndexFunc(elems, wildElem)
	if n < 0 {
		n = len(elems)
	}
	under := &gnmi.Path{Origin: pattern.GetOrigin(), Elem: elems[:n]}
	matches := map[string]*gnmi.Path{}
	note := func(p *gnmi.Path) {
		if len(p.GetElem()) < len(elems) || !gnmipath.SameOrigin(p, pattern) {
			return
		}
		m := &gnmi.Path{Origin: p.GetOrigin(), Elem: p.GetElem()[:len(elems)]}
		if gnmipath.MatchesOrUnder(elems, m.GetElem()) {
			matches[string(PathKey(m))] = m
		}
	}
	err := scanValues(context.Background(), w.txn, nsCommitted, under, func(_, val []byte) error {
		pv := &PathValue{}
		if err := decodeRecord(val, pv); err != nil {
			return err
		}
		if !pv.GetDeleted() {
			note(pv.GetPath())
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, pv := range eff.values {
		if !pv.GetDeleted() {
			note(pv.GetPath())
		}
	}
	for _, k := range slices.Sorted(maps.Keys(matches)) {
		if err := w.tombstoneSubtree(eff, i, matches[k], true); err != nil {
			return err
		}
	}
	return nil
}

// iteratePrefix calls fn for every key with the prefix, in key order. key is
// a copy; val is valid only during the call.
func iteratePrefix(txn *badger.Txn, prefix []byte, fn func(key, val []byte) error) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		key := item.KeyCopy(nil)
		if err := readValue(item, func(val []byte) error { return fn(key, val) }); err != nil {
			return err
		}
	}
	return nil
}
