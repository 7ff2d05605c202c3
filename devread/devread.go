// Package devread reads the device's configuration: what the sidecar's
// before-images, onboarding baseline, drift watcher, `diff` and `resolve`
// know of the device. Every caller reads through one Reader, so that a
// device that refuses some kinds of read is read the way it answers, and a
// device that cannot be read at all is reported as such, never taken for a
// device that holds nothing.
//
// Real devices refuse some reads (gnxi's gnmi_target answers a Get of type
// CONFIG with Unimplemented and knows no PROTO encoding; others refuse
// JSON, or answer only Subscribe ONCE). A Reader tries, in order:
//
//  1. Get of type CONFIG, in JSON_IETF, JSON, then PROTO;
//  2. Get of type ALL in the same encodings, with the state data pruned
//     (by the YANG schema when there is one, else by OpenConfig's
//     convention: anything in or under a "state" container, also inside
//     JSON values);
//  3. Subscribe ONCE in the same encodings, pruned as Get ALL.
//
// The encodings the device's Capabilities lists come first. The method
// that worked is tried first at the next read; when it stops working the
// others are tried again. A device's NotFound is "nothing there", a
// working answer. A lost connection or a refused account stops the search
// (another kind of read would not help).
package devread

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Client is what a Reader reads the device with: a gNMI client
// (gpb.GNMIClient), or anything with its Get. A Client that also has
// Subscribe (Subscriber) is read with Subscribe ONCE when it refuses every
// Get; one with Capabilities has its encodings tried in the order it lists
// them.
type Client interface {
	Get(ctx context.Context, in *gpb.GetRequest, opts ...grpc.CallOption) (*gpb.GetResponse, error)
}

// Subscriber is a Client's Subscribe (gpb.GNMIClient has it).
type Subscriber interface {
	Subscribe(ctx context.Context, opts ...grpc.CallOption) (gpb.GNMI_SubscribeClient, error)
}

type capabler interface {
	Capabilities(ctx context.Context, in *gpb.CapabilityRequest, opts ...grpc.CallOption) (*gpb.CapabilityResponse, error)
}

// Kind is a kind of read.
type Kind int

// The kinds of read, in the order a Reader tries them.
const (
	// GetConfig is a Get of type CONFIG.
	GetConfig Kind = iota + 1
	// GetAll is a Get of type ALL, pruned of state data.
	GetAll
	// SubscribeOnce is a Subscribe in mode ONCE (updates_only false),
	// read until its sync_response, pruned of state data.
	SubscribeOnce
)

