package introspection

// The renderer of the tree (docs/introspection.md): pure functions from
// journal records and the agent's status to leaves, each state container
// rendered from a table of its leaves. No I/O here; view.go reads the
// records, introspection.go serves them.

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/value"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// treeLeaf is one leaf of the tree: its path from the root (without origin),
// its value and key, the path's string form (unique per leaf, for diffs).
type treeLeaf struct {
	path []*gpb.PathElem
	val  *gpb.TypedValue
	key  string
}

// field is one leaf of a state container: its name and its value in the
// record R the container shows (nil: the leaf is absent).
type field[R any] struct {
	name  string
	value func(R) *gpb.TypedValue
}

// renderState appends to out the leaves of fields for rec, in the state
// container under base.
func renderState[R any](out *[]treeLeaf, fields []field[R], rec R, base ...*gpb.PathElem) {
	state := gnmipath.Concat(base, []*gpb.PathElem{pathElem(State)})
	for _, f := range fields {
		v := f.value(rec)
		if v == nil {
			continue
		}
		p := gnmipath.Concat(state, []*gpb.PathElem{pathElem(f.name)})
		*out = append(*out, treeLeaf{path: p, val: v, key: gnmipath.String(&gpb.Path{Elem: p})})
	}
}

func pathElem(name string) *gpb.PathElem { return &gpb.PathElem{Name: name} }

func keyedElem(name, key, value string) *gpb.PathElem {
	return &gpb.PathElem{Name: name, Key: map[string]string{key: value}}
}

// proposalElems is the path of proposal i: proposals/proposal[index=i].
func proposalElems(i uint64) []*gpb.PathElem {
	return []*gpb.PathElem{pathElem(Proposals), keyedElem(Proposal, Index, strconv.FormatUint(i, 10))}
}

// --- values ---

// scalar is the TypedValue of a Go scalar (value.FromScalar), nil (absent)
// for what it cannot represent: a string that is not UTF-8, which a
// TypedValue could not carry either.
func scalar(v any) *gpb.TypedValue {
	tv, err := value.FromScalar(v)
	if err != nil {
		return nil
	}
	return tv
}

// nonZero is a uint leaf absent for 0.
func nonZero(n uint64) *gpb.TypedValue {
	if n == 0 {
		return nil
	}
	return scalar(n)
}

// text is a string leaf absent when empty.
func text(s string) *gpb.TypedValue {
	if s == "" {
		return nil
	}
	return scalar(s)
}

// nanos is a time in nanoseconds since the Unix epoch; absent when nil.
func nanos(t *timestamppb.Timestamp) *gpb.TypedValue {
	if t == nil {
		return nil
	}
	return scalar(t.AsTime().UnixNano())
}

// enumName is a journal enumeration without its type prefix
// (STATUS_COMPLETE → COMPLETE); absent for the UNSET value 0.
func enumName(n int32, name, prefix string) *gpb.TypedValue {
	if n == 0 {
		return nil
	}
	return text(strings.TrimPrefix(name, prefix))
}

func statusName(s journal.Status) *gpb.TypedValue {
	return enumName(int32(s), s.String(), "STATUS_")
}

func phaseName(p journal.Phase) *gpb.TypedValue {
	return enumName(int32(p), p.String(), "PHASE_")
}

func opKindName(k journal.OpKind) *gpb.TypedValue {
	return enumName(int32(k), k.String(), "OP_KIND_")
}

// causeName is an out-of-sync cause as the tree shows it: ROLLBACK,
// REPUSH, RETRY, RESTORE, DRIFT or CHANGE.
func causeName(c journal.OutOfSyncCause) string {
	return strings.TrimPrefix(c.String(), "OUT_OF_SYNC_CAUSE_")
}

// codeName is the upper-case name of a gRPC code: codes.InvalidArgument →
// INVALID_ARGUMENT.
func codeName(c codes.Code) string {
	var b strings.Builder
	prev := ' '
	for _, r := range c.String() {
		if unicode.IsUpper(r) && unicode.IsLower(prev) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
		prev = r
	}
	return b.String()
}

// pathText is a path leaf.
func pathText(p *gpb.Path) *gpb.TypedValue { return text(gnmipath.String(p)) }

// pathList is a leaf-list of path strings (absent when empty).
func pathList(paths []*gpb.Path) *gpb.TypedValue {
	if len(paths) == 0 {
		return nil
	}
	s := make([]string, len(paths))
	for n, p := range paths {
		s[n] = gnmipath.String(p)
	}
	return scalar(s)
}

