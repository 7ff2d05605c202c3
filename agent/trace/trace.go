// Package trace records the sidecar's journal transitions as JSON lines
// (the project's counterpart of the spec's Log module, enabled with the
// serve command's --trace flag or the GNMI_SIDECAR_TRACE environment
// variable) and checks a recorded trace against the properties of
// docs/design.md §3: Order, Sequential, rollback order, Consistency and
// Liveness.
package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// Env names the environment variable that, when set to a file path,
// turns the trace on (the serve command's --trace flag does the same).
const Env = "GNMI_SIDECAR_TRACE"

// ActionOpen is the trace line a Tracer writes when a journal is opened
// (the sidecar starts): in-memory state such as the connection is gone.
const ActionOpen = "Open"

// Line is one line of the trace: one journal transition, the
// project's counterpart of a record of the spec's Log module. Statuses and
// phases are the journal's enum names (STATUS_COMPLETE, PHASE_CHANGE, ...).
type Line struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Action string    `json:"action"`
	Index  uint64    `json:"index,omitempty"`
	// Term and Conn are the mastership as of this transition.
	Term uint64 `json:"term"`
	Conn uint64 `json:"conn"`

	Phase          string `json:"phase,omitempty"`
	Commit         string `json:"commit,omitempty"`
	Apply          string `json:"apply,omitempty"`
	RollbackIndex  uint64 `json:"rollback_index,omitempty"`
	RollbackCommit string `json:"rollback_commit,omitempty"`
	RollbackApply  string `json:"rollback_apply,omitempty"`

	Committed   *Committed `json:"committed,omitempty"`
	Applied     *Applied   `json:"applied,omitempty"`
	Status      string     `json:"status,omitempty"`
	RollingBack uint64     `json:"rolling_back,omitempty"`
	LastIndex   uint64     `json:"last_index,omitempty"`

	// Author and Comment say who proposed the change (ProposeChange) or
	// the rollback (ProposeRollback, ExpireCommit), and why; Restores is
	// the point a change going back to one names ("tag NAME" or
	// "proposal N").
	Author   string `json:"author,omitempty"`
	Comment  string `json:"comment,omitempty"`
	Restores string `json:"restores,omitempty"`

	// Aborted lists the proposals a FailApply aborted, in traces of
	// sidecars before re-basing (a FailApply now re-bases the later
	// proposals instead: a Rebase line each); read for those traces only.
	Aborted []uint64 `json:"aborted,omitempty"`
	// Values are the per-path values the transition wrote: the change's
	// values for CommitChange and CompleteApply, the rollback values for
	// CommitRollback and CompleteApplyRollback.
	Values []Value `json:"values,omitempty"`
	// Read, for CommitChange, are the device's values the commit took
	// into the configuration where the journal knew nothing (before-images
	// read from the device): they are applied values from then on.
	Read  []Value `json:"read,omitempty"`
	Error *Error  `json:"error,omitempty"`
	// Recovered marks a line Recover put back: the transition is in the
	// journal, its line was lost when the sidecar was killed. A Tracer
	// never writes it.
	Recovered bool `json:"recovered,omitempty"`
}

// Committed is configuration.committed.
type Committed struct {
	Proposal uint64 `json:"proposal"`
	Index    uint64 `json:"index"`
}

// Applied is configuration.applied.
type Applied struct {
	Proposal uint64 `json:"proposal"`
	Index    uint64 `json:"index"`
	Term     uint64 `json:"term"`
	Target   uint64 `json:"target"`
}

// Value is one path's value: Value is the gNMI TypedValue in protojson
// form, absent for a tombstone (Deleted).
type Value struct {
	Path    string          `json:"path"`
	Index   uint64          `json:"index"`
	Deleted bool            `json:"deleted,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`
}

// Error is a failure's gRPC code and message.
type Error struct {
	Code    uint32 `json:"code"`
	Message string `json:"message"`
}

// Tracer writes the trace: one JSON line per journal transition. Its
// Observe method is a journal.Options.Observer. Write errors are reported
// once through Err and otherwise ignored: the trace must never stop the
// sidecar.
type Tracer struct {
	mu   sync.Mutex
	w    io.Writer
	seq  uint64
	term uint64
	conn uint64
	err  error
}

// NewTracer returns a Tracer writing to w.
func NewTracer(w io.Writer) *Tracer { return &Tracer{w: w} }

