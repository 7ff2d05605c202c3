package main

// The operator commands' view of a running sidecar: gNMI requests to its
// introspection tree (docs/introspection.md) and the plain Go structs they
// decode into, which the text and JSON printers consume. Nothing here
// prints, and nothing opens the journal's database.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/introspection"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// introspectionOrigin is the gNMI origin of the sidecar's own tree.
const introspectionOrigin = introspection.Origin

// --- views ---

// ConfigurationState is configuration/state. JSON names are the leaf
// names with "-" replaced by "_"; leaves the sidecar does not serve are
// omitted.
type ConfigurationState struct {
	CommittedIndex    uint64    `json:"committed_index"`
	CommittedProposal uint64    `json:"committed_proposal"`
	AppliedIndex      uint64    `json:"applied_index"`
	AppliedProposal   uint64    `json:"applied_proposal"`
	AppliedTerm       uint64    `json:"applied_term"`
	AppliedTarget     uint64    `json:"applied_target"`
	Status            string    `json:"status,omitempty"`
	FirstIndex        uint64    `json:"first_index"`
	LastIndex         uint64    `json:"last_index"`
	RollingBack       *uint64   `json:"rolling_back,omitempty"`
	HistoryFloor      time.Time `json:"history_floor,omitzero"`
	OutOfSync         uint64    `json:"out_of_sync"`
	Resolutions       uint64    `json:"resolutions"`
	BaselineIndex     *uint64   `json:"baseline_index,omitempty"`
}

// DeviceState is device/state.
type DeviceState struct {
	Address   string  `json:"address"`
	Connected bool    `json:"connected"`
	Term      *uint64 `json:"term,omitempty"`
	Repushing bool    `json:"repushing"`
	Fenced    bool    `json:"fenced"`
	FencedBy  string  `json:"fenced_by,omitempty"`
	// Retrying is the acknowledged change being sent again (--retry-codes),
	// with its sends so far and when the first was sent.
	Retrying           *uint64   `json:"retrying,omitempty"`
	RetryingAttempts   *uint64   `json:"retrying_attempts,omitempty"`
	RetryingSince      time.Time `json:"retrying_since,omitzero"`
	LastRepushTime     time.Time `json:"last_repush_time,omitzero"`
	LastRepushValues   *uint64   `json:"last_repush_values,omitempty"`
	LastRepushDuration *int64    `json:"last_repush_duration,omitempty"` // nanoseconds
	// LastRepushDeviceDuration is the part of LastRepushDuration spent
	// waiting for the device (nanoseconds).
	LastRepushDeviceDuration *int64 `json:"last_repush_device_duration,omitempty"`
	LastError                string `json:"last_error,omitempty"`
	ReadState
}

// ReadState is how the sidecar reads the device's configuration
// (drift/state): the method, whether the last read worked (absent before
// the first), and why not.
type ReadState struct {
	ReadMethod string `json:"read_method,omitempty"`
	Readable   *bool  `json:"readable,omitempty"`
	ReadError  string `json:"read_error,omitempty"`
}

// readState reads a ReadState from drift/state's leaves.
func readState(st map[string]*gpb.TypedValue) ReadState {
	r := ReadState{ReadMethod: stringOf(st[introspection.ReadMethod]), ReadError: stringOf(st[introspection.ReadError])}
	if v := st[introspection.Readable]; v != nil {
		b := boolOf(v)
		r.Readable = &b
	}
	return r
}

// unreadable is why the device's configuration cannot be read now (nil
// if its last read worked, or none was made).
func (r ReadState) unreadable() error {
	if r.ReadError != "" && (r.Readable == nil || !*r.Readable) {
		return errors.New(r.ReadError) // "the device's configuration at P cannot be read: why"
	}
	return nil
}

// CommitConfirmState is commit-confirm/state: the outstanding
// commit-confirmed.
type CommitConfirmState struct {
	ID        string    `json:"id"`
	Proposal  uint64    `json:"proposal"`
	Started   time.Time `json:"started,omitzero"`
	Deadline  time.Time `json:"deadline,omitzero"`
	Cancelled bool      `json:"cancelled"`
	// Author committed it; CancelledBy cancelled it; ExtendedBy last moved
	// its deadline, at Extended.
	Author      string    `json:"author,omitempty"`
	CancelledBy string    `json:"cancelled_by,omitempty"`
	ExtendedBy  string    `json:"extended_by,omitempty"`
	Extended    time.Time `json:"extended,omitzero"`
}

// StatusView is what `gnmi-sidecar status` shows.
type StatusView struct {
	// Summary says in one line whether all is well, else what is not,
	// the worst first (statusSummary).
	Summary       string             `json:"summary"`
	Configuration ConfigurationState `json:"configuration"`
	Device        DeviceState        `json:"device"`
	// CommitConfirm is nil (JSON null) while none is outstanding.
	CommitConfirm *CommitConfirmState `json:"commit_confirm"`
	// OutOfSync lists the paths where the device may not hold the applied
	// configuration (empty when it holds all of it).
	OutOfSync []OutOfSyncState `json:"out_of_sync"`
	// Resolutions are the newest operators' resolves (at most
	// maxStatusResolutions), oldest first.
	Resolutions []ResolutionState `json:"resolutions"`
	// Drifted is the number of paths drift detection finds changed on the
	// device behind the sidecar's back (absent: no drift detection).
	Drifted *uint64 `json:"drifted,omitempty"`
}

// maxStatusResolutions bounds the resolves status shows.
const maxStatusResolutions = 5

