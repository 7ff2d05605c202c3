package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

const (
	descPath = "/interfaces/interface[name=eth0]/config/description" // string
	mtuPath  = "/interfaces/interface[name=eth0]/config/mtu"         // uint16
)

const (
	syncMode  = sidecarpb.SetMode_SET_MODE_SYNC
	asyncMode = sidecarpb.SetMode_SET_MODE_ASYNC

	phaseChange   = sidecarpb.Phase_PHASE_CHANGE
	phaseRollback = sidecarpb.Phase_PHASE_ROLLBACK

	pending    = sidecarpb.Status_STATUS_PENDING
	inProgress = sidecarpb.Status_STATUS_IN_PROGRESS
	complete   = sidecarpb.Status_STATUS_COMPLETE
	failed     = sidecarpb.Status_STATUS_FAILED
)

// --- wire format, without a sidecar ---

// TestWireFormat pins the bytes docs/extension.md shows.
func TestWireFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		send func(c gpb.GNMIClient) error
		msg  []byte // RegisteredExtension.msg
		req  []byte // the whole SetRequest; nil: not checked
		// answer is the Response the fake sidecar answers with (nil: empty).
		answer []byte
	}{{
		name: "WithMode SYNC",
		send: func(c gpb.GNMIClient) error {
			_, err := c.Set(context.Background(), client.WithMode(&gpb.SetRequest{}, syncMode))
			return err
		},
		msg: []byte{}, // msg is empty, so absent on the wire
		req: []byte{0x2a, 0x05, 0x0a, 0x03, 0x08, 0xe7, 0x07},
	}, {
		name: "WithMode ASYNC",
		send: func(c gpb.GNMIClient) error {
			_, err := c.Set(context.Background(), client.WithMode(&gpb.SetRequest{}, asyncMode))
			return err
		},
		msg: []byte{0x08, 0x01},
	}, {
		name: "Rollback 7",
		send: func(c gpb.GNMIClient) error {
			_, _, err := client.Rollback(context.Background(), c, 7, syncMode)
			return err
		},
		msg: []byte{0x12, 0x02, 0x08, 0x07},
		req: []byte{0x2a, 0x0b, 0x0a, 0x09, 0x08, 0xe7, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x07},
	}, {
		name: "Rollback newest",
		send: func(c gpb.GNMIClient) error {
			_, _, err := client.Rollback(context.Background(), c, 0, syncMode)
			return err
		},
		msg: []byte{0x12, 0x00},
	}, {
		name: "Rollback 7 ASYNC",
		send: func(c gpb.GNMIClient) error {
			_, _, err := client.Rollback(context.Background(), c, 7, asyncMode)
			return err
		},
		msg: []byte{0x08, 0x01, 0x12, 0x02, 0x08, 0x07},
	}, {
		name: "RollbackTo tag ok",
		send: func(c gpb.GNMIClient) error {
			_, _, err := client.RollbackTo(context.Background(), c, "ok", 0, syncMode, "")
			return err
		},
		msg: []byte{0x12, 0x04, 0x12, 0x02, 0x6f, 0x6b},
	}, {
		name: "Tag ok",
		send: func(c gpb.GNMIClient) error {
			_, err := client.Tag(context.Background(), c, &sidecarpb.Tag{Name: "ok"}, "")
			return err
		},
		msg:    []byte{0x32, 0x04, 0x0a, 0x02, 0x6f, 0x6b},
		answer: []byte{0x3a, 0x04, 0x0a, 0x02, 0x6f, 0x6b}, // Response{tag: {name: "ok"}}
	}, {
		name: "DryRun",
		send: func(c gpb.GNMIClient) error {
			_, err := client.DryRun(context.Background(), c, &gpb.SetRequest{})
			return err
		},
		msg: []byte{0x28, 0x01},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			answer := tc.answer
			if answer == nil {
				answer = []byte{}
			}
			c := &fakeGNMI{resp: responseWith(extension(client.ExtensionID, answer))}
			if err := tc.send(c); err != nil {
				t.Fatal(err)
			}
			exts := c.req.GetExtension()
			if len(exts) != 1 || exts[0].GetRegisteredExt().GetId() != client.ExtensionID {
				t.Fatalf("extensions %v, want one registered extension with id %d", exts, client.ExtensionID)
			}
			if got := exts[0].GetRegisteredExt().GetMsg(); !bytes.Equal(got, tc.msg) {
				t.Errorf("msg % x, want % x", got, tc.msg)
			}
			if tc.req == nil {
				return
			}
			got, err := proto.Marshal(c.req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.req) {
				t.Errorf("SetRequest % x, want % x", got, tc.req)
			}
		})
	}
}