func (k Kind) String() string {
	switch k {
	case GetConfig:
		return "get-config"
	case GetAll:
		return "get-all"
	case SubscribeOnce:
		return "subscribe-once"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Method is one way of reading the device: a kind of read in an encoding.
// The zero Method is none.
type Method struct {
	Kind     Kind
	Encoding gpb.Encoding
}

// String is "get-config/JSON_IETF", "get-all/PROTO", "subscribe-once/JSON",
// "" for the zero Method.
func (m Method) String() string {
	if m.Kind == 0 {
		return ""
	}
	return m.Kind.String() + "/" + m.Encoding.String()
}

// encodings are the encodings tried, in order of preference.
var encodings = [...]gpb.Encoding{gpb.Encoding_JSON_IETF, gpb.Encoding_JSON, gpb.Encoding_PROTO}

// Options configures a Reader.
type Options struct {
	// Client is the device (required).
	Client Client
	// Schema is the device's YANG schema (--yang), nil for none: it tells
	// state data (config false) from configuration in what a Get ALL or a
	// Subscribe returns.
	Schema *leaves.Schema
	// Logger, if set, receives one line when the method in use changes,
	// one WARN line when the device becomes unreadable and one INFO line
	// when it is readable again. Nil logs nothing.
	Logger *slog.Logger
}

// Status is what a Reader knows of the device's readability.
type Status struct {
	// Method is the method that last worked (zero: none yet).
	Method Method
	// Checked: a read has ended, with values or an error.
	Checked bool
	// Err is why the last read failed (nil: it worked, or none ended yet).
	// It wraps ErrUnreadable.
	Err error
}

// Readable reports whether the last read worked (false before any).
func (s Status) Readable() bool { return s.Checked && s.Err == nil }

// Reader reads the device's configuration. It is safe for concurrent use.
type Reader struct {
	opts Options
	log  *slog.Logger // nil: no logs

	mu      sync.Mutex
	current Method
	caps    []gpb.Encoding // the device's, once Capabilities answered
	capsOK  bool
	checked bool
	err     error
}

// New returns a Reader of dev, without a schema or logs.
func New(dev Client) *Reader { return NewWithOptions(Options{Client: dev}) }

// NewWithOptions returns a Reader configured by opts.
func NewWithOptions(opts Options) *Reader {
	r := &Reader{opts: opts}
	if opts.Logger != nil {
		r.log = opts.Logger.With("component", "devread")
	}
	return r
}

// Method returns the method that last worked (zero: none yet).
func (r *Reader) Method() Method {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

// Status returns what the Reader knows of the device's readability.
func (r *Reader) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Status{Method: r.current, Checked: r.checked, Err: r.err}
}

// ErrUnreadable is wrapped by every error of a device that could not be
// read: the caller knows nothing of the device's values (never "nothing
// there").
var ErrUnreadable = errors.New("the device's configuration cannot be read")

// Read returns the device's configuration at and under each path (of the
// gNMI target target, "" for none; ctx carries the credentials), as updates
// with full paths and no target, values as the device sent them (less
// their state data, for Get ALL and Subscribe ONCE). A path the device
// holds nothing at (NotFound, or an empty answer) contributes nothing.
//
// Errors wrap ErrUnreadable and are gRPC statuses: Unavailable when the
// device could not be reached (the connection is down, or it did not
// answer in time); the device's code when it refused the sidecar's
// account (Unauthenticated, PermissionDenied); the context's code when ctx
// ended; FailedPrecondition when the device answered every method with a
// refusal (or a value outside the path asked), the message then naming
// each method tried and the device's answer to it.
func (r *Reader) Read(ctx context.Context, target string, paths ...*gpb.Path) ([]*gpb.Update, error) {
	var out []*gpb.Update
	for _, p := range paths {
		values, err := r.read(ctx, target, p)
		if err != nil {
			return nil, err
		}
		out = append(out, values...)
	}
	return out, nil
}

// methods returns the methods to try: the one that last worked, then the
// others in order, the encodings the device lists first.
func (r *Reader) methods(ctx context.Context) []Method {
	r.mu.Lock()
	current, caps, capsOK := r.current, r.caps, r.capsOK
	r.mu.Unlock()
	if !capsOK {
		if c, ok := r.opts.Client.(capabler); ok {
			resp, err := c.Capabilities(ctx, &gpb.CapabilityRequest{})
			switch status.Code(err) {
			case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
				// Ask again at the next read.
			default:
				// A device that refuses Capabilities lists nothing.
				caps = resp.GetSupportedEncodings()
				r.mu.Lock()
				r.caps, r.capsOK = caps, true
				r.mu.Unlock()
			}
		}
	}
	var order []gpb.Encoding
	listed := func(e gpb.Encoding) bool {
		for _, c := range caps {
			if c == e {
				return true
			}
		}
		return false
	}
	for _, first := range []bool{true, false} {
		for _, e := range encodings {
			if listed(e) == first {
				order = append(order, e)
			}
		}
	}
	var out []Method
	if current.Kind != 0 {
		out = append(out, current)
	}
	for _, k := range []Kind{GetConfig, GetAll, SubscribeOnce} {
		for _, e := range order {
			if m := (Method{k, e}); m != current {
				out = append(out, m)
			}
		}
	}
	return out
}

func (r *Reader) read(ctx context.Context, target string, p *gpb.Path) ([]*gpb.Update, error) {
	var tried []string
	for _, m := range r.methods(ctx) {
		values, err := r.readWith(ctx, m, target, p)
		if err == nil {
			r.worked(m, tried)
			return values, nil
		}
		if ctx.Err() != nil {
			st := status.FromContextError(ctx.Err())
			return nil, unreadable(st.Code(), "reading the device's configuration at %s: %v", gnmipath.String(p), ctx.Err())
		}
		st := status.Convert(err)
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded:
			return nil, r.failed(unreadable(codes.Unavailable, "the device's configuration at %s cannot be read: the device is unreachable (%s: %s: %s)",
				gnmipath.String(p), m, st.Code(), st.Message()))
		case codes.Unauthenticated, codes.PermissionDenied:
			return nil, r.failed(unreadable(st.Code(), "the device's configuration at %s cannot be read: the device refused the sidecar's account (%s: %s: %s)",
				gnmipath.String(p), m, st.Code(), st.Message()))
		}
		tried = append(tried, fmt.Sprintf("%s: %s: %s", m, st.Code(), st.Message()))
	}
	return nil, r.failed(unreadable(codes.FailedPrecondition, "the device's configuration at %s cannot be read: the device refused every method: %s",
		gnmipath.String(p), strings.Join(tried, "; ")))
}

// worked records that m read the device (after the methods tried
// refused) and logs what changed.
func (r *Reader) worked(m Method, refused []string) {
	r.mu.Lock()
	was, wasErr, wasChecked := r.current, r.err, r.checked
	r.current, r.err, r.checked = m, nil, true
	r.mu.Unlock()
	if r.log == nil {
		return
	}
	if wasChecked && wasErr != nil {
		r.log.Info("the device's configuration can be read again", "method", m.String())
	}
	if m != was {
		attrs := []any{"method", m.String()}
		if was.Kind != 0 {
			attrs = append(attrs, "previous", was.String())
		}
		if len(refused) > 0 {
			attrs = append(attrs, "refused", strings.Join(refused, "; "))
		}
		r.log.Info("reading the device's configuration with "+m.String(), attrs...)
	}
}

// failed records that the device could not be read, logs it when it
// could be before or failed for another reason (a device unreachable at
// first that then refuses every read is still warned about), and returns
// err.
func (r *Reader) failed(err error) error {
	r.mu.Lock()
	wasErr, wasChecked := r.err, r.checked
	r.err, r.checked = err, true
	r.mu.Unlock()
	if r.log == nil || (wasChecked && wasErr != nil && status.Code(wasErr) == status.Code(err)) {
		return err
	}
	if status.Code(err) == codes.Unavailable {
		r.log.Info("cannot read the device's configuration until it is reachable", "err", err.Error())
		return err
	}
	r.log.Warn("the device's configuration cannot be read: drift, diff and resolve adopt know nothing of it until it can", "err", err.Error())
	return err
}

// errOutside: the device answered with a value outside the path asked.
func errOutside(p, full *gpb.Path) error {
	return status.Errorf(codes.FailedPrecondition, "the device answered with a value at %s, outside %s", gnmipath.String(full), gnmipath.String(p))
}

// readWith reads p with m.
func (r *Reader) readWith(ctx context.Context, m Method, target string, p *gpb.Path) ([]*gpb.Update, error) {
	var out []*gpb.Update
	add := func(n *gpb.Notification) error {
		for _, u := range n.GetUpdate() {
			full := gnmipath.Join(n.GetPrefix(), u.GetPath()) // no target
			if full.Origin == "" || gnmipath.SameOrigin(full, p) {
				// No origin is the origin asked; so is "openconfig" for
				// none (the default origin of most devices).
				full.Origin = p.GetOrigin()
			}
			if !journal.IsUnder(full, p) {
				return errOutside(p, full)
			}
			out = append(out, &gpb.Update{Path: full, Val: u.GetVal()})
		}
		return nil
	}
	switch m.Kind {
	case GetConfig, GetAll:
		typ := gpb.GetRequest_CONFIG
		if m.Kind == GetAll {
			typ = gpb.GetRequest_ALL
		}
		resp, err := r.opts.Client.Get(ctx, &gpb.GetRequest{Prefix: gnmipath.TargetPrefix(target), Path: []*gpb.Path{p}, Type: typ, Encoding: m.Encoding})
		if status.Code(err) == codes.NotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, n := range resp.GetNotification() {
			if err := add(n); err != nil {
				return nil, err
			}
		}
	case SubscribeOnce:
		if err := r.subscribeOnce(ctx, m.Encoding, target, p, add); err != nil {
			if status.Code(err) == codes.NotFound {
				return nil, nil
			}
			return nil, err
		}
	}
	if m.Kind == GetConfig {
		return out, nil
	}
	return prune(out, r.opts.Schema), nil
}

// subscribeOnce reads p with a Subscribe ONCE, giving each notification to
// add, until the sync_response (or the end of the stream).
func (r *Reader) subscribeOnce(ctx context.Context, enc gpb.Encoding, target string, p *gpb.Path, add func(*gpb.Notification) error) error {
	sub, ok := r.opts.Client.(Subscriber)
	if !ok {
		return status.Error(codes.Unimplemented, "the sidecar's client of the device has no Subscribe")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream
	stream, err := sub.Subscribe(ctx)
	if err != nil {
		return err
	}
	list := &gpb.SubscriptionList{Prefix: gnmipath.TargetPrefix(target), Mode: gpb.SubscriptionList_ONCE, Encoding: enc,
		Subscription: []*gpb.Subscription{{Path: p}}}
	if err := stream.Send(&gpb.SubscribeRequest{Request: &gpb.SubscribeRequest_Subscribe{Subscribe: list}}); err != nil {
		_, err = stream.Recv() // the stream's status says why
		return err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if resp.GetSyncResponse() {
			return nil
		}
		if n := resp.GetUpdate(); n != nil {
			if err := add(n); err != nil {
				return err
			}
		}
	}
}

// prune drops the state data of what a Get ALL or a Subscribe returned:
// updates at state paths, and state members inside JSON values.
func prune(ups []*gpb.Update, schema *leaves.Schema) []*gpb.Update {
	out := ups[:0]
	for _, u := range ups {
		if leaves.IsState(u.GetPath(), schema) {
			continue
		}
		out = append(out, &gpb.Update{Path: u.GetPath(), Val: pruneValue(u.GetPath(), u.GetVal(), schema)})
	}
	return out
}

// pruneValue returns v, at p, without its state members if it is JSON.
func pruneValue(p *gpb.Path, v *gpb.TypedValue, schema *leaves.Schema) *gpb.TypedValue {
	var raw []byte
	ietf := false
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_JsonIetfVal:
		raw, ietf = x.JsonIetfVal, true
	case *gpb.TypedValue_JsonVal:
		raw = x.JsonVal
	default:
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keeps numbers exactly
	var doc any
	if dec.Decode(&doc) != nil {
		return v // not JSON: compared as it is
	}
	elems := gnmipath.Concat(p.GetElem(), nil)
	if !pruneJSON(doc, elems, schema) {
		return v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return v
	}
	if ietf {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: b}}
}

// pruneJSON deletes the state members of doc, at elems, in place, and
// reports whether it deleted any. A list's entries (and a leaf-list's
// elements) lie at the list's path.
func pruneJSON(doc any, elems []*gpb.PathElem, schema *leaves.Schema) bool {
	changed := false
	switch x := doc.(type) {
	case map[string]any:
		for name, child := range x {
			sub := append(elems[:len(elems):len(elems)], &gpb.PathElem{Name: name})
			if leaves.IsState(&gpb.Path{Elem: sub}, schema) {
				delete(x, name)
				changed = true
				continue
			}
			if pruneJSON(child, sub, schema) {
				changed = true
			}
		}
	case []any:
		for _, e := range x {
			if pruneJSON(e, elems, schema) {
				changed = true
			}
		}
	}
	return changed
}

// unreadableError is a gRPC status that wraps ErrUnreadable.
type unreadableError struct{ st *status.Status }

func (e *unreadableError) Error() string              { return e.st.Message() }
func (e *unreadableError) GRPCStatus() *status.Status { return e.st }
func (e *unreadableError) Unwrap() error              { return ErrUnreadable }

func unreadable(code codes.Code, format string, args ...any) error {
	return &unreadableError{st: status.New(code, fmt.Sprintf(format, args...))}
}