// ResolutionState is resolutions/resolution[seq=N]/state.
type ResolutionState struct {
	Seq            uint64    `json:"seq"`
	Time           time.Time `json:"time,omitzero"`
	Author         string    `json:"author"`
	Action         string    `json:"action"`
	Settled        []string  `json:"settled"`
	StillOutOfSync []string  `json:"still_out_of_sync"`
	Proposal       *uint64   `json:"proposal,omitempty"`
}

// OutOfSyncState is out-of-sync/path[path=P]/state: a value the device
// refused for good.
type OutOfSyncState struct {
	Path         string    `json:"path"`
	Deleted      bool      `json:"deleted"`
	Value        *Value    `json:"value,omitempty"` // the applied value the device refused
	Cause        string    `json:"cause"`           // ROLLBACK, REPUSH, RETRY, RESTORE or DRIFT
	Proposal     *uint64   `json:"proposal,omitempty"`
	ErrorCode    string    `json:"error_code,omitempty"`
	ErrorMessage string    `json:"error_message,omitempty"`
	Since        time.Time `json:"since,omitzero"`
}

// ProposalState is proposals/proposal[index=N]/state.
type ProposalState struct {
	Index        uint64    `json:"index"`
	Phase        string    `json:"phase"`
	CommitStatus string    `json:"commit_status"`
	ApplyStatus  string    `json:"apply_status"`
	Proposed     time.Time `json:"proposed,omitzero"`
	Committed    time.Time `json:"committed,omitzero"`
	ApplyStarted time.Time `json:"apply_started,omitzero"`
	Applied      time.Time `json:"applied,omitzero"`
	ErrorCode    string    `json:"error_code,omitempty"`
	ErrorMessage string    `json:"error_message,omitempty"`
	Operations   uint64    `json:"operations"` // how many the Set had
	Author       string    `json:"author,omitempty"`
	Comment      string    `json:"comment,omitempty"`
	Target       string    `json:"target,omitempty"`
	Adopted      bool      `json:"adopted,omitempty"` // the device's values, recorded by resolve skip|adopt
	// RestoresIndex and RestoresTag: set on a change that goes back to a
	// point (rollback --to): the proposal after whose commit it is, and
	// the tag that named it.
	RestoresIndex        *uint64   `json:"restores_index,omitempty"`
	RestoresTag          string    `json:"restores_tag,omitempty"`
	RollbackErrorCode    string    `json:"rollback_error_code,omitempty"`
	RollbackErrorMessage string    `json:"rollback_error_message,omitempty"`
	RollbackIndex        *uint64   `json:"rollback_index,omitempty"`
	RollbackCommitStatus string    `json:"rollback_commit_status,omitempty"`
	RollbackApplyStatus  string    `json:"rollback_apply_status,omitempty"`
	RollbackProposed     time.Time `json:"rollback_proposed,omitzero"`
	RollbackCommitted    time.Time `json:"rollback_committed,omitzero"`
	RollbackApplyStarted time.Time `json:"rollback_apply_started,omitzero"`
	RollbackApplied      time.Time `json:"rollback_applied,omitzero"`
	RollbackAuthor       string    `json:"rollback_author,omitempty"`
	RollbackComment      string    `json:"rollback_comment,omitempty"`
	// A commit-confirmed change: who confirmed, cancelled or last
	// extended it, and when.
	CommitConfirmedBy string    `json:"commit_confirmed_by,omitempty"`
	CommitConfirmedAt time.Time `json:"commit_confirmed_at,omitzero"`
	CommitCancelledBy string    `json:"commit_cancelled_by,omitempty"`
	CommitCancelledAt time.Time `json:"commit_cancelled_at,omitzero"`
	CommitExtendedBy  string    `json:"commit_extended_by,omitempty"`
	CommitExtendedAt  time.Time `json:"commit_extended_at,omitzero"`
}

// Statuses returns the commit and apply statuses of the proposal's current
// phase: the rollback's once one was proposed, else the change's (as the
// sidecar's Set response reports them).
func (p *ProposalState) Statuses() (commit, apply string) {
	if p.Phase == "ROLLBACK" && p.RollbackCommitStatus != "" {
		return p.RollbackCommitStatus, p.RollbackApplyStatus
	}
	return p.CommitStatus, p.ApplyStatus
}

// Error returns "CODE: message" ("" if the proposal has no error).
func (p *ProposalState) Error() string {
	switch {
	case p.ErrorCode == "" && p.ErrorMessage == "":
		return ""
	case p.ErrorMessage == "":
		return p.ErrorCode
	case p.ErrorCode == "":
		return p.ErrorMessage
	}
	return p.ErrorCode + ": " + p.ErrorMessage
}

// Unsuccessful reports whether the proposal's change did not take effect
// (commit or apply FAILED or ABORTED) or the device refused its rollback.
func (p *ProposalState) Unsuccessful() bool {
	bad := func(s string) bool { return s == "FAILED" || s == "ABORTED" }
	return bad(p.CommitStatus) || bad(p.ApplyStatus) || p.RollbackApplyStatus == "FAILED"
}

// OperationView is proposals/proposal/operations/operation[seq=K]/state.
type OperationView struct {
	Seq   uint64 `json:"seq"`
	Kind  string `json:"kind"`
	Path  string `json:"path"`
	Value *Value `json:"value,omitempty"` // absent for a delete
}

// ChangeView is proposals/proposal/changes/change[path=P]/state.
type ChangeView struct {
	Path            string `json:"path"`
	Deleted         bool   `json:"deleted"`
	Value           *Value `json:"value,omitempty"`
	PreviousIndex   uint64 `json:"previous_index"`
	PreviousDeleted bool   `json:"previous_deleted"`
	PreviousValue   *Value `json:"previous_value,omitempty"`
}