func TestWithModeReplacesSidecarExtensionOnly(t *testing.T) {
	t.Parallel()
	arbitration := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_MasterArbitration{
		MasterArbitration: &gnmi_ext.MasterArbitration{ElectionId: &gnmi_ext.Uint128{Low: 1}},
	}}
	history := &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{}}}
	old := []*gnmi_ext.Extension{
		arbitration,
		extension(client.ExtensionID, []byte{0x12, 0x00}),
		history,
		extension(client.ExtensionID, []byte{0x08, 0x01}),
	}
	oldCopy := slices.Clone(old)
	req := &gpb.SetRequest{Extension: old}

	if got := client.WithMode(req, asyncMode); got != req {
		t.Fatalf("WithMode returned %p, want its argument %p", got, req)
	}

	want := []*gnmi_ext.Extension{arbitration, extension(client.ExtensionID, []byte{0x08, 0x01}), history}
	if diff := cmp.Diff(want, req.GetExtension(), protocmp.Transform()); diff != "" {
		t.Errorf("extensions (-want +got):\n%s", diff)
	}
	for i := range old {
		if old[i] != oldCopy[i] {
			t.Errorf("the caller's extension slice was modified at %d", i)
		}
	}
}

func TestResponseOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		resp    *gpb.SetResponse
		want    *sidecarpb.Response
		wantErr bool
	}{{
		name: "nil response",
	}, {
		name: "no extension",
		resp: &gpb.SetResponse{Timestamp: 1},
	}, {
		name: "other extensions only",
		resp: responseWith(
			extension(gnmi_ext.ExtensionID(1000), []byte{0x08, 0x07}),
			&gnmi_ext.Extension{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{}}},
		),
	}, {
		name: "change (docs/extension.md example)",
		resp: responseWith(extension(client.ExtensionID, []byte{0x08, 0x07, 0x10, 0x01, 0x18, 0x03, 0x20, 0x03})),
		want: &sidecarpb.Response{Index: 7, Phase: phaseChange, Commit: complete, Apply: complete},
	}, {
		name: "rollback (docs/extension.md example)",
		resp: responseWith(extension(client.ExtensionID, []byte{0x08, 0x07, 0x10, 0x02, 0x18, 0x03, 0x20, 0x03})),
		want: &sidecarpb.Response{Index: 7, Phase: phaseRollback, Commit: complete, Apply: complete},
	}, {
		name: "ASYNC change (docs/extension.md example)",
		resp: responseWith(extension(client.ExtensionID, []byte{0x08, 0x07, 0x10, 0x01, 0x18, 0x03, 0x20, 0x01})),
		want: &sidecarpb.Response{Index: 7, Phase: phaseChange, Commit: complete, Apply: pending},
	}, {
		name: "the device's own id 999 first, the sidecar's last",
		resp: responseWith(
			extension(client.ExtensionID, []byte("device's")),
			extension(client.ExtensionID, []byte{0x08, 0x02, 0x10, 0x01, 0x18, 0x03, 0x20, 0x01}),
		),
		want: &sidecarpb.Response{Index: 2, Phase: phaseChange, Commit: complete, Apply: pending},
	}, {
		name:    "garbage",
		resp:    responseWith(extension(client.ExtensionID, []byte("not a protobuf"))),
		wantErr: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok, err := client.ResponseOf(tc.resp)
			if tc.wantErr {
				if err == nil || !errors.Is(err, proto.Error) {
					t.Fatalf("ResponseOf = %v, %v, %v; want an error wrapping proto.Error", got, ok, err)
				}
				if got != nil || ok {
					t.Errorf("ResponseOf = %v, %v with an error; want nil, false", got, ok)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.want != nil) {
				t.Fatalf("ResponseOf ok = %v, want %v", ok, tc.want != nil)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResponseFromError(t *testing.T) {
	t.Parallel()
	r := &sidecarpb.Response{Index: 3, Phase: phaseChange, Commit: complete, Apply: failed}
	withDetails := func(details ...protoadapt.MessageV1) error {
		st, err := status.New(codes.InvalidArgument, "rejected").WithDetails(details...)
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	tests := []struct {
		name string
		err  error
		want *sidecarpb.Response
	}{
		{name: "nil"},
		{name: "not a status", err: errors.New("boom")},
		{name: "status without details", err: status.Error(codes.InvalidArgument, "rejected")},
		{name: "other details", err: withDetails(wrapperspb.String("x"))},
		{name: "Response detail", err: withDetails(wrapperspb.String("x"), r), want: r},
		{name: "wrapped", err: fmt.Errorf("set: %w", withDetails(r)), want: r},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := client.ResponseFromError(tc.err)
			if ok != (tc.want != nil) {
				t.Fatalf("ResponseFromError ok = %v, want %v", ok, tc.want != nil)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRollbackErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		c        *fakeGNMI
		code     codes.Code // of the error
		isProto  bool       // the error wraps proto.Error
		wantResp bool       // the SetResponse is returned with the error
	}{{
		name: "Set fails",
		c:    &fakeGNMI{err: status.Error(codes.NotFound, "cannot roll back proposal 7: it does not exist")},
		code: codes.NotFound,
	}, {
		name:     "no sidecar extension",
		c:        &fakeGNMI{resp: &gpb.SetResponse{Timestamp: 1}},
		code:     codes.Unknown,
		wantResp: true,
	}, {
		name:     "undecodable sidecar extension",
		c:        &fakeGNMI{resp: responseWith(extension(client.ExtensionID, []byte("not a protobuf")))},
		code:     codes.Unknown,
		isProto:  true,
		wantResp: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, resp, err := client.Rollback(context.Background(), tc.c, 7, syncMode)
			if err == nil {
				t.Fatalf("Rollback = %v, %v, nil; want an error", r, resp)
			}
			if r != nil {
				t.Errorf("Rollback returned Response %v with an error", r)
			}
			if !strings.Contains(err.Error(), "proposal 7") {
				t.Errorf("error %q does not name proposal 7", err)
			}
			if got := status.Code(err); got != tc.code {
				t.Errorf("status.Code = %v, want %v (error %v)", got, tc.code, err)
			}
			if got := errors.Is(err, proto.Error); got != tc.isProto {
				t.Errorf("errors.Is(err, proto.Error) = %v, want %v (error %v)", got, tc.isProto, err)
			}
			if (resp != nil) != tc.wantResp {
				t.Errorf("SetResponse returned: %v, want %v", resp != nil, tc.wantResp)
			}
		})
	}
}

// --- against a real sidecar ---

func TestSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mode func(*gpb.SetRequest) *gpb.SetRequest
		sync bool
	}{
		{name: "an empty extension is SYNC", mode: func(r *gpb.SetRequest) *gpb.SetRequest { return client.WithRequest(r, &sidecarpb.Request{}) }, sync: true},
		{name: "SYNC", mode: func(r *gpb.SetRequest) *gpb.SetRequest { return client.WithMode(r, syncMode) }, sync: true},
		{name: "ASYNC", mode: func(r *gpb.SetRequest) *gpb.SetRequest { return client.WithMode(r, asyncMode) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startSidecar(t)
			ctx := testContext(t)
			for i, desc := range []string{"first", "second"} {
				resp, err := s.Client.Set(ctx, tc.mode(update(t, descPath, stringVal(desc))))
				if err != nil {
					t.Fatalf("Set %q: %v", desc, err)
				}
				got := mustResponse(t, resp)
				want := &sidecarpb.Response{Index: uint64(i + 1), Phase: phaseChange, Commit: complete, Apply: complete}
				if !tc.sync {
					if !slices.Contains([]sidecarpb.Status{pending, inProgress, complete}, got.GetApply()) {
						t.Errorf("ASYNC Set %q: apply %v, want PENDING, IN_PROGRESS or COMPLETE", desc, got.GetApply())
					}
					want.Apply = got.GetApply()
				}
				if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
					t.Errorf("Set %q: Response (-want +got):\n%s", desc, diff)
				}
				if len(resp.GetResponse()) != 1 || resp.GetResponse()[0].GetOp() != gpb.UpdateResult_UPDATE {
					t.Errorf("Set %q: UpdateResults %v, want one UPDATE", desc, resp.GetResponse())
				}
				if tc.sync {
					if got := s.leaf(t, descPath); got != desc {
						t.Errorf("after SYNC Set %q the device has %q", desc, got)
					}
				} else {
					s.waitLeaf(t, descPath, desc)
				}
			}
		})
	}
}

func TestRollback(t *testing.T) {
	t.Parallel()
	for _, mode := range []sidecarpb.SetMode{syncMode, asyncMode} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			s := startSidecar(t)
			ctx := testContext(t)
			s.mustSet(t, descPath, stringVal("first"))
			s.mustSet(t, descPath, stringVal("second"))

			steps := []struct {
				index   uint64 // the proposal Rollback(0) rolls back
				present bool   // descPath is on the device afterwards
				value   string // with this value
			}{
				{index: 2, present: true, value: "first"},
				{index: 1, present: false}, // proposal 1 created the leaf
			}
			for _, step := range steps {
				got, resp, err := client.Rollback(ctx, s.Client, 0, mode)
				if err != nil {
					t.Fatalf("Rollback(0) expecting proposal %d: %v", step.index, err)
				}
				if r := mustResponse(t, resp); !proto.Equal(r, got) {
					t.Errorf("Rollback returned %v, its SetResponse carries %v", got, r)
				}
				want := &sidecarpb.Response{Index: step.index, Phase: phaseRollback, Commit: complete, Apply: complete}
				if mode == asyncMode {
					if !slices.Contains([]sidecarpb.Status{pending, inProgress, complete}, got.GetApply()) {
						t.Errorf("ASYNC rollback: apply %v, want PENDING, IN_PROGRESS or COMPLETE", got.GetApply())
					}
					want.Apply = got.GetApply()
				}
				if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
					t.Errorf("Rollback(0): Response (-want +got):\n%s", diff)
				}
				if mode == asyncMode {
					_, err := s.Agent.Wait(ctx, step.index, func(p *journal.Proposal) bool {
						return p.GetRollback().GetApply() == journal.StatusComplete
					})
					if err != nil {
						t.Fatalf("waiting for the rollback of proposal %d to be applied: %v", step.index, err)
					}
				}
				v, ok := sidecartest.DeviceLeaves(t, s.Dev)[descPath]
				if ok != step.present || v.GetStringVal() != step.value {
					t.Errorf("after rolling back proposal %d the device has %s = %v, want %q (present: %v)",
						step.index, descPath, v, step.value, step.present)
				}
			}
		})
	}
}