// OpenFile returns a Tracer appending to the file at path (created if
// missing, so one file can hold several sidecar runs) and the file, for the
// caller to close after the journal.
func OpenFile(path string) (*Tracer, io.Closer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("trace: %w", err)
	}
	return NewTracer(f), f, nil
}

// FromEnv is OpenFile of the path in the Env environment variable, or nil
// and no error when it is unset or empty.
func FromEnv() (*Tracer, io.Closer, error) {
	path := os.Getenv(Env)
	if path == "" {
		return nil, nil, nil
	}
	return OpenFile(path)
}

// Begin writes the Open line with the journal's current mastership. Call it
// once the journal is open, before the agent runs.
func (t *Tracer) Begin(m *journal.Mastership) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.term, t.conn = m.GetTerm(), m.GetConn()
	t.write(&Line{Time: time.Now(), Action: ActionOpen})
}

// End writes the Close line: the sidecar stopped cleanly and every
// transition is in the trace. Call it once the journal is closed.
func (t *Tracer) End() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.write(&Line{Time: time.Now(), Action: ActionClose})
}

// Observe records one transition.
func (t *Tracer) Observe(e journal.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := e.Mastership; m != nil {
		t.term, t.conn = m.GetTerm(), m.GetConn()
	}
	l := &Line{Time: e.Time, Action: string(e.Action), Index: e.Index}
	if p := e.Proposal; p != nil {
		ch, rb := p.GetChange(), p.GetRollback()
		l.Phase = p.GetPhase().String()
		l.Commit, l.Apply = ch.GetCommit().String(), ch.GetApply().String()
		l.RollbackIndex = rb.GetIndex()
		l.RollbackCommit, l.RollbackApply = rb.GetCommit().String(), rb.GetApply().String()
		if err := ch.GetError(); err != nil {
			l.Error = &Error{Code: err.GetCode(), Message: err.GetMessage()}
		}
		switch e.Action {
		case journal.ActionProposeChange:
			l.Author, l.Comment = ch.GetAuthor(), ch.GetComment()
			if r := ch.GetRestores(); r != nil {
				l.Restores = fmt.Sprintf("proposal %d", r.GetIndex())
				if r.GetTag() != "" {
					l.Restores = "tag " + r.GetTag()
				}
			}
		case journal.ActionProposeRollback:
			l.Author, l.Comment = rb.GetAuthor(), rb.GetComment()
		}
		switch e.Action {
		case journal.ActionCommitChange, journal.ActionCompleteApply:
			l.Values = traceValues(ch.GetValues())
			l.Read = traceValues(e.Read)
		case journal.ActionCommitRollback, journal.ActionCompleteApplyRollback, journal.ActionFailApplyRollback:
			l.Values = traceValues(rb.GetValues())
		}
	}
	if c := e.Configuration; c != nil {
		l.Committed = &Committed{Proposal: c.GetCommitted().GetProposal(), Index: c.GetCommitted().GetIndex()}
		a := c.GetApplied()
		l.Applied = &Applied{Proposal: a.GetProposal(), Index: a.GetIndex(), Term: a.GetTerm(), Target: a.GetTarget()}
		l.Status = c.GetStatus().String()
		l.RollingBack = c.GetRollingBack()
		l.LastIndex = c.GetLastIndex()
	}
	t.write(l)
}

// Err returns the first write error, if any.
func (t *Tracer) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *Tracer) write(l *Line) {
	t.seq++
	l.Seq, l.Term, l.Conn = t.seq, t.term, t.conn
	b, err := json.Marshal(l)
	if err == nil {
		_, err = t.w.Write(append(b, '\n'))
	}
	if err != nil && t.err == nil {
		t.err = fmt.Errorf("trace: %w", err)
	}
}

func traceValues(pvs []*journal.PathValue) []Value {
	out := make([]Value, 0, len(pvs))
	for _, pv := range pvs {
		v := Value{Path: gnmipath.String(pv.GetPath()), Index: pv.GetIndex(), Deleted: pv.GetDeleted()}
		if !pv.GetDeleted() && pv.GetValue() != nil {
			if b, err := protojson.Marshal(pv.GetValue()); err == nil {
				v.Value = b
			}
		}
		out = append(out, v)
	}
	return out
}