// Old is the OLD column: what the path held before, "-" if nothing.
func (c *ChangeView) Old(max int) string {
	if c.PreviousDeleted || c.PreviousValue == nil {
		return "-"
	}
	return truncate(c.PreviousValue.Text(), max)
}

// New is the NEW column: the value written, "(deleted)" for a delete.
func (c *ChangeView) New(max int) string {
	if c.Deleted || c.Value == nil {
		return "(deleted)"
	}
	return truncate(c.Value.Text(), max)
}

// ProposalDetail is the whole proposals/proposal[index=N] subtree.
type ProposalDetail struct {
	State      ProposalState   `json:"state"`
	Operations []OperationView `json:"operations"` // in gNMI order
	Changes    []ChangeView    `json:"changes"`    // by path; empty until committed
}

// DiffEntry is one leaf a change makes (journal show --diff) or would make
// (set --dry-run, rollback --dry-run): what the path held before and what
// it holds after; absent (null in JSON) for nothing. OldUnknown: a dry
// run's Delete or Replace removes the path, where the journal holds
// nothing: the device loses whatever it holds there.
type DiffEntry struct {
	Path       string `json:"path"`
	Old        *Value `json:"old"`
	New        *Value `json:"new"`
	OldUnknown bool   `json:"old_unknown,omitempty"`
}

// TagState is tags/tag[name=N]/state: a named point of the journal.
type TagState struct {
	Name  string `json:"name"`
	Index uint64 `json:"index"`
	// Time is when the point was: a History snapshot at it (HistoryTime,
	// the same in nanoseconds since the Unix epoch, as gNMI clients take
	// it) reads the configuration at the tag.
	Time        time.Time `json:"time,omitzero"`
	HistoryTime int64     `json:"history_time"`
	Created     time.Time `json:"created,omitzero"`
	Author      string    `json:"author,omitempty"`
	Comment     string    `json:"comment,omitempty"`
	Restorable  bool      `json:"restorable"`
}

func tagState(name string, m map[string]*gpb.TypedValue) TagState {
	t := TagState{
		Name:        stringOf(m[introspection.Name]),
		Index:       uintOf(m[introspection.Index]),
		Time:        timeOf(m[introspection.Time]),
		HistoryTime: intOf(m[introspection.Time]),
		Created:     timeOf(m[introspection.Created]),
		Author:      stringOf(m[introspection.Author]),
		Comment:     stringOf(m[introspection.Comment]),
		Restorable:  boolOf(m[introspection.Restorable]),
	}
	if t.Name == "" {
		t.Name = name
	}
	return t
}

// fetchTags reads the tags, by name.
func fetchTags(ctx context.Context, c gpb.GNMIClient) ([]TagState, error) {
	entries, err := fetchEntries(ctx, c, introspection.Tags, introspection.Tag, introspection.Name)
	if err != nil {
		return nil, err
	}
	out := make([]TagState, 0, len(entries))
	for name, m := range entries {
		out = append(out, tagState(name, m))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// JournalList is what `gnmi-sidecar journal list` shows.
type JournalList struct {
	FirstIndex uint64          `json:"first_index"`
	LastIndex  uint64          `json:"last_index"`
	Proposals  []ProposalState `json:"proposals"` // oldest first
}

// ResponseView is the sidecar's Response extension (sidecarpb.Response),
// with the enum prefixes dropped: phase CHANGE or ROLLBACK, statuses as in
// the introspection tree.
type ResponseView struct {
	Index  uint64 `json:"index"`
	Phase  string `json:"phase"`
	Commit string `json:"commit_status"`
	Apply  string `json:"apply_status"`
}

func responseView(r *sidecarpb.Response) *ResponseView {
	if r == nil {
		return nil
	}
	return &ResponseView{
		Index:  r.GetIndex(),
		Phase:  strings.TrimPrefix(r.GetPhase().String(), "PHASE_"),
		Commit: strings.TrimPrefix(r.GetCommit().String(), "STATUS_"),
		Apply:  strings.TrimPrefix(r.GetApply().String(), "STATUS_"),
	}
}

// --- values ---

// Value is a value a proposal carried, served as the TypedValue the client
// sent. Its JSON is the JSON of the TypedValue's content: a string, a
// number, a boolean, the embedded JSON of json_val and json_ietf_val, an
// array for a leaf-list, base64 text for bytes.
type Value struct{ TV *gpb.TypedValue }

func newValue(tv *gpb.TypedValue) *Value {
	if tv == nil {
		return nil
	}
	return &Value{TV: tv}
}

// MarshalJSON implements json.Marshaler.
func (v *Value) MarshalJSON() ([]byte, error) { return valueJSON(v.TV), nil }

// Text renders the value compactly: strings as they are, a marker (a list
// entry or container the journal records as existing: {}) as "(exists)",
// everything else as its JSON text.
func (v *Value) Text() string {
	if leaves.IsMarker(v.TV) {
		return "(exists)"
	}
	switch x := v.TV.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return x.StringVal
	case *gpb.TypedValue_AsciiVal:
		return x.AsciiVal
	case *gpb.TypedValue_BytesVal:
		return base64.StdEncoding.EncodeToString(x.BytesVal)
	case *gpb.TypedValue_ProtoBytes:
		return base64.StdEncoding.EncodeToString(x.ProtoBytes)
	}
	return string(valueJSON(v.TV))
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

func jsonFloat(f float64, bits int) json.RawMessage {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return jsonString(strconv.FormatFloat(f, 'g', -1, bits))
	}
	return json.RawMessage(strconv.FormatFloat(f, 'g', -1, bits))
}

// valueJSON is the JSON of tv's content (null for none).
func valueJSON(tv *gpb.TypedValue) json.RawMessage {
	switch x := tv.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return jsonString(x.StringVal)
	case *gpb.TypedValue_AsciiVal:
		return jsonString(x.AsciiVal)
	case *gpb.TypedValue_IntVal:
		return json.RawMessage(strconv.FormatInt(x.IntVal, 10))
	case *gpb.TypedValue_UintVal:
		return json.RawMessage(strconv.FormatUint(x.UintVal, 10))
	case *gpb.TypedValue_BoolVal:
		return json.RawMessage(strconv.FormatBool(x.BoolVal))
	case *gpb.TypedValue_DoubleVal:
		return jsonFloat(x.DoubleVal, 64)
	case *gpb.TypedValue_FloatVal:
		//lint:ignore SA1019 a client may still send it
		return jsonFloat(float64(x.FloatVal), 32)
	case *gpb.TypedValue_DecimalVal:
		//lint:ignore SA1019 a client may still send it
		return decimalJSON(x.DecimalVal)
	case *gpb.TypedValue_JsonVal:
		return embeddedJSON(x.JsonVal)
	case *gpb.TypedValue_JsonIetfVal:
		return embeddedJSON(x.JsonIetfVal)
	case *gpb.TypedValue_BytesVal:
		return jsonString(base64.StdEncoding.EncodeToString(x.BytesVal))
	case *gpb.TypedValue_ProtoBytes:
		return jsonString(base64.StdEncoding.EncodeToString(x.ProtoBytes))
	case *gpb.TypedValue_LeaflistVal:
		parts := make([]string, 0, len(x.LeaflistVal.GetElement()))
		for _, e := range x.LeaflistVal.GetElement() {
			parts = append(parts, string(valueJSON(e)))
		}
		return json.RawMessage("[" + strings.Join(parts, ",") + "]")
	case *gpb.TypedValue_AnyVal:
		if b, err := protojson.Marshal(x.AnyVal); err == nil {
			return compactJSON(b)
		}
		b, _ := json.Marshal(map[string]any{"type_url": x.AnyVal.GetTypeUrl(), "value": x.AnyVal.GetValue()})
		return b
	}
	return json.RawMessage("null")
}