func TestRollbackRefused(t *testing.T) {
	t.Parallel()
	s := startSidecar(t)
	ctx := testContext(t)
	s.mustSet(t, descPath, stringVal("first"))
	s.mustSet(t, descPath, stringVal("second"))

	// One journal, so the steps run in order.
	steps := []struct {
		name  string
		index uint64
		code  codes.Code
		msg   string // the error message contains it
	}{
		{"an older change", 1, codes.FailedPrecondition, "roll back proposal 2 first"},
		{"a proposal that does not exist", 3, codes.NotFound, "proposal 3"},
		{"a far index", 1 << 63, codes.NotFound, "it does not exist"},
		{"the newest change", 2, codes.OK, ""},
		{"a rolled back change", 2, codes.FailedPrecondition, "it is already rolled back"},
		{"the remaining change", 1, codes.OK, ""},
		{"with nothing in effect", 0, codes.NotFound, "nothing to roll back"},
	}
	for _, step := range steps {
		r, _, err := client.Rollback(ctx, s.Client, step.index, syncMode)
		if got := status.Code(err); got != step.code {
			t.Fatalf("rolling back %s (%d): code %v, want %v (error %v)", step.name, step.index, got, step.code, err)
		}
		if err == nil {
			if r.GetIndex() != step.index || r.GetPhase() != phaseRollback {
				t.Errorf("rolling back %s (%d): Response %v", step.name, step.index, r)
			}
			continue
		}
		if !strings.Contains(err.Error(), step.msg) {
			t.Errorf("rolling back %s (%d): error %q does not contain %q", step.name, step.index, err, step.msg)
		}
		if r, ok := client.ResponseFromError(err); ok {
			t.Errorf("rolling back %s (%d): the error carries Response %v", step.name, step.index, r)
		}
	}
}