// liveValue is a PathValue's value, absent for a tombstone.
func liveValue(pv *journal.PathValue) *gpb.TypedValue {
	if pv.GetDeleted() {
		return nil
	}
	return pv.GetValue()
}

// opValue is the value an operation carried at its own path, as the client
// sent it (absent for a delete).
func opValue(op *journal.Op) *gpb.TypedValue {
	key := string(journal.PathKey(op.GetPath()))
	for _, v := range op.GetValues() {
		if string(journal.PathKey(v.GetPath())) == key {
			return v.GetValue()
		}
	}
	return nil
}

// --- the tables: the leaves of each state container, in tree order ---

func configurationFields() []field[*journal.Configuration] {
	type c = *journal.Configuration
	return []field[c]{
		{CommittedIndex, func(c c) *gpb.TypedValue { return scalar(c.GetCommitted().GetIndex()) }},
		{CommittedProposal, func(c c) *gpb.TypedValue { return scalar(c.GetCommitted().GetProposal()) }},
		{AppliedIndex, func(c c) *gpb.TypedValue { return scalar(c.GetApplied().GetIndex()) }},
		{AppliedProposal, func(c c) *gpb.TypedValue { return scalar(c.GetApplied().GetProposal()) }},
		{AppliedTerm, func(c c) *gpb.TypedValue { return scalar(c.GetApplied().GetTerm()) }},
		{AppliedTarget, func(c c) *gpb.TypedValue { return scalar(c.GetApplied().GetTarget()) }},
		{Status, func(c c) *gpb.TypedValue { return statusName(c.GetStatus()) }},
		{FirstIndex, func(c c) *gpb.TypedValue { return scalar(c.GetFirstIndex()) }},
		{LastIndex, func(c c) *gpb.TypedValue { return scalar(c.GetLastIndex()) }},
		{RollingBack, func(c c) *gpb.TypedValue { return nonZero(c.GetRollingBack()) }},
		{HistoryFloor, func(c c) *gpb.TypedValue { return nanos(c.GetHistoryFloor()) }},
		{OutOfSync, func(c c) *gpb.TypedValue { return scalar(c.GetOutOfSync()) }},
		{Resolutions, func(c c) *gpb.TypedValue { return scalar(c.GetResolutions()) }},
		{BaselineIndex, func(c c) *gpb.TypedValue { return nonZero(c.GetBaselineIndex()) }},
	}
}

// device is what device/state shows: the device's address and the
// agent's view of it.
type device struct {
	address string
	status  agent.Status
}

func deviceFields() []field[device] {
	// repush is a leaf of the last re-push, absent before the first.
	repush := func(v func(agent.Status) *gpb.TypedValue) func(device) *gpb.TypedValue {
		return func(d device) *gpb.TypedValue {
			if d.status.LastRepush.IsZero() {
				return nil
			}
			return v(d.status)
		}
	}
	// retrying is a leaf of the change being sent again, absent if none.
	retrying := func(v func(*agent.Retrying) *gpb.TypedValue) func(device) *gpb.TypedValue {
		return func(d device) *gpb.TypedValue {
			if d.status.Retrying == nil {
				return nil
			}
			return v(d.status.Retrying)
		}
	}
	return []field[device]{
		{Address, func(d device) *gpb.TypedValue { return text(d.address) }},
		{Connected, func(d device) *gpb.TypedValue { return scalar(d.status.Connected) }},
		{Term, func(d device) *gpb.TypedValue {
			if !d.status.Connected {
				return nil
			}
			return nonZero(d.status.Term)
		}},
		{Repushing, func(d device) *gpb.TypedValue { return scalar(d.status.Repushing) }},
		{LastRepushTime, repush(func(s agent.Status) *gpb.TypedValue { return scalar(s.LastRepush.UnixNano()) })},
		{LastRepushValues, repush(func(s agent.Status) *gpb.TypedValue { return scalar(uint64(s.LastRepushValues)) })},
		{LastRepushDuration, repush(func(s agent.Status) *gpb.TypedValue { return durationNanos(s.LastRepushDuration) })},
		{LastRepushDeviceDuration, repush(func(s agent.Status) *gpb.TypedValue { return durationNanos(s.LastRepushDeviceDuration) })},
		{LastError, func(d device) *gpb.TypedValue { return text(d.status.LastError) }},
		{Fenced, func(d device) *gpb.TypedValue { return scalar(d.status.Fenced) }},
		{FencedBy, func(d device) *gpb.TypedValue { return text(d.status.FencedBy) }},
		{Retrying, retrying(func(r *agent.Retrying) *gpb.TypedValue { return scalar(r.Proposal) })},
		{RetryingAttempts, retrying(func(r *agent.Retrying) *gpb.TypedValue { return scalar(uint64(r.Attempts)) })},
		{RetryingSince, retrying(func(r *agent.Retrying) *gpb.TypedValue { return scalar(r.Since.UnixNano()) })},
	}
}