// embeddedJSON is the JSON a json_val or json_ietf_val carries, compacted;
// bytes that are not JSON become a JSON string.
func embeddedJSON(b []byte) json.RawMessage {
	if json.Valid(b) {
		return compactJSON(b)
	}
	return jsonString(string(b))
}

func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return json.RawMessage(b)
	}
	return buf.Bytes()
}

// maxFractionDigits is the most fraction digits a YANG decimal64 has.
const maxFractionDigits = 18

// decimalJSON renders a Decimal64 (digits × 10^-precision) as a number,
// with an exponent beyond maxFractionDigits: a client may send any
// precision, up to 2^32-1, and a value of a few bytes must not become
// gigabytes of zeros.
//
//lint:ignore SA1019 a client may still send it
func decimalJSON(d *gpb.Decimal64) json.RawMessage {
	digits, prec := d.GetDigits(), int(d.GetPrecision())
	neg := digits < 0
	s := strconv.FormatUint(uint64(digits), 10)
	if neg {
		s = strconv.FormatUint(uint64(-digits), 10)
	}
	switch {
	case prec > maxFractionDigits:
		s += "e-" + strconv.Itoa(prec)
	case prec > 0:
		if len(s) <= prec {
			s = strings.Repeat("0", prec-len(s)+1) + s
		}
		s = s[:len(s)-prec] + "." + s[len(s)-prec:]
	}
	if neg {
		s = "-" + s
	}
	return json.RawMessage(s)
}

// truncate shortens s to at most max runes (0: no limit), ending it with
// "…" when it was cut, and puts it on one line.
func truncate(s string, max int) string {
	s = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", " ").Replace(s)
	if max <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}

// --- gNMI ---

// leaf is one value of the introspection tree: its path below the origin
// (the notification's prefix and the update's path joined) and its value.
type leaf struct {
	elems []*gpb.PathElem
	val   *gpb.TypedValue
}

func elem(name string, kv ...string) *gpb.PathElem {
	e := &gpb.PathElem{Name: name}
	if len(kv) > 0 {
		e.Key = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			e.Key[kv[i]] = kv[i+1]
		}
	}
	return e
}

func proposalElems(index string, below ...*gpb.PathElem) []*gpb.PathElem {
	return append([]*gpb.PathElem{elem(introspection.Proposals), elem(introspection.Proposal, introspection.Index, index)}, below...)
}