func TestDeviceRejectsSet(t *testing.T) {
	t.Parallel()
	s := startSidecar(t)
	ctx := testContext(t)

	// The Response comes with the refusal for a client that asked for the
	// sidecar's extension (docs/extension.md, Errors).
	_, err := s.Client.Set(ctx, client.WithMode(update(t, mtuPath, stringVal("jumbo")), syncMode))
	if got := status.Code(err); got != codes.InvalidArgument {
		t.Fatalf("Set of a string on a uint16 leaf: code %v, want InvalidArgument (error %v)", got, err)
	}
	const typeURL = "type.googleapis.com/gnmisidecar.extension.v1.Response" // docs/extension.md
	if d := status.Convert(err).Proto().GetDetails(); len(d) != 1 || d[0].GetTypeUrl() != typeURL {
		t.Errorf("status details %v, want one %s", d, typeURL)
	}
	want := &sidecarpb.Response{Index: 1, Phase: phaseChange, Commit: complete, Apply: failed}
	for _, err := range []error{err, fmt.Errorf("configure mtu: %w", err)} {
		got, ok := client.ResponseFromError(err)
		if !ok {
			t.Fatalf("ResponseFromError(%v): no Response", err)
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("ResponseFromError(%v) (-want +got):\n%s", err, diff)
		}
	}
	if leaves := sidecartest.DeviceLeaves(t, s.Dev); leaves[mtuPath] != nil {
		t.Errorf("the device has %s = %v after rejecting it", mtuPath, leaves[mtuPath])
	}

	// The failed proposal is not in effect; the next Set is proposal 2.
	resp := s.mustSet(t, mtuPath, &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 9000}})
	if got := mustResponse(t, resp).GetIndex(); got != 2 {
		t.Errorf("the Set after the rejected one is proposal %d, want 2", got)
	}
	if _, _, err := client.Rollback(ctx, s.Client, 1, syncMode); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Rollback of the failed proposal: %v, want FailedPrecondition", err)
	}

	// A client that did not ask gets the device's refusal as it is.
	_, err = s.Client.Set(ctx, update(t, mtuPath, stringVal("jumbo")))
	if got := status.Code(err); got != codes.InvalidArgument {
		t.Fatalf("Set without the sidecar's extension: code %v, want InvalidArgument (error %v)", got, err)
	}
	if r, ok := client.ResponseFromError(err); ok {
		t.Errorf("Set without the sidecar's extension: the error carries Response %v", r)
	}
}

