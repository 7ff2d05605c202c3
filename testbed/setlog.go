package testbed

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// SetLogSize is how many Set RPCs the Set log keeps: the newest ones.
const SetLogSize = 10_000

// SetRecord is the device's record of one Set RPC (SetLog): what arrived,
// what the device saw of its context, which injected faults met it, and
// how it was answered. A Set still in progress (Answered false) shows what
// is known so far.
type SetRecord struct {
	// Seq numbers the Set RPCs the device received since New: 1, 2, ...
	Seq uint64
	// Arrived is when the RPC reached the device.
	Arrived time.Time
	// HasDeadline reports whether the incoming context had a deadline;
	// Deadline is the time it had left when the RPC arrived.
	HasDeadline bool
	Deadline    time.Duration
	// Metadata is the request's incoming metadata, without the
	// transport's (as LastRequest: ":authority", "content-type",
	// "user-agent", "grpc-*").
	Metadata metadata.MD
	// Request is the SetRequest as received (do not modify it).
	Request *gpb.SetRequest
	// Paths are the paths of its operations, prefix joined, in request
	// order (deletes, replaces, union_replaces, updates), as path strings.
	Paths []string
	// Faults are the injected faults that met the Set, in the order they
	// acted, e.g. "delay 1.85s", "hang", "reject UNAVAILABLE",
	// "refuse INVALID_ARGUMENT at /interfaces/interface[name=eth0]".
	Faults []string
	// Answered reports whether the device has answered; Finished is when,
	// Code and Message the answer's (codes.OK for a success).
	Answered bool
	Finished time.Time
	Code     codes.Code
	Message  string
	// Cancelled reports whether the RPC's context had ended (the client
	// cancelled, its deadline passed, the connection dropped) when the
	// device answered; CtxErr is that context's error ("context
	// canceled", "context deadline exceeded"), "" if it had not ended.
	Cancelled bool
	CtxErr    string
	// Applied reports whether the Set changed the running configuration
	// (committed). A Set whose context ended before it was committed is
	// never applied.
	Applied bool
}

// Injected reports whether an injected fault answered the Set (a
// rejection, a refusal, a hang), rather than the device's own checks or
// its client: a delay alone does not count.
func (r SetRecord) Injected() bool {
	for _, f := range r.Faults {
		if f == "hang" || len(f) > 7 && (f[:7] == "reject " || f[:7] == "refuse ") {
			return true
		}
	}
	return false
}

// setLog is the ring of SetRecords.
type setLog struct {
	next    uint64 // Seq of the next record
	records []*SetRecord
	start   int // index of the oldest record once the ring is full
}

func (l *setLog) add(r *SetRecord) {
	l.next++
	r.Seq = l.next
	if len(l.records) < SetLogSize {
		l.records = append(l.records, r)
		return
	}
	l.records[l.start] = r
	l.start = (l.start + 1) % SetLogSize
}

// SetLog returns the device's records of the Set RPCs it received, oldest
// first: the last SetLogSize of them since New or ClearSetLog, including
// those still in progress. Records are copies; their Request is shared.
func (d *Device) SetLog() []SetRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]SetRecord, 0, len(d.sets.records))
	n := len(d.sets.records)
	for i := range n {
		r := *d.sets.records[(d.sets.start+i)%n]
		r.Metadata = r.Metadata.Copy()
		r.Paths = slices.Clone(r.Paths)
		r.Faults = slices.Clone(r.Faults)
		out = append(out, r)
	}
	return out
}

// ClearSetLog empties the Set log (Seq keeps counting).
func (d *Device) ClearSetLog() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sets.records, d.sets.start = nil, 0
}

type setRecordKey struct{}

// logSet records the arrival of a Set RPC and returns the context its
// handler runs with, which carries the record, and the function that
// records its answer.
func (d *Device) logSet(ctx context.Context, req *gpb.SetRequest) (context.Context, func(error)) {
	r := &SetRecord{Arrived: time.Now(), Metadata: keptMetadata(ctx), Request: req, Paths: setPaths(req)}
	if dl, ok := ctx.Deadline(); ok {
		r.HasDeadline, r.Deadline = true, dl.Sub(r.Arrived)
	}
	d.mu.Lock()
	d.sets.add(r)
	d.mu.Unlock()
	return context.WithValue(ctx, setRecordKey{}, r), func(err error) {
		st := status.Convert(err)
		d.mu.Lock()
		defer d.mu.Unlock()
		r.Answered, r.Finished, r.Code, r.Message = true, time.Now(), st.Code(), st.Message()
		if err := ctx.Err(); err != nil {
			r.Cancelled, r.CtxErr = true, err.Error()
		}
	}
}

