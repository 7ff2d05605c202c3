package proxy

// The renderer of the introspection tree (docs/introspection.md): pure
// functions from journal records and the agent's status to leaves. No I/O
// here; introspect_view.go reads the records, introspect.go serves them.

import (
	"slices"
	"strconv"
	"strings"
	"unicode"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// Top-level elements of the tree.
const (
	elemConfiguration = "configuration"
	elemDevice        = "device"
	elemCommitConfirm = "commit-confirm"
	elemOutOfSync     = "out-of-sync"
	elemResolutions   = "resolutions"
	elemProposals     = "proposals"
)

// treeLeaf is one leaf of the tree: its path from the root (without origin),
// its value and key, the path's string form (unique per leaf, for diffs).
type treeLeaf struct {
	path []*gpb.PathElem
	val  *gpb.TypedValue
	key  string
}

// leafBuilder collects the leaves of one container.
type leafBuilder struct {
	base []*gpb.PathElem
	out  *[]treeLeaf
}

// underElems returns a leafBuilder for the container at base/elems.
func underElems(out *[]treeLeaf, base []*gpb.PathElem, elems ...*gpb.PathElem) leafBuilder {
	return leafBuilder{base: concatElems(base, elems), out: out}
}

// add adds leaf name with value v; a nil v (no value) adds nothing.
func (b leafBuilder) add(name string, v *gpb.TypedValue) {
	if v == nil {
		return
	}
	p := concatElems(b.base, []*gpb.PathElem{{Name: name}})
	*b.out = append(*b.out, treeLeaf{path: p, val: v, key: elemsString(p)})
}

// concatElems returns a new slice holding a then b (never sharing a's array, so
// sibling paths cannot overwrite each other).
func concatElems(a, b []*gpb.PathElem) []*gpb.PathElem {
	out := make([]*gpb.PathElem, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

func pathElem(name string) *gpb.PathElem { return &gpb.PathElem{Name: name} }

func keyedElem(name, key, value string) *gpb.PathElem {
	return &gpb.PathElem{Name: name, Key: map[string]string{key: value}}
}

// proposalElems is the path of proposal i: proposals/proposal[index=i].
func proposalElems(i uint64) []*gpb.PathElem {
	return []*gpb.PathElem{pathElem(elemProposals), keyedElem("proposal", "index", strconv.FormatUint(i, 10))}
}

// elemsString renders elems as a gNMI path string, keys sorted by name,
// `\` and `]` in key values escaped (so that the string is unique per path).
func elemsString(elems []*gpb.PathElem) string {
	var b strings.Builder
	for _, e := range elems {
		b.WriteByte('/')
		b.WriteString(e.GetName())
		keys := make([]string, 0, len(e.GetKey()))
		for k := range e.GetKey() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteByte('[')
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(escapeKey(e.GetKey()[k]))
			b.WriteByte(']')
		}
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// escapeKey escapes `\` and `]` in a key value.
func escapeKey(v string) string {
	if !strings.ContainsAny(v, `\]`) {
		return v
	}
	return strings.NewReplacer(`\`, `\\`, `]`, `\]`).Replace(v)
}

// --- values ---

func tvUint(n uint64) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: n}}
}

// tvNonZero is tvUint(n), or nil (absent) for 0.
func tvNonZero(n uint64) *gpb.TypedValue {
	if n == 0 {
		return nil
	}
	return tvUint(n)
}

func tvInt(n int64) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_IntVal{IntVal: n}}
}

func tvBool(b bool) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: b}}
}

// tvString is a string leaf; the empty string is absent.
func tvString(s string) *gpb.TypedValue {
	if s == "" {
		return nil
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

// tvTime is a time in nanoseconds since the Unix epoch; absent when nil.
func tvTime(t *timestamppb.Timestamp) *gpb.TypedValue {
	if t == nil {
		return nil
	}
	return tvInt(t.AsTime().UnixNano())
}

// tvEnum is a journal enumeration without its type prefix (STATUS_COMPLETE
// → COMPLETE); absent for the UNSET value 0.
func tvEnum(n int32, name, prefix string) *gpb.TypedValue {
	if n == 0 {
		return nil
	}
	return tvString(strings.TrimPrefix(name, prefix))
}

func tvStatus(s journal.Status) *gpb.TypedValue {
	return tvEnum(int32(s), s.String(), "STATUS_")
}

func tvPhase(p journal.Phase) *gpb.TypedValue {
	return tvEnum(int32(p), p.String(), "PHASE_")
}

func tvOpKind(k journal.OpKind) *gpb.TypedValue {
	return tvEnum(int32(k), k.String(), "OP_KIND_")
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

// --- the tree ---

// configurationLeaves renders configuration/state.
func configurationLeaves(c *journal.Configuration) []treeLeaf {
	var out []treeLeaf
	b := underElems(&out, nil, pathElem(elemConfiguration), pathElem("state"))
	b.add("committed-index", tvUint(c.GetCommitted().GetIndex()))
	b.add("committed-proposal", tvUint(c.GetCommitted().GetProposal()))
	b.add("applied-index", tvUint(c.GetApplied().GetIndex()))
	b.add("applied-proposal", tvUint(c.GetApplied().GetProposal()))
	b.add("applied-term", tvUint(c.GetApplied().GetTerm()))
	b.add("applied-target", tvUint(c.GetApplied().GetTarget()))
	b.add("status", tvStatus(c.GetStatus()))
	b.add("first-index", tvUint(c.GetFirstIndex()))
	b.add("last-index", tvUint(c.GetLastIndex()))
	b.add("rolling-back", tvNonZero(c.GetRollingBack()))
	b.add("history-floor", tvTime(c.GetHistoryFloor()))
	b.add("out-of-sync", tvUint(c.GetOutOfSync()))
	b.add("resolutions", tvUint(c.GetResolutions()))
	return out
}

// outOfSyncLeaves renders out-of-sync/path[path=P]: one entry per path
// where the device may not hold the applied value.
func outOfSyncLeaves(recs []*journal.OutOfSync) []treeLeaf {
	var out []treeLeaf
	for _, rec := range recs {
		pv := rec.GetValue()
		path := journal.PathString(pv.GetPath())
		b := underElems(&out, nil, pathElem(elemOutOfSync), keyedElem("path", "path", path), pathElem("state"))
		b.add("path", tvString(path))
		b.add("deleted", tvBool(pv.GetDeleted()))
		b.add("value", liveValue(pv))
		b.add("cause", tvString(causeName(rec.GetCause())))
		b.add("proposal", tvNonZero(rec.GetProposal()))
		if e := rec.GetError(); e != nil {
			b.add("error-code", tvString(codeName(codes.Code(e.GetCode()))))
			b.add("error-message", tvString(e.GetMessage()))
		}
		b.add("since", tvTime(rec.GetSince()))
	}
	return out
}

// resolutionLeaves renders resolutions/resolution[seq=N]: the operators'
// resolves of out-of-sync paths the journal keeps.
func resolutionLeaves(recs []*journal.Resolution) []treeLeaf {
	var out []treeLeaf
	for _, r := range recs {
		b := underElems(&out, nil, pathElem(elemResolutions), keyedElem("resolution", "seq", strconv.FormatUint(r.GetSeq(), 10)), pathElem("state"))
		b.add("seq", tvUint(r.GetSeq()))
		b.add("time", tvTime(r.GetTime()))
		b.add("author", tvString(r.GetAuthor()))
		b.add("action", tvString(r.GetAction()))
		b.add("settled", tvPaths(r.GetSettled()))
		b.add("still-out-of-sync", tvPaths(r.GetStillOutOfSync()))
		b.add("proposal", tvNonZero(r.GetProposal()))
	}
	return out
}

// tvPaths is a leaf-list of path strings (absent when empty).
func tvPaths(paths []*gpb.Path) *gpb.TypedValue {
	if len(paths) == 0 {
		return nil
	}
	l := &gpb.ScalarArray{}
	for _, p := range paths {
		l.Element = append(l.Element, &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: journal.PathString(p)}})
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_LeaflistVal{LeaflistVal: l}}
}

// causeName is an out-of-sync cause as the tree shows it: ROLLBACK,
// REPUSH, RETRY or RESTORE.
func causeName(c journal.OutOfSyncCause) string {
	return strings.TrimPrefix(c.String(), "OUT_OF_SYNC_CAUSE_")
}

// deviceLeaves renders device/state: the device's address and the agent's
// view of it.
func deviceLeaves(address string, st agent.Status) []treeLeaf {
	var out []treeLeaf
	b := underElems(&out, nil, pathElem(elemDevice), pathElem("state"))
	b.add("address", tvString(address))
	b.add("connected", tvBool(st.Connected))
	if st.Connected {
		b.add("term", tvNonZero(st.Term))
	}
	b.add("repushing", tvBool(st.Repushing))
	if !st.LastRepush.IsZero() {
		b.add("last-repush-time", tvInt(st.LastRepush.UnixNano()))
		b.add("last-repush-values", tvUint(uint64(st.LastRepushValues)))
		b.add("last-repush-duration", tvInt(int64(st.LastRepushDuration)))
		b.add("last-repush-device-duration", tvInt(int64(st.LastRepushDeviceDuration)))
	}
	b.add("last-error", tvString(st.LastError))
	b.add("fenced", tvBool(st.Fenced))
	b.add("fenced-by", tvString(st.FencedBy))
	return out
}

// commitConfirmLeaves renders commit-confirm/state: nothing when no
// commit-confirmed is outstanding (cc nil).
func commitConfirmLeaves(cc *journal.CommitConfirm) []treeLeaf {
	if cc == nil {
		return nil
	}
	var out []treeLeaf
	b := underElems(&out, nil, pathElem(elemCommitConfirm), pathElem("state"))
	b.add("id", tvString(cc.GetId()))
	b.add("proposal", tvUint(cc.GetProposal()))
	b.add("started", tvTime(cc.GetStarted()))
	b.add("deadline", tvTime(cc.GetDeadline()))
	b.add("cancelled", tvBool(cc.GetCancelled()))
	return out
}

// proposalLeaves renders proposals/proposal[index=N]: its state, its
// operations and, once committed, its changes.
func proposalLeaves(p *journal.Proposal) []treeLeaf {
	var out []treeLeaf
	base := proposalElems(p.GetIndex())
	proposalState(underElems(&out, base, pathElem("state")), p)
	for n, op := range p.GetChange().GetOps() {
		seq := strconv.Itoa(n + 1)
		b := underElems(&out, base, pathElem("operations"), keyedElem("operation", "seq", seq), pathElem("state"))
		b.add("kind", tvOpKind(op.GetKind()))
		b.add("path", tvString(journal.PathString(op.GetPath())))
		b.add("value", opValue(op))
	}
	previous := make(map[string]*journal.PathValue, len(p.GetRollback().GetValues()))
	for _, pv := range p.GetRollback().GetValues() {
		previous[string(journal.PathKey(pv.GetPath()))] = pv
	}
	for _, pv := range p.GetChange().GetValues() {
		path := journal.PathString(pv.GetPath())
		b := underElems(&out, base, pathElem("changes"), keyedElem("change", "path", path), pathElem("state"))
		b.add("path", tvString(path))
		b.add("deleted", tvBool(pv.GetDeleted()))
		b.add("value", liveValue(pv))
		if prev, ok := previous[string(journal.PathKey(pv.GetPath()))]; ok {
			b.add("previous-index", tvUint(prev.GetIndex()))
			b.add("previous-deleted", tvBool(prev.GetDeleted() || prev.GetValue() == nil))
			b.add("previous-value", liveValue(prev))
		}
	}
	return out
}

// proposalState renders a proposal's state container; the rollback leaves
// only once a rollback was proposed.
func proposalState(b leafBuilder, p *journal.Proposal) {
	ch := p.GetChange()
	b.add("index", tvUint(p.GetIndex()))
	b.add("phase", tvPhase(p.GetPhase()))
	b.add("commit-status", tvStatus(ch.GetCommit()))
	b.add("apply-status", tvStatus(ch.GetApply()))
	b.add("proposed", tvTime(ch.GetProposed()))
	b.add("committed", tvTime(ch.GetCommitted()))
	b.add("apply-started", tvTime(ch.GetApplyStarted()))
	b.add("applied", tvTime(ch.GetApplied()))
	if e := ch.GetError(); e != nil {
		if e.GetCode() != 0 {
			b.add("error-code", tvString(codeName(codes.Code(e.GetCode()))))
		}
		b.add("error-message", tvString(e.GetMessage()))
	}
	b.add("operations", tvUint(uint64(len(ch.GetOps()))))
	b.add("author", tvString(ch.GetAuthor()))
	if ch.GetAdopted() {
		b.add("adopted", tvBool(true))
	}
	if p.GetPhase() != journal.PhaseRollback {
		return
	}
	rb := p.GetRollback()
	b.add("rollback-index", tvUint(rb.GetIndex()))
	b.add("rollback-commit-status", tvStatus(rb.GetCommit()))
	b.add("rollback-apply-status", tvStatus(rb.GetApply()))
	b.add("rollback-proposed", tvTime(rb.GetProposed()))
	b.add("rollback-committed", tvTime(rb.GetCommitted()))
	b.add("rollback-apply-started", tvTime(rb.GetApplyStarted()))
	if e := rb.GetError(); e != nil {
		b.add("rollback-error-code", tvString(codeName(codes.Code(e.GetCode()))))
		b.add("rollback-error-message", tvString(e.GetMessage()))
	}
	b.add("rollback-applied", tvTime(rb.GetApplied()))
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

// liveValue is a PathValue's value, absent for a tombstone.
func liveValue(pv *journal.PathValue) *gpb.TypedValue {
	if pv.GetDeleted() {
		return nil
	}
	return pv.GetValue()
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