func TestDisconnectedDevice(t *testing.T) {
	t.Parallel()
	s := startSidecar(t)
	ctx := testContext(t)
	s.Dev.Stop()
	s.WaitConnected(t, false)

	_, err := s.Client.Set(ctx, update(t, descPath, stringVal("queued")))
	if got := status.Code(err); got != codes.Unavailable {
		t.Fatalf("SYNC Set while disconnected: code %v, want Unavailable (error %v)", got, err)
	}
	if _, _, err := client.Rollback(ctx, s.Client, 0, syncMode); status.Code(err) != codes.Unavailable {
		t.Errorf("SYNC rollback while disconnected: %v, want Unavailable", err)
	}

	// The refused Sets journaled nothing: the ASYNC Set is proposal 1.
	resp, err := s.Client.Set(ctx, client.WithMode(update(t, descPath, stringVal("queued")), asyncMode))
	if err != nil {
		t.Fatalf("ASYNC Set while disconnected: %v", err)
	}
	want := &sidecarpb.Response{Index: 1, Phase: phaseChange, Commit: complete, Apply: pending}
	if diff := cmp.Diff(want, mustResponse(t, resp), protocmp.Transform()); diff != "" {
		t.Errorf("ASYNC Set while disconnected: Response (-want +got):\n%s", diff)
	}
}