// noteFault adds an injected fault to the record of the Set running with
// ctx.
func (d *Device) noteFault(ctx context.Context, fault string) {
	if r, ok := ctx.Value(setRecordKey{}).(*SetRecord); ok {
		d.mu.Lock()
		r.Faults = append(r.Faults, fault)
		d.mu.Unlock()
	}
}

// noteApplied marks the Set running with ctx as committed.
func (d *Device) noteApplied(ctx context.Context) {
	if r, ok := ctx.Value(setRecordKey{}).(*SetRecord); ok {
		d.mu.Lock()
		r.Applied = true
		d.mu.Unlock()
	}
}

// setPaths renders the paths of req's operations, prefix joined (the path
// as sent if it does not join).
func setPaths(req *gpb.SetRequest) []string {
	var out []string
	add := func(p *gpb.Path) {
		if full, err := joinPath(req.GetPrefix(), p); err == nil {
			p = full
		}
		out = append(out, pathString(p))
	}
	for _, p := range req.GetDelete() {
		add(p)
	}
	for _, u := range req.GetReplace() {
		add(u.GetPath())
	}
	for _, u := range req.GetUnionReplace() {
		add(u.GetPath())
	}
	for _, u := range req.GetUpdate() {
		add(u.GetPath())
	}
	return out
}

// SetRecordJSON is a SetRecord as the admin endpoint's GET /setlog
// serves it: durations in nanoseconds, the code by name, the request in
// protobuf JSON.
type SetRecordJSON struct {
	Seq         uint64              `json:"seq"`
	Arrived     time.Time           `json:"arrived"`
	HasDeadline bool                `json:"has_deadline"`
	Deadline    time.Duration       `json:"deadline_ns"`
	Metadata    map[string][]string `json:"metadata"`
	Request     json.RawMessage     `json:"request"`
	Paths       []string            `json:"paths"`
	Faults      []string            `json:"faults,omitempty"`
	Answered    bool                `json:"answered"`
	Finished    time.Time           `json:"finished"`
	Code        string              `json:"code"`
	Message     string              `json:"message,omitempty"`
	Cancelled   bool                `json:"cancelled"`
	CtxErr      string              `json:"ctx_err,omitempty"`
	Applied     bool                `json:"applied"`
}

// JSON returns r as GET /setlog serves it.
func (r SetRecord) JSON() (SetRecordJSON, error) {
	var msg json.RawMessage
	if r.Request != nil {
		b, err := protojson.Marshal(r.Request)
		if err != nil {
			return SetRecordJSON{}, err
		}
		msg = b
	}
	return SetRecordJSON{Seq: r.Seq, Arrived: r.Arrived, HasDeadline: r.HasDeadline, Deadline: r.Deadline,
		Metadata: r.Metadata, Request: msg, Paths: r.Paths, Faults: r.Faults, Answered: r.Answered,
		Finished: r.Finished, Code: codeName(r.Code), Message: r.Message, Cancelled: r.Cancelled,
		CtxErr: r.CtxErr, Applied: r.Applied}, nil
}

// Record turns a SetRecordJSON back into a SetRecord.
func (j SetRecordJSON) Record() (SetRecord, error) {
	code, err := ParseCode(j.Code)
	if err != nil {
		return SetRecord{}, err
	}
	var req *gpb.SetRequest
	if len(j.Request) > 0 {
		req = &gpb.SetRequest{}
		if err := protojson.Unmarshal(j.Request, req); err != nil {
			return SetRecord{}, err
		}
	}
	return SetRecord{Seq: j.Seq, Arrived: j.Arrived, HasDeadline: j.HasDeadline, Deadline: j.Deadline,
		Metadata: metadata.MD(j.Metadata), Request: req, Paths: j.Paths, Faults: j.Faults, Answered: j.Answered,
		Finished: j.Finished, Code: code, Message: j.Message, Cancelled: j.Cancelled, CtxErr: j.CtxErr, Applied: j.Applied}, nil
}

// codeName is a code as the upper-case name gNMI tools print
// (RESOURCE_EXHAUSTED), which ParseCode reads back.
func codeName(c codes.Code) string {
	if c == codes.OK {
		return "OK"
	}
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}