// durationNanos is a duration in nanoseconds.
func durationNanos(d time.Duration) *gpb.TypedValue { return scalar(int64(d)) }

func commitConfirmFields() []field[*journal.CommitConfirm] {
	type cc = *journal.CommitConfirm
	return []field[cc]{
		{ID, func(cc cc) *gpb.TypedValue { return text(cc.GetId()) }},
		{Proposal, func(cc cc) *gpb.TypedValue { return scalar(cc.GetProposal()) }},
		{Started, func(cc cc) *gpb.TypedValue { return nanos(cc.GetStarted()) }},
		{Deadline, func(cc cc) *gpb.TypedValue { return nanos(cc.GetDeadline()) }},
		{Cancelled, func(cc cc) *gpb.TypedValue { return scalar(cc.GetCancelled()) }},
		{Author, func(cc cc) *gpb.TypedValue { return text(cc.GetAuthor()) }},
		{CancelledBy, func(cc cc) *gpb.TypedValue { return text(cc.GetCancelledBy()) }},
		{ExtendedBy, func(cc cc) *gpb.TypedValue { return text(cc.GetExtendedBy()) }},
		{Extended, func(cc cc) *gpb.TypedValue { return nanos(cc.GetExtended()) }},
	}
}

func outOfSyncFields() []field[*journal.OutOfSync] {
	type r = *journal.OutOfSync
	return []field[r]{
		{Path, func(r r) *gpb.TypedValue { return pathText(r.GetValue().GetPath()) }},
		{Deleted, func(r r) *gpb.TypedValue { return scalar(r.GetValue().GetDeleted()) }},
		{Value, func(r r) *gpb.TypedValue { return liveValue(r.GetValue()) }},
		{Cause, func(r r) *gpb.TypedValue { return text(causeName(r.GetCause())) }},
		{Proposal, func(r r) *gpb.TypedValue { return nonZero(r.GetProposal()) }},
		{ErrorCode, func(r r) *gpb.TypedValue { return errorCode(r.GetError(), true) }},
		{ErrorMessage, func(r r) *gpb.TypedValue { return errorMessage(r.GetError()) }},
		{Since, func(r r) *gpb.TypedValue { return nanos(r.GetSince()) }},
	}
}

// errorCode is the code of a recorded error, absent without one; withOK
// says whether code 0 shows as OK or is absent too.
func errorCode(e *journalpb.Error, withOK bool) *gpb.TypedValue {
	if e == nil || (e.GetCode() == 0 && !withOK) {
		return nil
	}
	return text(codeName(codes.Code(e.GetCode())))
}

// errorMessage is the message of a recorded error, absent without one.
func errorMessage(e *journalpb.Error) *gpb.TypedValue {
	if e == nil {
		return nil
	}
	return text(e.GetMessage())
}

func resolutionFields() []field[*journal.Resolution] {
	type r = *journal.Resolution
	return []field[r]{
		{Seq, func(r r) *gpb.TypedValue { return scalar(r.GetSeq()) }},
		{Time, func(r r) *gpb.TypedValue { return nanos(r.GetTime()) }},
		{Author, func(r r) *gpb.TypedValue { return text(r.GetAuthor()) }},
		{Action, func(r r) *gpb.TypedValue { return text(r.GetAction()) }},
		{Settled, func(r r) *gpb.TypedValue { return pathList(r.GetSettled()) }},
		{StillOutOfSync, func(r r) *gpb.TypedValue { return pathList(r.GetStillOutOfSync()) }},
		{Proposal, func(r r) *gpb.TypedValue { return nonZero(r.GetProposal()) }},
	}
}