// TestExtensionErrors checks the codes docs/extension.md lists for
// requests the sidecar refuses before journaling anything.
func TestExtensionErrors(t *testing.T) {
	t.Parallel()
	s := startSidecar(t)
	ctx := testContext(t)
	sidecarExt := func(msg ...byte) *gnmi_ext.Extension { return extension(client.ExtensionID, msg) }
	tests := []struct {
		name string
		ops  bool // the request carries an update
		exts []*gnmi_ext.Extension
		code codes.Code
	}{
		{"undecodable msg", true, []*gnmi_ext.Extension{sidecarExt([]byte("not a protobuf")...)}, codes.InvalidArgument},
		{"two sidecar extensions", true, []*gnmi_ext.Extension{sidecarExt(0x08, 0x01), sidecarExt(0x08, 0x01)}, codes.InvalidArgument},
		{"unknown mode", true, []*gnmi_ext.Extension{sidecarExt(0x08, 0x07)}, codes.InvalidArgument},
		{"rollback with operations", true, []*gnmi_ext.Extension{sidecarExt(0x12, 0x00)}, codes.InvalidArgument},
		{"commit-confirmed without an action", true, []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_Commit{Commit: &gnmi_ext.Commit{Id: "c1"}}}}, codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := &gpb.SetRequest{Extension: tc.exts}
			if tc.ops {
				req = update(t, descPath, stringVal("refused"))
				req.Extension = tc.exts
			}
			_, err := s.Client.Set(ctx, req)
			if got := status.Code(err); got != tc.code {
				t.Errorf("code %v, want %v (error %v)", got, tc.code, err)
			}
		})
	}
	t.Cleanup(func() {
		// Nothing was journaled, so nothing reached the device.
		if leaves := sidecartest.DeviceLeaves(t, s.Dev); leaves[descPath] != nil {
			t.Errorf("a refused Set reached the device: %s = %v", descPath, leaves[descPath])
		}
	})
}

// --- helpers ---

// sidecar is a whole sidecar on loopback (journal, agent, proxy) in front
// of a simulated device.
type sidecar struct{ *sidecartest.Sidecar }

// startSidecar starts a sidecar for the test, stops it when the test ends,
// and waits until its agent is connected to the device.
func startSidecar(t *testing.T) *sidecar {
	t.Helper()
	return &sidecar{sidecartest.Start(t, sidecartest.Options{})}
}

// mustSet sets path to v through the sidecar (SYNC).
func (s *sidecar) mustSet(t *testing.T, path string, v *gpb.TypedValue) *gpb.SetResponse {
	t.Helper()
	// An empty sidecar extension asks for the receipt.
	resp, err := s.Client.Set(testContext(t), client.WithRequest(update(t, path, v), &sidecarpb.Request{}))
	if err != nil {
		t.Fatalf("Set %s = %v: %v", path, v, err)
	}
	return resp
}

// leaf is the device's string value at path ("" if absent).
func (s *sidecar) leaf(t *testing.T, path string) string {
	t.Helper()
	return sidecartest.DeviceLeaves(t, s.Dev)[path].GetStringVal()
}

func (s *sidecar) waitLeaf(t *testing.T, path, want string) {
	t.Helper()
	sidecartest.Eventually(t, 10*time.Second, fmt.Sprintf("the device to have %s = %q", path, want), func() bool {
		return s.leaf(t, path) == want
	})
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// update is a SetRequest updating path to v.
func update(t *testing.T, path string, v *gpb.TypedValue) *gpb.SetRequest {
	t.Helper()
	return &gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, path), Val: v}}}
}

func stringVal(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: s}}
}

func mustResponse(t *testing.T, resp *gpb.SetResponse) *sidecarpb.Response {
	t.Helper()
	r, ok, err := client.ResponseOf(resp)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("SetResponse %v has no sidecar extension", resp)
	}
	return r
}

func extension(id gnmi_ext.ExtensionID, msg []byte) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{
		RegisteredExt: &gnmi_ext.RegisteredExtension{Id: id, Msg: msg},
	}}
}

func responseWith(exts ...*gnmi_ext.Extension) *gpb.SetResponse {
	return &gpb.SetResponse{Timestamp: 1, Extension: exts}
}

// fakeGNMI records the SetRequest it is sent and answers with resp, err.
type fakeGNMI struct {
	gpb.GNMIClient // nil: only Set is implemented
	req            *gpb.SetRequest
	resp           *gpb.SetResponse
	err            error
}

func (f *fakeGNMI) Set(_ context.Context, req *gpb.SetRequest, _ ...grpc.CallOption) (*gpb.SetResponse, error) {
	f.req = req
	return f.resp, f.err
}