// getIntrospection sends one GetRequest for paths (each a list of elements
// below the origin) and returns every leaf of the answer.
func getIntrospection(ctx context.Context, c gpb.GNMIClient, paths ...[]*gpb.PathElem) ([]leaf, error) {
	req := &gpb.GetRequest{Prefix: &gpb.Path{Origin: introspectionOrigin}}
	for _, p := range paths {
		req.Path = append(req.Path, &gpb.Path{Elem: p})
	}
	resp, err := c.Get(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []leaf
	for _, n := range resp.GetNotification() {
		pre := n.GetPrefix().GetElem()
		for _, u := range n.GetUpdate() {
			elems := make([]*gpb.PathElem, 0, len(pre)+len(u.GetPath().GetElem()))
			elems = append(append(elems, pre...), u.GetPath().GetElem()...)
			out = append(out, leaf{elems: elems, val: u.GetVal()})
		}
	}
	return out, nil
}

// stateLeaves collects the leaves directly under container/state (e.g.
// configuration/state), by leaf name.
func stateLeaves(leaves []leaf, container string) map[string]*gpb.TypedValue {
	m := map[string]*gpb.TypedValue{}
	for _, l := range leaves {
		if len(l.elems) == 3 && l.elems[0].GetName() == container && l.elems[1].GetName() == introspection.State {
			m[l.elems[2].GetName()] = l.val
		}
	}
	return m
}

// Leaf decoders, lenient about the integer kind: a uint leaf served as
// int_val (or the reverse) still reads.

func uintOf(tv *gpb.TypedValue) uint64 {
	switch x := tv.GetValue().(type) {
	case *gpb.TypedValue_UintVal:
		return x.UintVal
	case *gpb.TypedValue_IntVal:
		if x.IntVal > 0 {
			return uint64(x.IntVal)
		}
	case *gpb.TypedValue_StringVal:
		n, _ := strconv.ParseUint(x.StringVal, 10, 64)
		return n
	}
	return 0
}

func optUint(tv *gpb.TypedValue) *uint64 {
	if tv == nil {
		return nil
	}
	n := uintOf(tv)
	return &n
}

func intOf(tv *gpb.TypedValue) int64 {
	switch x := tv.GetValue().(type) {
	case *gpb.TypedValue_IntVal:
		return x.IntVal
	case *gpb.TypedValue_UintVal:
		return int64(x.UintVal) //nolint:gosec // nanoseconds fit
	}
	return 0
}

// timeOf decodes a time leaf (nanoseconds since the epoch) in UTC; an
// absent leaf is the zero time.
func timeOf(tv *gpb.TypedValue) time.Time {
	if tv == nil {
		return time.Time{}
	}
	return time.Unix(0, intOf(tv)).UTC()
}

func boolOf(tv *gpb.TypedValue) bool {
	if b, ok := tv.GetValue().(*gpb.TypedValue_BoolVal); ok {
		return b.BoolVal
	}
	return tv.GetStringVal() == "true"
}

func stringOf(tv *gpb.TypedValue) string {
	if tv == nil {
		return ""
	}
	if s, ok := tv.GetValue().(*gpb.TypedValue_StringVal); ok {
		return s.StringVal
	}
	return (&Value{TV: tv}).Text()
}

func configurationState(m map[string]*gpb.TypedValue) ConfigurationState {
	return ConfigurationState{
		CommittedIndex:    uintOf(m[introspection.CommittedIndex]),
		CommittedProposal: uintOf(m[introspection.CommittedProposal]),
		AppliedIndex:      uintOf(m[introspection.AppliedIndex]),
		AppliedProposal:   uintOf(m[introspection.AppliedProposal]),
		AppliedTerm:       uintOf(m[introspection.AppliedTerm]),
		AppliedTarget:     uintOf(m[introspection.AppliedTarget]),
		Status:            stringOf(m[introspection.Status]),
		FirstIndex:        uintOf(m[introspection.FirstIndex]),
		LastIndex:         uintOf(m[introspection.LastIndex]),
		RollingBack:       optUint(m[introspection.RollingBack]),
		HistoryFloor:      timeOf(m[introspection.HistoryFloor]),
		OutOfSync:         uintOf(m[introspection.OutOfSync]),
		Resolutions:       uintOf(m[introspection.Resolutions]),
		BaselineIndex:     optUint(m[introspection.BaselineIndex]),
	}
}

func deviceState(m map[string]*gpb.TypedValue) DeviceState {
	d := DeviceState{
		Address:          stringOf(m[introspection.Address]),
		Connected:        boolOf(m[introspection.Connected]),
		Term:             optUint(m[introspection.Term]),
		Repushing:        boolOf(m[introspection.Repushing]),
		Fenced:           boolOf(m[introspection.Fenced]),
		FencedBy:         stringOf(m[introspection.FencedBy]),
		Retrying:         optUint(m[introspection.Retrying]),
		RetryingAttempts: optUint(m[introspection.RetryingAttempts]),
		RetryingSince:    timeOf(m[introspection.RetryingSince]),
		LastRepushTime:   timeOf(m[introspection.LastRepushTime]),
		LastRepushValues: optUint(m[introspection.LastRepushValues]),
		LastError:        stringOf(m[introspection.LastError]),
	}
	if tv := m[introspection.LastRepushDuration]; tv != nil {
		n := intOf(tv)
		d.LastRepushDuration = &n
	}
	if tv := m[introspection.LastRepushDeviceDuration]; tv != nil {
		n := intOf(tv)
		d.LastRepushDeviceDuration = &n
	}
	return d
}

func commitConfirmState(m map[string]*gpb.TypedValue) *CommitConfirmState {
	if len(m) == 0 {
		return nil
	}
	return &CommitConfirmState{
		ID:          stringOf(m[introspection.ID]),
		Proposal:    uintOf(m[introspection.Proposal]),
		Started:     timeOf(m[introspection.Started]),
		Deadline:    timeOf(m[introspection.Deadline]),
		Cancelled:   boolOf(m[introspection.Cancelled]),
		Author:      stringOf(m[introspection.Author]),
		CancelledBy: stringOf(m[introspection.CancelledBy]),
		ExtendedBy:  stringOf(m[introspection.ExtendedBy]),
		Extended:    timeOf(m[introspection.Extended]),
	}
}

func proposalState(index uint64, m map[string]*gpb.TypedValue) ProposalState {
	p := ProposalState{
		Index:                index,
		Phase:                stringOf(m[introspection.Phase]),
		CommitStatus:         stringOf(m[introspection.CommitStatus]),
		ApplyStatus:          stringOf(m[introspection.ApplyStatus]),
		Proposed:             timeOf(m[introspection.Proposed]),
		Committed:            timeOf(m[introspection.Committed]),
		ApplyStarted:         timeOf(m[introspection.ApplyStarted]),
		Applied:              timeOf(m[introspection.Applied]),
		ErrorCode:            stringOf(m[introspection.ErrorCode]),
		ErrorMessage:         stringOf(m[introspection.ErrorMessage]),
		Operations:           uintOf(m[introspection.Operations]),
		Author:               stringOf(m[introspection.Author]),
		Comment:              stringOf(m[introspection.Comment]),
		Target:               stringOf(m[introspection.Target]),
		Adopted:              boolOf(m[introspection.Adopted]),
		RestoresIndex:        optUint(m[introspection.RestoresIndex]),
		RestoresTag:          stringOf(m[introspection.RestoresTag]),
		RollbackErrorCode:    stringOf(m[introspection.RollbackErrorCode]),
		RollbackErrorMessage: stringOf(m[introspection.RollbackErrorMessage]),
		RollbackIndex:        optUint(m[introspection.RollbackIndex]),
		RollbackCommitStatus: stringOf(m[introspection.RollbackCommitStatus]),
		RollbackApplyStatus:  stringOf(m[introspection.RollbackApplyStatus]),
		RollbackProposed:     timeOf(m[introspection.RollbackProposed]),
		RollbackCommitted:    timeOf(m[introspection.RollbackCommitted]),
		RollbackApplyStarted: timeOf(m[introspection.RollbackApplyStarted]),
		RollbackApplied:      timeOf(m[introspection.RollbackApplied]),
		RollbackAuthor:       stringOf(m[introspection.RollbackAuthor]),
		RollbackComment:      stringOf(m[introspection.RollbackComment]),
		CommitConfirmedBy:    stringOf(m[introspection.CommitConfirmedBy]),
		CommitConfirmedAt:    timeOf(m[introspection.CommitConfirmedAt]),
		CommitCancelledBy:    stringOf(m[introspection.CommitCancelledBy]),
		CommitCancelledAt:    timeOf(m[introspection.CommitCancelledAt]),
		CommitExtendedBy:     stringOf(m[introspection.CommitExtendedBy]),
		CommitExtendedAt:     timeOf(m[introspection.CommitExtendedAt]),
	}
	if tv := m[introspection.Index]; tv != nil {
		p.Index = uintOf(tv)
	}
	return p
}

// proposalTree gathers the leaves of proposals/proposal[index=N]/...
type proposalTree struct {
	state map[string]*gpb.TypedValue
	ops   map[uint64]map[string]*gpb.TypedValue // by seq
	chg   map[string]map[string]*gpb.TypedValue // by path key
}

// proposalTrees sorts leaves under proposals/proposal[index=N] by N.
func proposalTrees(leaves []leaf) map[uint64]*proposalTree {
	out := map[uint64]*proposalTree{}
	for _, l := range leaves {
		e := l.elems
		if len(e) < 4 || e[0].GetName() != introspection.Proposals || e[1].GetName() != introspection.Proposal {
			continue
		}
		index, err := strconv.ParseUint(e[1].GetKey()[introspection.Index], 10, 64)
		if err != nil {
			continue
		}
		t := out[index]
		if t == nil {
			t = &proposalTree{state: map[string]*gpb.TypedValue{}, ops: map[uint64]map[string]*gpb.TypedValue{}, chg: map[string]map[string]*gpb.TypedValue{}}
			out[index] = t
		}
		switch rest := e[2:]; {
		case len(rest) == 2 && rest[0].GetName() == introspection.State:
			t.state[rest[1].GetName()] = l.val
		case len(rest) == 4 && rest[0].GetName() == introspection.Operations && rest[1].GetName() == introspection.Operation && rest[2].GetName() == introspection.State:
			seq, err := strconv.ParseUint(rest[1].GetKey()[introspection.Seq], 10, 64)
			if err != nil {
				continue
			}
			if t.ops[seq] == nil {
				t.ops[seq] = map[string]*gpb.TypedValue{}
			}
			t.ops[seq][rest[3].GetName()] = l.val
		case len(rest) == 4 && rest[0].GetName() == introspection.Changes && rest[1].GetName() == introspection.Change && rest[2].GetName() == introspection.State:
			key := rest[1].GetKey()[introspection.Path]
			if t.chg[key] == nil {
				t.chg[key] = map[string]*gpb.TypedValue{}
			}
			t.chg[key][rest[3].GetName()] = l.val
		}
	}
	return out
}

func (t *proposalTree) detail(index uint64) *ProposalDetail {
	d := &ProposalDetail{State: proposalState(index, t.state), Operations: []OperationView{}, Changes: []ChangeView{}}
	seqs := make([]uint64, 0, len(t.ops))
	for seq := range t.ops {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, seq := range seqs {
		m := t.ops[seq]
		d.Operations = append(d.Operations, OperationView{
			Seq: seq, Kind: stringOf(m[introspection.Kind]), Path: stringOf(m[introspection.Path]), Value: newValue(m[introspection.Value]),
		})
	}
	for key, m := range t.chg {
		c := ChangeView{
			Path:            stringOf(m[introspection.Path]),
			Deleted:         boolOf(m[introspection.Deleted]),
			Value:           newValue(m[introspection.Value]),
			PreviousIndex:   uintOf(m[introspection.PreviousIndex]),
			PreviousDeleted: boolOf(m[introspection.PreviousDeleted]),
			PreviousValue:   newValue(m[introspection.PreviousValue]),
		}
		if c.Path == "" {
			c.Path = key
		}
		d.Changes = append(d.Changes, c)
	}
	sort.Slice(d.Changes, func(i, j int) bool { return d.Changes[i].Path < d.Changes[j].Path })
	return d
}

// fetchConfiguration reads configuration/state.
func fetchConfiguration(ctx context.Context, c gpb.GNMIClient) (ConfigurationState, error) {
	leaves, err := getIntrospection(ctx, c, []*gpb.PathElem{elem(introspection.Configuration), elem(introspection.State)})
	if err != nil {
		return ConfigurationState{}, err
	}
	return configurationState(stateLeaves(leaves, introspection.Configuration)), nil
}

// fetchStatus reads configuration/state and device/state in one Get, then
// commit-confirm/state (no leaves, or NotFound, while none is
// outstanding).
func fetchStatus(ctx context.Context, c gpb.GNMIClient) (*StatusView, error) {
	v, err := fetchStatusParts(ctx, c)
	if err != nil {
		return nil, err
	}
	v.Summary = statusSummary(v)
	return v, nil
}

// fetchStatusParts is fetchStatus but the summary.
func fetchStatusParts(ctx context.Context, c gpb.GNMIClient) (*StatusView, error) {
	leaves, err := getIntrospection(ctx, c,
		[]*gpb.PathElem{elem(introspection.Configuration), elem(introspection.State)},
		[]*gpb.PathElem{elem(introspection.Device), elem(introspection.State)})
	if err != nil {
		return nil, err
	}
	v := &StatusView{
		Configuration: configurationState(stateLeaves(leaves, introspection.Configuration)),
		Device:        deviceState(stateLeaves(leaves, introspection.Device)),
	}
	cc, err := getIntrospection(ctx, c, []*gpb.PathElem{elem(introspection.CommitConfirm), elem(introspection.State)})
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, err
	}
	v.CommitConfirm = commitConfirmState(stateLeaves(cc, introspection.CommitConfirm))
	dr, err := getIntrospection(ctx, c, []*gpb.PathElem{elem(introspection.Drift), elem(introspection.State)})
	switch status.Code(err) {
	case codes.OK:
		st := stateLeaves(dr, introspection.Drift)
		v.Device.ReadState = readState(st)
		v.Drifted = optUint(st[introspection.Paths])
	case codes.NotFound, codes.InvalidArgument:
		// A sidecar without drift detection: nothing known.
	default:
		return nil, err
	}
	v.OutOfSync, v.Resolutions = []OutOfSyncState{}, []ResolutionState{}
	if v.Configuration.Resolutions > 0 {
		if v.Resolutions, err = fetchResolutions(ctx, c); err != nil {
			return nil, err
		}
	}
	if v.Configuration.OutOfSync == 0 {
		return v, nil
	}
	entries, err := fetchEntries(ctx, c, introspection.OutOfSync, introspection.Path, introspection.Path)
	if err != nil {
		return nil, err
	}
	for _, p := range slices.Sorted(maps.Keys(entries)) {
		m := entries[p]
		v.OutOfSync = append(v.OutOfSync, OutOfSyncState{
			Path: stringOf(m[introspection.Path]), Deleted: boolOf(m[introspection.Deleted]), Value: newValue(m[introspection.Value]),
			Cause: stringOf(m[introspection.Cause]), Proposal: optUint(m[introspection.Proposal]), ErrorCode: stringOf(m[introspection.ErrorCode]),
			ErrorMessage: stringOf(m[introspection.ErrorMessage]), Since: timeOf(m[introspection.Since]),
		})
	}
	return v, nil
}

// fetchResolutions reads the newest maxStatusResolutions resolves.
func fetchResolutions(ctx context.Context, c gpb.GNMIClient) ([]ResolutionState, error) {
	entries, err := fetchEntries(ctx, c, introspection.Resolutions, introspection.Resolution, introspection.Seq)
	if err != nil {
		return nil, err
	}
	bySeq := make(map[uint64]map[string]*gpb.TypedValue, len(entries))
	for key, m := range entries {
		if seq, err := strconv.ParseUint(key, 10, 64); err == nil {
			bySeq[seq] = m
		}
	}
	seqs := slices.Sorted(maps.Keys(bySeq))
	if len(seqs) > maxStatusResolutions {
		seqs = seqs[len(seqs)-maxStatusResolutions:]
	}
	out := []ResolutionState{}
	for _, seq := range seqs {
		m := bySeq[seq]
		out = append(out, ResolutionState{Seq: seq, Time: timeOf(m[introspection.Time]), Author: stringOf(m[introspection.Author]),
			Action: stringOf(m[introspection.Action]), Settled: stringsOf(m[introspection.Settled]), StillOutOfSync: stringsOf(m[introspection.StillOutOfSync]),
			Proposal: optUint(m[introspection.Proposal])})
	}
	return out, nil
}

// fetchEntries reads the top-level list container/list[key=K]/state of the
// introspection tree: each entry's state leaves, by K (none if the
// sidecar has none).
func fetchEntries(ctx context.Context, c gpb.GNMIClient, container, list, key string) (map[string]map[string]*gpb.TypedValue, error) {
	leaves, err := getIntrospection(ctx, c, []*gpb.PathElem{elem(container)})
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, err
	}
	return entriesOf(leaves, list, key), nil
}