// proposalFields are a proposal's state leaves; the rollback leaves only
// once a rollback was proposed.
func proposalFields() []field[*journal.Proposal] {
	type p = *journal.Proposal
	change := func(v func(*journal.Change) *gpb.TypedValue) func(p) *gpb.TypedValue {
		return func(p p) *gpb.TypedValue { return v(p.GetChange()) }
	}
	rollback := func(v func(*journal.Rollback) *gpb.TypedValue) func(p) *gpb.TypedValue {
		return func(p p) *gpb.TypedValue {
			if p.GetPhase() != journal.PhaseRollback {
				return nil
			}
			return v(p.GetRollback())
		}
	}
	return []field[p]{
		{Index, func(p p) *gpb.TypedValue { return scalar(p.GetIndex()) }},
		{Phase, func(p p) *gpb.TypedValue { return phaseName(p.GetPhase()) }},
		{CommitStatus, change(func(ch *journal.Change) *gpb.TypedValue { return statusName(ch.GetCommit()) })},
		{ApplyStatus, change(func(ch *journal.Change) *gpb.TypedValue { return statusName(ch.GetApply()) })},
		{Proposed, change(func(ch *journal.Change) *gpb.TypedValue { return nanos(ch.GetProposed()) })},
		{Committed, change(func(ch *journal.Change) *gpb.TypedValue { return nanos(ch.GetCommitted()) })},
		{ApplyStarted, change(func(ch *journal.Change) *gpb.TypedValue { return nanos(ch.GetApplyStarted()) })},
		{Applied, change(func(ch *journal.Change) *gpb.TypedValue { return nanos(ch.GetApplied()) })},
		{ErrorCode, change(func(ch *journal.Change) *gpb.TypedValue { return errorCode(ch.GetError(), false) })},
		{ErrorMessage, change(func(ch *journal.Change) *gpb.TypedValue { return errorMessage(ch.GetError()) })},
		{Operations, change(func(ch *journal.Change) *gpb.TypedValue { return scalar(uint64(len(ch.GetOps()))) })},
		{Author, change(func(ch *journal.Change) *gpb.TypedValue { return text(ch.GetAuthor()) })},
		{Comment, change(func(ch *journal.Change) *gpb.TypedValue { return text(ch.GetComment()) })},
		{Target, change(func(ch *journal.Change) *gpb.TypedValue { return text(ch.GetPrefix().GetTarget()) })},
		{RestoresIndex, change(func(ch *journal.Change) *gpb.TypedValue {
			if ch.GetRestores() == nil {
				return nil
			}
			return scalar(ch.GetRestores().GetIndex())
		})},
		{RestoresTag, change(func(ch *journal.Change) *gpb.TypedValue { return text(ch.GetRestores().GetTag()) })},
		{Adopted, change(func(ch *journal.Change) *gpb.TypedValue {
			if !ch.GetAdopted() {
				return nil
			}
			return scalar(true)
		})},
		{RollbackIndex, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return scalar(rb.GetIndex()) })},
		{RollbackCommitStatus, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return statusName(rb.GetCommit()) })},
		{RollbackApplyStatus, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return statusName(rb.GetApply()) })},
		{RollbackProposed, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return nanos(rb.GetProposed()) })},
		{RollbackCommitted, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return nanos(rb.GetCommitted()) })},
		{RollbackApplyStarted, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return nanos(rb.GetApplyStarted()) })},
		{RollbackErrorCode, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return errorCode(rb.GetError(), true) })},
		{RollbackErrorMessage, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return errorMessage(rb.GetError()) })},
		{RollbackApplied, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return nanos(rb.GetApplied()) })},
		{RollbackAuthor, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return text(rb.GetAuthor()) })},
		{RollbackComment, rollback(func(rb *journal.Rollback) *gpb.TypedValue { return text(rb.GetComment()) })},
		{CommitConfirmedBy, commitAction(journal.CommitActionConfirm, func(a *journal.CommitAction) *gpb.TypedValue { return text(a.GetAuthor()) })},
		{CommitConfirmedAt, commitAction(journal.CommitActionConfirm, func(a *journal.CommitAction) *gpb.TypedValue { return nanos(a.GetTime()) })},
		{CommitCancelledBy, commitAction(journal.CommitActionCancel, func(a *journal.CommitAction) *gpb.TypedValue { return text(a.GetAuthor()) })},
		{CommitCancelledAt, commitAction(journal.CommitActionCancel, func(a *journal.CommitAction) *gpb.TypedValue { return nanos(a.GetTime()) })},
		{CommitExtendedBy, commitAction(journal.CommitActionExtend, func(a *journal.CommitAction) *gpb.TypedValue { return text(a.GetAuthor()) })},
		{CommitExtendedAt, commitAction(journal.CommitActionExtend, func(a *journal.CommitAction) *gpb.TypedValue { return nanos(a.GetTime()) })},
	}
}

