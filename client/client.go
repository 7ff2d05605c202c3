// Package client lets Go programs that use the standard gNMI client
// (github.com/openconfig/gnmi/proto/gnmi) speak the gnmi-sidecar's own gNMI
// extension, specified in docs/extension.md.
//
// The extension is a gnmi_ext.RegisteredExtension with id ExtensionID
// carrying the messages of package sidecarpb. On a SetRequest it selects
// when the sidecar answers (WithMode) or turns the Set into a rollback
// (Rollback). Every SetResponse from the sidecar carries a
// sidecarpb.Response naming the proposal the Set created or rolled back
// and its commit and apply statuses (ResponseOf); a Set the device rejected
// carries it as a detail of the gRPC status instead (ResponseFromError).
package client

import (
	"context"
	"fmt"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// ExtensionID is the id of the gnmi_ext.RegisteredExtension that carries
// the sidecar's messages: EID_EXPERIMENTAL (999).
const ExtensionID = gnmi_ext.ExtensionID_EID_EXPERIMENTAL

// WithMode sets the sidecar extension of req to Request{mode: mode} and
// returns req. A sidecar extension already on req is replaced in place
// (further ones are removed); other extensions are kept, in order.
// SET_MODE_SYNC, the sidecar's default, answers once the device answered;
// SET_MODE_ASYNC answers once the Set is durably committed in the journal.
func WithMode(req *gpb.SetRequest, mode sidecarpb.SetMode) *gpb.SetRequest {
	setExtension(req, &sidecarpb.Request{Mode: mode})
	return req
}

// WithRequest makes r the sidecar extension of req and returns req: the
// general form of WithMode, for a comment (a commit message recorded with
// the proposal), a dry run, or any other field of sidecarpb.Request. A
// sidecar extension already on req is replaced in place.
func WithRequest(req *gpb.SetRequest, r *sidecarpb.Request) *gpb.SetRequest {
	setExtension(req, r)
	return req
}

// Do sends req with r as its sidecar extension and returns the sidecar's
// Response and the SetResponse it came in; what names the request in
// errors. An answer without the sidecar's Response is an error.
func Do(ctx context.Context, c gpb.GNMIClient, what string, req *gpb.SetRequest, r *sidecarpb.Request, opts ...grpc.CallOption) (*sidecarpb.Response, *gpb.SetResponse, error) {
	setExtension(req, r)
	resp, err := c.Set(ctx, req, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	out, ok, err := ResponseOf(resp)
	if err != nil {
		return nil, resp, fmt.Errorf("%s: %w", what, err)
	}
	if !ok {
		return nil, resp, fmt.Errorf("%s: the SetResponse has no extension with id %d (is the target a gnmi-sidecar?)", what, ExtensionID)
	}
	return out, resp, nil
}

// DryRun asks the sidecar for the leaf-level changes req's operations
// would make to the committed configuration, in path order, without
// journaling or applying anything. The Set is validated as it would be
// for real: what the sidecar would refuse, the dry run refuses alike.
func DryRun(ctx context.Context, c gpb.GNMIClient, req *gpb.SetRequest, opts ...grpc.CallOption) ([]*sidecarpb.LeafChange, error) {
	r, _, err := Do(ctx, c, "sidecar dry run", proto.CloneOf(req), &sidecarpb.Request{DryRun: true}, opts...)
	if err != nil {
		return nil, err
	}
	return r.GetDiff(), nil
}

// Tag names a point of the journal (t.Index unset: the committed
// configuration now; set: right after that proposal's commit), or, with
// t.Delete, removes the name, and returns the tag. comment is recorded
// with it. A name in use is AlreadyExists; an unknown one (delete)
// NotFound; a bad one InvalidArgument.
func Tag(ctx context.Context, c gpb.GNMIClient, t *sidecarpb.Tag, comment string, opts ...grpc.CallOption) (*sidecarpb.TagInfo, error) {
	r, _, err := Do(ctx, c, fmt.Sprintf("sidecar tag %q", t.GetName()), &gpb.SetRequest{}, &sidecarpb.Request{Tag: t, Comment: comment}, opts...)
	if err != nil {
		return nil, err
	}
	if r.GetTag() == nil {
		return nil, fmt.Errorf("sidecar tag %q: the answer describes no tag", t.GetName())
	}
	return r.GetTag(), nil
}

// SyncFrom reads the device's configuration into the journal as a new
// baseline (the sidecar's managed paths; proposals authored "device",
// tagged baseline) and returns what it journaled: no proposal (indexes 0)
// when a new journal faces a device that holds nothing there.
func SyncFrom(ctx context.Context, c gpb.GNMIClient, comment string, opts ...grpc.CallOption) (*sidecarpb.SyncFromResult, error) {
	r, _, err := Do(ctx, c, "sidecar sync-from", &gpb.SetRequest{}, &sidecarpb.Request{SyncFrom: &sidecarpb.SyncFrom{}, Comment: comment}, opts...)
	if err != nil {
		return nil, err
	}
	if r.GetSyncFrom() == nil {
		return nil, fmt.Errorf("sidecar sync-from: the answer describes no baseline")
	}
	return r.GetSyncFrom(), nil
}

// RollbackTo rolls back every change made after a point of the journal,
// as one new change sent to the device as one SetRequest: the point tag
// names, or (tag "") right after proposal index's commit (0: before the
// journal's first change). The Response's index is that change (0, with
// Restored.unchanged, when the configuration was as at the point
// already); its Restored names the point.
func RollbackTo(ctx context.Context, c gpb.GNMIClient, tag string, index uint64, mode sidecarpb.SetMode, comment string, opts ...grpc.CallOption) (*sidecarpb.Response, *gpb.SetResponse, error) {
	rb := &sidecarpb.Rollback{ToTag: tag}
	what := fmt.Sprintf("sidecar rollback to tag %q", tag)
	if tag == "" {
		rb.ToIndex = proto.Uint64(index)
		what = fmt.Sprintf("sidecar rollback to proposal %d", index)
	}
	return Do(ctx, c, what, &gpb.SetRequest{}, &sidecarpb.Request{Mode: mode, Rollback: rb, Comment: comment}, opts...)
}

// Rollback asks the sidecar behind c to roll back proposal index (0: the
// newest change not yet rolled back) and returns the sidecar's Response
// (phase PHASE_ROLLBACK, index the proposal rolled back) and the
// SetResponse it came in. With SET_MODE_SYNC it returns once the device
// holds the rolled-back configuration; with SET_MODE_ASYNC once the
// rollback is durably committed.
//
// A refused rollback is an error wrapping the sidecar's gRPC status, so
// status.Code sees its code: NotFound if the proposal does not exist or
// (index 0) no change is in effect; FailedPrecondition if it cannot be
// rolled back now: it is not the newest change in effect (the message
// names the proposal to roll back first), it was rolled back already, it
// never took effect, retention dropped it, or another rollback or a later
// proposal is still under way. A SetResponse without the sidecar's
// extension is returned along with an error.
func Rollback(ctx context.Context, c gpb.GNMIClient, index uint64, mode sidecarpb.SetMode, opts ...grpc.CallOption) (*sidecarpb.Response, *gpb.SetResponse, error) {
	what := "the newest change"
	if index != 0 {
		what = fmt.Sprintf("proposal %d", index)
	}
	return Do(ctx, c, "sidecar rollback of "+what, &gpb.SetRequest{},
		&sidecarpb.Request{Mode: mode, Rollback: &sidecarpb.Rollback{Index: index}}, opts...)
}

// ResponseOf returns the sidecar's Response in resp's extensions; ok is
// false if there is none (resp did not come from a gnmi-sidecar), and err
// is non-nil if it does not decode.
//
// A device may use EID_EXPERIMENTAL for its own purposes, and the sidecar
// passes the device's extensions through, appending its own after them: of
// several extensions with id ExtensionID, ResponseOf decodes the last.
func ResponseOf(resp *gpb.SetResponse) (r *sidecarpb.Response, ok bool, err error) {
	exts := resp.GetExtension()
	for i := len(exts) - 1; i >= 0; i-- {
		reg := exts[i].GetRegisteredExt()
		if reg.GetId() != ExtensionID {
			continue
		}
		r = &sidecarpb.Response{}
		if err = proto.Unmarshal(reg.GetMsg(), r); err != nil {
			return nil, false, fmt.Errorf("sidecar extension (id %d) in SetResponse: not a %s: %w",
				ExtensionID, r.ProtoReflect().Descriptor().FullName(), err)
		}
		return r, true, nil
	}
	return nil, false, nil
}

// ResponseFromError returns the sidecar's Response carried as a detail of
// the gRPC status in err, or in an error err wraps. The sidecar attaches it,
// for a client that asked for its extension (WithMode, WithRequest, Do) or
// with --reply-extension=always, when a Set's change did not take effect: the device rejected it (apply
// STATUS_FAILED, with the device's own code and message) or it was aborted
// because an earlier change failed (STATUS_ABORTED). ok is false if err
// carries no Response.
func ResponseFromError(err error) (r *sidecarpb.Response, ok bool) {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return nil, false
	}
	for _, d := range st.Proto().GetDetails() {
		r = &sidecarpb.Response{}
		if d.MessageIs(r) && d.UnmarshalTo(r) == nil {
			return r, true
		}
	}
	return nil, false
}

// setExtension makes r req's only sidecar extension: in place of the
// first one, or appended if there is none. It builds a new slice, so a
// caller sharing req.Extension's array with another request is unaffected.
func setExtension(req *gpb.SetRequest, r *sidecarpb.Request) {
	msg, err := proto.Marshal(r)
	if err != nil {
		// A Request has no strings, maps or required fields: it always
		// encodes.
		panic(fmt.Sprintf("client: encode %v: %v", r, err))
	}
	ext := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{
		RegisteredExt: &gnmi_ext.RegisteredExtension{Id: ExtensionID, Msg: msg},
	}}
	exts := make([]*gnmi_ext.Extension, 0, len(req.GetExtension())+1)
	placed := false
	for _, e := range req.GetExtension() {
		switch {
		case e.GetRegisteredExt().GetId() != ExtensionID:
			exts = append(exts, e)
		case !placed:
			exts = append(exts, ext)
			placed = true
		}
	}
	if !placed {
		exts = append(exts, ext)
	}
	req.Extension = exts
}

// Resolve settles out-of-sync paths (docs/cli.md, resolve): action RETRY,
// SKIP or ADOPT, paths as gNMI path strings (required for ADOPT; for RETRY
// and SKIP they narrow the out-of-sync paths, none meaning all).
func Resolve(ctx context.Context, c gpb.GNMIClient, action sidecarpb.Resolve_Action, paths []string, opts ...grpc.CallOption) (*sidecarpb.ResolveResult, error) {
	req := &gpb.SetRequest{}
	setExtension(req, &sidecarpb.Request{Resolve: &sidecarpb.Resolve{Action: action, Paths: paths}})
	resp, err := c.Set(ctx, req, opts...)
	if err != nil {
		return nil, fmt.Errorf("sidecar resolve: %w", err)
	}
	r, ok, err := ResponseOf(resp)
	if err != nil {
		return nil, fmt.Errorf("sidecar resolve: %w", err)
	}
	if !ok || r.GetResolve() == nil {
		return nil, fmt.Errorf("sidecar resolve: the SetResponse carries no resolve result (is the target a gnmi-sidecar?)")
	}
	return r.GetResolve(), nil
}