// entriesOf picks, out of the leaves of one container, the state leaves
// of its top-level list's entries, container/list[key=K]/state/LEAF, by K.
func entriesOf(leaves []leaf, list, key string) map[string]map[string]*gpb.TypedValue {
	out := map[string]map[string]*gpb.TypedValue{}
	for _, l := range leaves {
		if len(l.elems) != 4 || l.elems[1].GetName() != list || l.elems[2].GetName() != introspection.State {
			continue
		}
		k := l.elems[1].GetKey()[key]
		if out[k] == nil {
			out[k] = map[string]*gpb.TypedValue{}
		}
		out[k][l.elems[3].GetName()] = l.val
	}
	return out
}

// stringsOf reads a leaf-list of strings (empty, not nil, if absent).
func stringsOf(tv *gpb.TypedValue) []string {
	out := []string{}
	for _, e := range tv.GetLeaflistVal().GetElement() {
		out = append(out, e.GetStringVal())
	}
	return out
}

// fetchProposal reads the whole subtree of proposal index. A proposal the
// sidecar does not have is a NotFound error, whether the sidecar answered
// NotFound or nothing.
func fetchProposal(ctx context.Context, c gpb.GNMIClient, index uint64) (*ProposalDetail, error) {
	leaves, err := getIntrospection(ctx, c, proposalElems(strconv.FormatUint(index, 10)))
	if err != nil {
		return nil, err
	}
	t := proposalTrees(leaves)[index]
	if t == nil || len(t.state) == 0 {
		return nil, status.Errorf(codes.NotFound, "no proposal %d in the journal", index)
	}
	return t.detail(index), nil
}