// commitAction is a leaf of the newest commit-confirmed action named
// action on a proposal (absent without one).
func commitAction(action string, v func(*journal.CommitAction) *gpb.TypedValue) func(*journal.Proposal) *gpb.TypedValue {
	return func(p *journal.Proposal) *gpb.TypedValue {
		a := journal.LastCommitAction(p, action)
		if a == nil {
			return nil
		}
		return v(a)
	}
}

// tag is what tags/tag[name=N]/state shows: a tag, and whether the journal
// still keeps the history a rollback to it needs.
type tag struct {
	rec        *journal.Tag
	restorable bool
}

func tagFields() []field[tag] {
	return []field[tag]{
		{Name, func(t tag) *gpb.TypedValue { return text(t.rec.GetName()) }},
		{Index, func(t tag) *gpb.TypedValue { return scalar(t.rec.GetIndex()) }},
		{Time, func(t tag) *gpb.TypedValue { return nanos(t.rec.GetTime()) }},
		{Created, func(t tag) *gpb.TypedValue { return nanos(t.rec.GetCreated()) }},
		{Author, func(t tag) *gpb.TypedValue { return text(t.rec.GetAuthor()) }},
		{Comment, func(t tag) *gpb.TypedValue { return text(t.rec.GetComment()) }},
		{Restorable, func(t tag) *gpb.TypedValue { return scalar(t.restorable) }},
	}
}

func operationFields() []field[*journal.Op] {
	type op = *journal.Op
	return []field[op]{
		{Kind, func(op op) *gpb.TypedValue { return opKindName(op.GetKind()) }},
		{Path, func(op op) *gpb.TypedValue { return pathText(op.GetPath()) }},
		{Value, opValue},
	}
}

// change is one value a proposal's change writes, and the value it
// replaced (nil if the rollback records none).
type change struct {
	value, previous *journal.PathValue
}

func changeFields() []field[change] {
	// previous is a leaf of the replaced value, absent without one.
	previous := func(v func(*journal.PathValue) *gpb.TypedValue) func(change) *gpb.TypedValue {
		return func(c change) *gpb.TypedValue {
			if c.previous == nil {
				return nil
			}
			return v(c.previous)
		}
	}
	return []field[change]{
		{Path, func(c change) *gpb.TypedValue { return pathText(c.value.GetPath()) }},
		{Deleted, func(c change) *gpb.TypedValue { return scalar(c.value.GetDeleted()) }},
		{Value, func(c change) *gpb.TypedValue { return liveValue(c.value) }},
		{PreviousIndex, previous(func(pv *journal.PathValue) *gpb.TypedValue { return scalar(pv.GetIndex()) })},
		{PreviousDeleted, previous(func(pv *journal.PathValue) *gpb.TypedValue { return scalar(pv.GetDeleted() || pv.GetValue() == nil) })},
		{PreviousValue, previous(liveValue)},
	}
}

// --- the tree ---

// configurationLeaves renders configuration/state.
func configurationLeaves(c *journal.Configuration) []treeLeaf {
	var out []treeLeaf
	renderState(&out, configurationFields(), c, pathElem(Configuration))
	return out
}

// deviceLeaves renders device/state: the device's address and the agent's
// view of it.
func deviceLeaves(address string, st agent.Status) []treeLeaf {
	var out []treeLeaf
	renderState(&out, deviceFields(), device{address: address, status: st}, pathElem(Device))
	return out
}

// commitConfirmLeaves renders commit-confirm/state: nothing when no
// commit-confirmed is outstanding (cc nil).
func commitConfirmLeaves(cc *journal.CommitConfirm) []treeLeaf {
	if cc == nil {
		return nil
	}
	var out []treeLeaf
	renderState(&out, commitConfirmFields(), cc, pathElem(CommitConfirm))
	return out
}

// outOfSyncLeaves renders out-of-sync/path[path=P]: one entry per path
// where the device may not hold the applied value.
func outOfSyncLeaves(recs []*journal.OutOfSync) []treeLeaf {
	var out []treeLeaf
	fields := outOfSyncFields()
	for _, rec := range recs {
		renderState(&out, fields, rec, pathElem(OutOfSync), keyedElem(Path, Path, gnmipath.String(rec.GetValue().GetPath())))
	}
	return out
}

