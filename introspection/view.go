package introspection

// A view reads the parts of the introspection tree some patterns select,
// renders them, and keeps the matched leaves, so that the next refresh
// yields only what changed, reading only what may have changed.

import (
	"context"
	"errors"
	"maps"
	"slices"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// journalReader is what the introspection reads of a *journal.Journal.
type journalReader interface {
	Configuration(ctx context.Context) (*journal.Configuration, error)
	Proposal(ctx context.Context, i uint64) (*journal.Proposal, error)
	Proposals(ctx context.Context, from, to uint64, fn func(*journal.Proposal) error) error
	CommitConfirm(ctx context.Context) (*journal.CommitConfirm, error)
	OutOfSync(ctx context.Context) ([]*journal.OutOfSync, error)
	Resolutions(ctx context.Context, n int) ([]*journal.Resolution, error)
	Tags(ctx context.Context) ([]*journal.Tag, error)
	TagDeletions(ctx context.Context) ([]*journal.TagDeletion, error)
	TagRestorable(ctx context.Context, t *journal.Tag) (bool, error)
}

// treeSource is where the tree's values come from.
type treeSource struct {
	journal journalReader
	status  func() agent.Status
	address string      // the device's
	drift   DriftSource // nil: no drift and diff subtrees
}

// treeDelta is what changed between two refreshes of a view.
type treeDelta struct {
	updates []treeLeaf        // new or changed leaves
	deletes [][]*gpb.PathElem // leaves that are gone
}

// diff adds to d the difference from the leaves old to the leaves new.
func (d *treeDelta) diff(old, new []treeLeaf) {
	if len(old) == 0 {
		d.updates = append(d.updates, new...)
		return
	}
	before := make(map[string]*gpb.TypedValue, len(old))
	for _, l := range old {
		before[l.key] = l.val
	}
	for _, l := range new {
		if v, ok := before[l.key]; !ok || !proto.Equal(v, l.val) {
			d.updates = append(d.updates, l)
		}
		delete(before, l.key)
	}
	for _, l := range old {
		if _, gone := before[l.key]; gone {
			d.deletes = append(d.deletes, l.path)
		}
	}
}

// proposalSummary is what a proposal's transitions change: when it is
// unchanged, so is the proposal.
type proposalSummary struct {
	phase                            journal.Phase
	commit, apply, rbCommit, rbApply journal.Status
}

func summaryOf(p *journal.Proposal) proposalSummary {
	return proposalSummary{p.GetPhase(), p.GetChange().GetCommit(), p.GetChange().GetApply(),
		p.GetRollback().GetCommit(), p.GetRollback().GetApply()}
}

// renderedProposal is a proposal as the view last rendered it.
type renderedProposal struct {
	summary proposalSummary
	leaves  []treeLeaf // those the view's patterns match
}

// treeView is the part of the tree a request's patterns select, as last
// rendered. It is not safe for concurrent use.
type treeView struct {
	src      treeSource
	patterns []treePattern
	sel      treeSelection

	refreshed bool
	conf      *journal.Configuration       // as last read
	parts     map[string][]treeLeaf        // configuration, device, commit-confirm
	proposals map[uint64]*renderedProposal // every kept proposal read (selected ones only)
	// first is the configuration's first_index at the last refresh;
	// lowUnfinished the lowest proposal that was not finished then
	// (last_index+1 if none).
	first, lowUnfinished uint64
	// missing lists the selected indexes that are not kept (last refresh);
	// reads counts the proposals the last refresh read.
	missing []uint64
	reads   int
}

func newView(src treeSource, patterns []treePattern) *treeView {
	return &treeView{
		src:       src,
		patterns:  patterns,
		sel:       selectionOf(patterns),
		parts:     map[string][]treeLeaf{},
		proposals: map[uint64]*renderedProposal{},
	}
}

// refresh reads and renders what the view selects and returns what
// changed since the last refresh (everything, the first time).
func (v *treeView) refresh(ctx context.Context) (treeDelta, error) {
	var d treeDelta
	c, err := v.src.journal.Configuration(ctx)
	if err != nil {
		return d, err
	}
	prev := v.conf
	v.conf = c
	v.missing, v.reads = nil, 0
	if v.sel.configuration {
		v.setPart(&d, Configuration, configurationLeaves(c))
	}
	if v.sel.device {
		v.setPart(&d, Device, deviceLeaves(v.src.address, v.src.status()))
	}
	if v.sel.commitConfirm {
		cc, err := v.src.journal.CommitConfirm(ctx)
		switch {
		case errors.Is(err, journal.ErrNotFound):
			cc = nil
		case err != nil:
			return d, err
		}
		v.setPart(&d, CommitConfirm, commitConfirmLeaves(cc))
	}
	if v.sel.outOfSync {
		var recs []*journal.OutOfSync
		if c.GetOutOfSync() > 0 || prev.GetOutOfSync() > 0 {
			if recs, err = v.src.journal.OutOfSync(ctx); err != nil {
				return d, err
			}
		}
		v.setPart(&d, OutOfSync, outOfSyncLeaves(recs))
	}
	if v.sel.drift && v.src.drift != nil {
		v.setPart(&d, Drift, driftLeaves(v.src.drift.Status(), v.src.drift.Records()))
	}
	if v.sel.diff && v.src.drift != nil {
		diffs, at, err := v.src.drift.Diff(ctx, nil)
		if err != nil {
			return d, err
		}
		v.setPart(&d, Diff, diffLeaves(diffs, at))
	}
	if _, seen := v.parts[Resolutions]; v.sel.resolutions && (!seen || c.GetResolutions() != prev.GetResolutions()) {
		var recs []*journal.Resolution
		if c.GetResolutions() > 0 {
			if recs, err = v.src.journal.Resolutions(ctx, 0); err != nil {
				return d, err
			}
		}
		v.setPart(&d, Resolutions, resolutionLeaves(recs))
	}
	if _, seen := v.parts[Tags]; v.sel.tags && (!seen || c.GetTagChanges() != prev.GetTagChanges() ||
		c.GetFirstIndex() != prev.GetFirstIndex()) {
		var tags []tag
		if c.GetTagChanges() > 0 {
			recs, err := v.src.journal.Tags(ctx)
			if err != nil {
				return d, err
			}
			for _, rec := range recs {
				ok, err := v.src.journal.TagRestorable(ctx, rec)
				if err != nil {
					return d, err
				}
				tags = append(tags, tag{rec: rec, restorable: ok})
			}
		}
		v.setPart(&d, Tags, tagLeaves(tags))
		var dels []*journal.TagDeletion
		if c.GetTagChanges() > 0 {
			if dels, err = v.src.journal.TagDeletions(ctx); err != nil {
				return d, err
			}
		}
		v.setPart(&d, TagDeletions, tagDeletionLeaves(dels))
	}
	switch {
	case !v.sel.proposals:
	case v.sel.indexes != nil:
		err = v.refreshIndexes(ctx, &d)
	default:
		err = v.refreshProposals(ctx, &d, prev)
	}
	v.refreshed = err == nil
	return d, err
}

// refreshIndexes re-reads the few proposals the view selects by index.
func (v *treeView) refreshIndexes(ctx context.Context, d *treeDelta) error {
	for _, i := range v.sel.indexes {
		p, err := v.src.journal.Proposal(ctx, i)
		switch {
		case errors.Is(err, journal.ErrNotFound), errors.Is(err, journal.ErrCompacted):
			v.missing = append(v.missing, i)
			p = nil
		case err != nil:
			return err
		}
		v.reads++
		v.setProposal(d, i, p)
	}
	return nil
}

// refreshProposals brings all kept proposals up to date, reading only
// those that may have changed since the last refresh (prev is the
// configuration then):
//
//   - retention dropped those below first_index;
//   - a proposal not finished then (lowUnfinished and above, which covers
//     the new ones) may have moved on;
//   - a finished proposal changes again only when it is rolled back, and
//     only the newest change in effect (committed.index, equal to
//     applied.index then) can be rolled back: so those that were, or are,
//     committed.index, applied.index or rolling_back may have changed.
//
// So re-reading from the lowest of these up to last_index costs what
// changed, not the whole journal. Several rollbacks in a row between two
// refreshes reach further down, one rollback.index at a time: the chain is
// followed from the re-read proposals whose rollback is new.
func (v *treeView) refreshProposals(ctx context.Context, d *treeDelta, prev *journal.Configuration) error {
	c := v.conf
	from := c.GetFirstIndex()
	if v.refreshed {
		for i := v.first; i < c.GetFirstIndex(); i++ {
			v.setProposal(d, i, nil)
		}
		from = max(from, v.mayHaveChanged(prev, c))
	}
	v.first = c.GetFirstIndex()
	low := c.GetLastIndex() + 1
	note := func(p *journal.Proposal) bool {
		v.reads++
		if !proposalFinished(p) {
			low = min(low, p.GetIndex())
		}
		return v.setProposal(d, p.GetIndex(), p) && p.GetPhase() == journal.PhaseRollback
	}
	var rolledBack []uint64
	if c.GetLastIndex() >= from {
		err := v.src.journal.Proposals(ctx, from, c.GetLastIndex(), func(p *journal.Proposal) error {
			if note(p) {
				rolledBack = append(rolledBack, p.GetRollback().GetIndex())
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, i := range rolledBack {
		for i != 0 && i < from && i >= c.GetFirstIndex() {
			p, err := v.src.journal.Proposal(ctx, i)
			if errors.Is(err, journal.ErrNotFound) || errors.Is(err, journal.ErrCompacted) {
				break
			}
			if err != nil {
				return err
			}
			if !note(p) {
				break
			}
			i = p.GetRollback().GetIndex()
		}
	}
	v.lowUnfinished = low
	return nil
}

// mayHaveChanged is the lowest proposal that may have changed since the
// last refresh (see refreshProposals).
func (v *treeView) mayHaveChanged(prev, c *journal.Configuration) uint64 {
	from := v.lowUnfinished
	for _, i := range []uint64{
		prev.GetCommitted().GetIndex(), prev.GetApplied().GetIndex(), prev.GetRollingBack(),
		c.GetCommitted().GetIndex(), c.GetApplied().GetIndex(), c.GetRollingBack(),
	} {
		if i != 0 {
			from = min(from, i)
		}
	}
	return from
}

// setPart replaces the leaves of one of the fixed parts of the tree.
func (v *treeView) setPart(d *treeDelta, name string, leaves []treeLeaf) {
	matched := v.filter(leaves)
	d.diff(v.parts[name], matched)
	v.parts[name] = matched
}

// setProposal replaces the leaves of proposal i (p nil: it is gone) and
// reports whether its state changed (or it is new).
func (v *treeView) setProposal(d *treeDelta, i uint64, p *journal.Proposal) bool {
	old := v.proposals[i]
	if p == nil {
		if old != nil {
			d.diff(old.leaves, nil)
			delete(v.proposals, i)
		}
		return false
	}
	r := &renderedProposal{summary: summaryOf(p), leaves: v.filter(proposalLeaves(p))}
	v.proposals[i] = r
	if old == nil {
		d.diff(nil, r.leaves)
		return true
	}
	d.diff(old.leaves, r.leaves)
	return old.summary != r.summary
}

// filter returns the leaves the view's patterns match.
func (v *treeView) filter(leaves []treeLeaf) []treeLeaf {
	out := leaves[:0]
	for _, l := range leaves {
		if matchesAnyPattern(v.patterns, l.path) {
			out = append(out, l)
		}
	}
	return slices.Clip(out)
}

// all returns every leaf of the view, in tree order.
func (v *treeView) all() []treeLeaf {
	var out []treeLeaf
	for _, name := range []string{Configuration, Device, CommitConfirm, OutOfSync, Resolutions, Tags, TagDeletions, Drift, Diff} {
		out = append(out, v.parts[name]...)
	}
	for _, i := range slices.Sorted(maps.Keys(v.proposals)) {
		out = append(out, v.proposals[i].leaves...)
	}
	return out
}