// maxListPaths bounds the paths of one journal-list Get; a longer list
// asks for every proposal with one wildcard path and keeps the newest.
const maxListPaths = 1000

// fetchJournalList reads the states of the newest limit proposals (0: all
// retention keeps): configuration/state first, for the range, then one Get
// with a path per wanted proposal (all: one wildcard path). If retention
// drops a wanted proposal in between (NotFound), it starts over once.
func fetchJournalList(ctx context.Context, c gpb.GNMIClient, limit uint64) (*JournalList, error) {
	for attempt := 0; ; attempt++ {
		l, err := fetchJournalListOnce(ctx, c, limit)
		if status.Code(err) == codes.NotFound && attempt == 0 {
			continue
		}
		return l, err
	}
}

func fetchJournalListOnce(ctx context.Context, c gpb.GNMIClient, limit uint64) (*JournalList, error) {
	conf, err := fetchConfiguration(ctx, c)
	if err != nil {
		return nil, err
	}
	l := &JournalList{FirstIndex: conf.FirstIndex, LastIndex: conf.LastIndex, Proposals: []ProposalState{}}
	if conf.FirstIndex == 0 || conf.LastIndex < conf.FirstIndex {
		return l, nil
	}
	from := conf.FirstIndex
	if limit > 0 && conf.LastIndex-conf.FirstIndex >= limit {
		from = conf.LastIndex - limit + 1
	}
	var paths [][]*gpb.PathElem
	if limit == 0 || limit > maxListPaths {
		paths = append(paths, proposalElems("*", elem(introspection.State)))
	} else {
		for i := from; i <= conf.LastIndex; i++ {
			paths = append(paths, proposalElems(strconv.FormatUint(i, 10), elem(introspection.State)))
		}
	}
	leaves, err := getIntrospection(ctx, c, paths...)
	if err != nil {
		return nil, err
	}
	for index, t := range proposalTrees(leaves) {
		if index < from || index > conf.LastIndex || len(t.state) == 0 {
			continue
		}
		l.Proposals = append(l.Proposals, proposalState(index, t.state))
	}
	sort.Slice(l.Proposals, func(i, j int) bool { return l.Proposals[i].Index < l.Proposals[j].Index })
	return l, nil
}