// resolutionLeaves renders resolutions/resolution[seq=N]: the operators'
// resolves of out-of-sync paths the journal keeps.
func resolutionLeaves(recs []*journal.Resolution) []treeLeaf {
	var out []treeLeaf
	fields := resolutionFields()
	for _, r := range recs {
		renderState(&out, fields, r, pathElem(Resolutions), keyedElem(Resolution, Seq, strconv.FormatUint(r.GetSeq(), 10)))
	}
	return out
}

// tagDeletionLeaves renders tag-deletions/tag-deletion[seq=N]: the deleted
// tags the journal keeps, and who deleted them.
func tagDeletionLeaves(recs []*journal.TagDeletion) []treeLeaf {
	var out []treeLeaf
	fields := tagDeletionFields()
	for _, r := range recs {
		renderState(&out, fields, r, pathElem(TagDeletions), keyedElem(TagDeletion, Seq, strconv.FormatUint(r.GetSeq(), 10)))
	}
	return out
}

func tagDeletionFields() []field[*journal.TagDeletion] {
	type r = *journal.TagDeletion
	return []field[r]{
		{Seq, func(r r) *gpb.TypedValue { return scalar(r.GetSeq()) }},
		{Name, func(r r) *gpb.TypedValue { return text(r.GetTag().GetName()) }},
		{Index, func(r r) *gpb.TypedValue { return scalar(r.GetTag().GetIndex()) }},
		{Deleted, func(r r) *gpb.TypedValue { return nanos(r.GetDeleted()) }},
		{Author, func(r r) *gpb.TypedValue { return text(r.GetAuthor()) }},
		{Comment, func(r r) *gpb.TypedValue { return text(r.GetComment()) }},
	}
}

// tagLeaves renders tags/tag[name=N]: the named points of the journal.
func tagLeaves(tags []tag) []treeLeaf {
	var out []treeLeaf
	fields := tagFields()
	for _, t := range tags {
		renderState(&out, fields, t, pathElem(Tags), keyedElem(Tag, Name, t.rec.GetName()))
	}
	return out
}

// proposalLeaves renders proposals/proposal[index=N]: its state, its
// operations and, once committed, its changes.
func proposalLeaves(p *journal.Proposal) []treeLeaf {
	var out []treeLeaf
	base := proposalElems(p.GetIndex())
	renderState(&out, proposalFields(), p, base...)
	ops := operationFields()
	for n, op := range p.GetChange().GetOps() {
		renderState(&out, ops, op, append(base[:len(base):len(base)], pathElem(Operations), keyedElem(Operation, Seq, strconv.Itoa(n+1)))...)
	}
	previous := make(map[string]*journal.PathValue, len(p.GetRollback().GetValues()))
	for _, pv := range p.GetRollback().GetValues() {
		previous[string(journal.PathKey(pv.GetPath()))] = pv
	}
	changes := changeFields()
	for _, pv := range p.GetChange().GetValues() {
		c := change{value: pv, previous: previous[string(journal.PathKey(pv.GetPath()))]}
		renderState(&out, changes, c, append(base[:len(base):len(base)], pathElem(Changes), keyedElem(Change, Path, gnmipath.String(pv.GetPath())))...)
	}
	return out
}

// proposalFinished reports whether a proposal can no longer change except by a
// rollback proposed later: its commit and apply are finished and so is
// any rollback under way.
func proposalFinished(p *journal.Proposal) bool {
	ch := p.GetChange()
	if !journal.Finished(ch.GetCommit()) || !journal.Finished(ch.GetApply()) {
		return false
	}
	rb := p.GetRollback()
	return p.GetPhase() != journal.PhaseRollback ||
		(journal.Finished(rb.GetCommit()) && journal.Finished(rb.GetApply()))
}

// --- drift (docs/drift.md) ---

// driftState is what drift/state shows: the watcher's status.
type driftState = drift.Status

func driftFields() []field[driftState] {
	type s = driftState
	return []field[s]{
		{Policy, func(s s) *gpb.TypedValue { return text(string(s.Policy)) }},
		{Mode, func(s s) *gpb.TypedValue { return text(string(s.Mode)) }},
		{Interval, func(s s) *gpb.TypedValue { return durationNanos(s.Interval) }},
		{Paths, func(s s) *gpb.TypedValue { return scalar(uint64(s.Paths)) }},
		{LastCheck, func(s s) *gpb.TypedValue { return timeNanos(s.LastCheck) }},
		{WatchError, func(s s) *gpb.TypedValue { return text(s.WatchError) }},
		{ReadMethod, func(s s) *gpb.TypedValue { return text(s.ReadMethod) }},
		{Readable, func(s s) *gpb.TypedValue {
			if !s.ReadChecked {
				return nil
			}
			return scalar(s.Readable)
		}},
		{ReadError, func(s s) *gpb.TypedValue { return text(s.ReadError) }},
		{Checks, func(s s) *gpb.TypedValue { return scalar(s.Checks) }},
		{Detected, func(s s) *gpb.TypedValue { return scalar(s.Detected) }},
		{Reverts, func(s s) *gpb.TypedValue { return scalar(s.Reverts) }},
		{Adoptions, func(s s) *gpb.TypedValue { return scalar(s.Adoptions) }},
	}
}

// diffPathFields are the leaves of one difference between the device and
// the journal, in drift/path and diff/path.
func diffPathFields() []field[drift.Diff] {
	type d = drift.Diff
	return []field[d]{
		{Path, func(d d) *gpb.TypedValue { return pathText(d.Path) }},
		{Kind, func(d d) *gpb.TypedValue { return text(strings.ToUpper(d.Kind.String())) }},
		{JournalValue, func(d d) *gpb.TypedValue { return d.Journal }},
		{JournalDeleted, func(d d) *gpb.TypedValue { return scalar(d.Journal == nil) }},
		{DeviceValue, func(d d) *gpb.TypedValue { return d.Device }},
		{DeviceAbsent, func(d d) *gpb.TypedValue { return scalar(d.Device == nil) }},
		{Proposal, func(d d) *gpb.TypedValue { return nonZero(d.Index) }},
	}
}

// driftPathFields are the leaves of a drifted path the watcher keeps:
// the difference, since when, and its reverts.
func driftPathFields() []field[drift.Record] {
	type r = drift.Record
	var out []field[r]
	for _, f := range diffPathFields() {
		out = append(out, field[r]{f.name, func(r r) *gpb.TypedValue { return f.value(r.Diff) }})
	}
	return append(out,
		field[r]{Since, func(r r) *gpb.TypedValue { return timeNanos(r.Since) }},
		field[r]{Reverts, func(r r) *gpb.TypedValue { return scalar(uint64(r.Reverts)) }},
		field[r]{Capped, func(r r) *gpb.TypedValue {
			if !r.Capped {
				return nil
			}
			return scalar(true)
		}},
	)
}

// diffSummary is what diff/state shows: a fresh comparison's time and the
// number of differences.
type diffSummary struct {
	time  time.Time
	paths int
}

func diffFields() []field[diffSummary] {
	type s = diffSummary
	return []field[s]{
		{Time, func(s s) *gpb.TypedValue { return timeNanos(s.time) }},
		{Paths, func(s s) *gpb.TypedValue { return scalar(uint64(s.paths)) }},
	}
}

// timeNanos is a time in nanoseconds since the Unix epoch; absent when
// zero.
func timeNanos(t time.Time) *gpb.TypedValue {
	if t.IsZero() {
		return nil
	}
	return scalar(t.UnixNano())
}

// driftLeaves renders drift/state and drift/path[path=P]: the watcher's
// status and the paths it found drifted.
func driftLeaves(st drift.Status, recs []drift.Record) []treeLeaf {
	var out []treeLeaf
	renderState(&out, driftFields(), st, pathElem(Drift))
	fields := driftPathFields()
	for _, r := range recs {
		renderState(&out, fields, r, pathElem(Drift), keyedElem(Path, Path, gnmipath.String(r.Path)))
	}
	return out
}

// diffLeaves renders diff/state and diff/path[path=P]: a fresh comparison
// of the device with the journal, made at t.
func diffLeaves(diffs []drift.Diff, t time.Time) []treeLeaf {
	var out []treeLeaf
	renderState(&out, diffFields(), diffSummary{time: t, paths: len(diffs)}, pathElem(Diff))
	fields := diffPathFields()
	for _, d := range diffs {
		renderState(&out, fields, d, pathElem(Diff), keyedElem(Path, Path, gnmipath.String(d.Path)))
	}
	return out
}