// --- Sets ---

// commitSet sends a SetRequest with no operations and the commit-confirmed
// extension commit, and returns the sidecar's Response if the answer
// carries one.
func commitSet(ctx context.Context, c gpb.GNMIClient, commit *gnmi_ext.Commit) (*ResponseView, error) {
	// An empty sidecar extension asks for the receipt (the Response).
	req := client.WithRequest(&gpb.SetRequest{Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_Commit{Commit: commit}}}}, &sidecarpb.Request{})
	resp, err := c.Set(ctx, req)
	if err != nil {
		return nil, err
	}
	r, ok, err := client.ResponseOf(resp)
	if err != nil {
		return nil, fmt.Errorf("the sidecar's response extension: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return responseView(r), nil
}

// statusSummary is status's first line: "in step" and what the device
// holds when all is well, else what is not, the worst first.
func statusSummary(v *StatusView) string {
	c, d := v.Configuration, v.Device
	var not []string
	if d.Fenced {
		not = append(not, "FENCED: another client is master on the device; this sidecar no longer writes to it")
	}
	if !d.Connected {
		not = append(not, "DEVICE UNREACHABLE: not connected")
	}
	if d.Repushing {
		not = append(not, "re-pushing the applied configuration")
	}
	if c.OutOfSync > 0 {
		not = append(not, fmt.Sprintf("OUT OF SYNC: %d paths (gnmi-sidecar resolve)", c.OutOfSync))
	}
	if v.Drifted != nil && *v.Drifted > 0 {
		not = append(not, fmt.Sprintf("DRIFT: %d paths changed on the device (gnmi-sidecar drift)", *v.Drifted))
	}
	if d.Retrying != nil {
		not = append(not, fmt.Sprintf("retrying proposal %d, refused by the device", *d.Retrying))
	}
	if d.Readable != nil && !*d.Readable {
		not = append(not, "the device's configuration cannot be read")
	}
	if queued := c.LastIndex - min(c.LastIndex, c.AppliedProposal); queued > 0 && c.LastIndex >= c.FirstIndex {
		not = append(not, fmt.Sprintf("applying: %d proposals not yet applied", queued))
	}
	if len(not) == 0 {
		return fmt.Sprintf("in step: the device holds the journal's configuration (applied through proposal %d)", c.AppliedProposal)
	}
	return strings.Join(not, "; ")
}
