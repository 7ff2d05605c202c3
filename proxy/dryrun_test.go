package proxy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	leavespkg "github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// testbedSchema is the simulated device's own YANG, as make run gives it to
// the sidecar (--yang).
func testbedSchema(t *testing.T) *leavespkg.Schema { return testbed.SchemaT(t) }

func ietf(s string) *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

// change is a LeafChange as the tests write it: path, old and new as JSON
// text ("" for nothing), and whether the old value is unknown.
type change struct {
	Path, Old, New string
	Unknown        bool
}

func changesOf(diff []*sidecarpb.LeafChange) []change {
	out := []change{}
	for _, c := range diff {
		out = append(out, change{Path: c.GetPath(), Old: valueText(c.GetOld()), New: valueText(c.GetNew()), Unknown: c.GetOldUnknown()})
	}
	return out
}

func valueText(v *gpb.TypedValue) string {
	switch x := v.GetValue().(type) {
	case nil:
		return ""
	case *gpb.TypedValue_JsonIetfVal:
		return string(x.JsonIetfVal)
	case *gpb.TypedValue_StringVal:
		return fmt.Sprintf("%q", x.StringVal)
	}
	return v.String()
}

// dryRun sends req as a dry run and returns the sidecar's answer, checking
// that nothing was journaled or sent to the device.
func dryRun(t *testing.T, s *sidecartest.Sidecar, req *gpb.SetRequest, dr *sidecarpb.Request) (*sidecarpb.Response, error) {
	t.Helper()
	last, sets, values := s.LastIndex(t), s.Dev.SetCount(), journalValues(t, s)
	req = proto.CloneOf(req)
	dr = proto.CloneOf(dr)
	dr.DryRun = true
	req.Extension = append(req.Extension, sidecartest.SidecarExtension(t, dr))
	resp, err := s.Set(t, req)
	if got := s.LastIndex(t); got != last {
		t.Errorf("the dry run journaled: newest proposal %d, was %d", got, last)
	}
	if got := s.Dev.SetCount(); got != sets {
		t.Errorf("the dry run sent the device %d Sets", got-sets)
	}
	if diff := cmp.Diff(values, journalValues(t, s), cmp.Comparer(proto.Equal)); diff != "" {
		t.Errorf("the dry run changed the journal's values (-before +after):\n%s", diff)
	}
	if err != nil {
		return nil, err
	}
	return sidecartest.ResponseExtension(t, resp), nil
}

func deleteRequest(t *testing.T, paths ...string) *gpb.SetRequest {
	req := &gpb.SetRequest{}
	for _, p := range paths {
		req.Delete = append(req.Delete, sidecartest.Path(t, p))
	}
	return req
}

func replaceRequest(t *testing.T, p string, v *gpb.TypedValue) *gpb.SetRequest {
	return &gpb.SetRequest{Replace: []*gpb.Update{{Path: sidecartest.Path(t, p), Val: v}}}
}

// TestDryRunRemoves: a dry run of a Delete or a Replace lists every leaf it
// removes with the value it removes, and a path the journal holds nothing
// under as removing whatever the device holds there.
func TestDryRunRemoves(t *testing.T) {
	const sysConfig = `{"hostname":"h1","login-banner":"b1","motd-banner":"m1","domain-name":"d1"}`
	eth0 := func(t *testing.T) *gpb.SetRequest {
		return sidecartest.UpdateRequest(t, "/interfaces/interface[name=eth0]/config", ietf(`{"description":"up","mtu":1500}`))
	}
	system := func(t *testing.T) *gpb.SetRequest {
		return sidecartest.UpdateRequest(t, "/system/config", ietf(sysConfig))
	}
	for _, tt := range []struct {
		name  string
		setup []func(*testing.T) *gpb.SetRequest
		req   func(*testing.T) *gpb.SetRequest
		want  []change
	}{{
		name:  "delete of a leaf",
		setup: []func(*testing.T) *gpb.SetRequest{system},
		req:   func(t *testing.T) *gpb.SetRequest { return deleteRequest(t, "/system/config/login-banner") },
		want:  []change{{Path: "/system/config/login-banner", Old: `"b1"`}},
	}, {
		name:  "delete of a container",
		setup: []func(*testing.T) *gpb.SetRequest{system},
		req:   func(t *testing.T) *gpb.SetRequest { return deleteRequest(t, "/system/config") },
		want: []change{
			{Path: "/system/config/domain-name", Old: `"d1"`},
			{Path: "/system/config/hostname", Old: `"h1"`},
			{Path: "/system/config/login-banner", Old: `"b1"`},
			{Path: "/system/config/motd-banner", Old: `"m1"`},
		},
	}, {
		name:  "delete of a list entry",
		setup: []func(*testing.T) *gpb.SetRequest{eth0},
		req:   func(t *testing.T) *gpb.SetRequest { return deleteRequest(t, "/interfaces/interface[name=eth0]") },
		want: []change{
			{Path: "/interfaces/interface[name=eth0]", Old: `{}`},
			{Path: "/interfaces/interface[name=eth0]/config/description", Old: `"up"`},
			{Path: "/interfaces/interface[name=eth0]/config/mtu", Old: `1500`},
		},
	}, {
		name:  "replace of a container holding several leaves",
		setup: []func(*testing.T) *gpb.SetRequest{system},
		req: func(t *testing.T) *gpb.SetRequest {
			return replaceRequest(t, "/system/config", ietf(`{"hostname":"r"}`))
		},
		want: []change{
			{Path: "/system/config/domain-name", Old: `"d1"`},
			{Path: "/system/config/hostname", Old: `"h1"`, New: `"r"`},
			{Path: "/system/config/login-banner", Old: `"b1"`},
			{Path: "/system/config/motd-banner", Old: `"m1"`},
		},
	}, {
		name: "delete of a leaf the journal holds nothing at",
		req:  func(t *testing.T) *gpb.SetRequest { return deleteRequest(t, "/system/config/login-banner") },
		want: []change{{Path: "/system/config/login-banner", Unknown: true}},
	}, {
		name:  "delete of a list entry the journal holds nothing under",
		setup: []func(*testing.T) *gpb.SetRequest{eth0},
		req:   func(t *testing.T) *gpb.SetRequest { return deleteRequest(t, "/interfaces/interface[name=eth1]") },
		want:  []change{{Path: "/interfaces/interface[name=eth1]", Unknown: true}},
	}, {
		name: "replace of a container the journal holds nothing under",
		req: func(t *testing.T) *gpb.SetRequest {
			return replaceRequest(t, "/system/config", ietf(`{"hostname":"r"}`))
		},
		want: []change{
			{Path: "/system/config", Unknown: true},
			{Path: "/system/config/hostname", New: `"r"`},
		},
	}, {
		name: "replace of a leaf the journal holds nothing at",
		req: func(t *testing.T) *gpb.SetRequest {
			return replaceRequest(t, "/system/config/hostname", ietf(`"r"`))
		},
		want: []change{{Path: "/system/config/hostname", New: `"r"`, Unknown: true}},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			s := sidecartest.Start(t, sidecartest.Options{})
			for _, req := range tt.setup {
				s.MustSet(t, req(t))
			}
			r, err := dryRun(t, s, tt.req(t), &sidecarpb.Request{})
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if diff := cmp.Diff(tt.want, changesOf(r.GetDiff())); diff != "" {
				t.Errorf("dry run's diff (-want +got):\n%s", diff)
			}
			if r.GetIndex() != 0 || r.GetSchemaChecked() {
				t.Errorf("dry run answered index %d, schema_checked %t; want 0, false (no --yang)", r.GetIndex(), r.GetSchemaChecked())
			}
		})
	}
}

// TestDryRunSchema: with the device's YANG, a dry run refuses what the
// device refuses for its schema, with the code the real Set gets, and
// accepts what it accepts.
func TestDryRunSchema(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{Schema: testbedSchema(t)})
	for _, tt := range []struct {
		name    string
		req     *gpb.SetRequest
		code    codes.Code
		message string // in the dry run's refusal
	}{
		{"a string for a numeric leaf", sidecartest.UpdateRequest(t, mtuPath, ietf(`"abc"`)), codes.InvalidArgument, `"abc" is a string, not a number`},
		{"a scalar string for a numeric leaf", sidecartest.UpdateRequest(t, mtuPath, sidecartest.StringVal("abc")), codes.InvalidArgument, `"abc" is not a number`},
		{"out of range", sidecartest.UpdateRequest(t, mtuPath, ietf(`70000`)), codes.InvalidArgument, "out of its range"},
		{"a scalar out of range", sidecartest.UpdateRequest(t, mtuPath, sidecartest.UintVal(70000)), codes.InvalidArgument, "out of its range"},
		{"a string for a boolean", sidecartest.UpdateRequest(t, "/interfaces/interface[name=eth0]/config/enabled", ietf(`"yes"`)), codes.InvalidArgument, "not true or false"},
		{"a bad member of a container's JSON", sidecartest.UpdateRequest(t, "/interfaces/interface[name=eth0]/config", ietf(`{"mtu":"abc"}`)), codes.InvalidArgument, "mtu"},
		{"an unknown leaf", sidecartest.UpdateRequest(t, "/system/config/no-such-leaf", ietf(`"x"`)), codes.NotFound, `no node "no-such-leaf"`},
		{"an unknown container", sidecartest.UpdateRequest(t, "/system/no-such-container/x", ietf(`"x"`)), codes.NotFound, `no node "no-such-container"`},
		{"an unknown member of a container's JSON", sidecartest.UpdateRequest(t, "/system/config", ietf(`{"no-such-leaf":"x"}`)), codes.InvalidArgument, `member "no-such-leaf"`},
		{"a delete of an unknown leaf", deleteRequest(t, "/system/config/no-such-leaf"), codes.NotFound, `no node "no-such-leaf"`},
		{"a valid number", sidecartest.UpdateRequest(t, mtuPath, ietf(`9000`)), codes.OK, ""},
		{"a valid scalar", sidecartest.UpdateRequest(t, mtuPath, sidecartest.UintVal(9000)), codes.OK, ""},
		{"a valid container", sidecartest.UpdateRequest(t, "/system/config", ietf(`{"hostname":"h","login-banner":"b"}`)), codes.OK, ""},
		{"a valid list entry", sidecartest.UpdateRequest(t, "/interfaces/interface[name=eth3]", ietf(`{"name":"eth3","config":{"name":"eth3","mtu":1400,"enabled":true}}`)), codes.OK, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := dryRun(t, s, tt.req, &sidecarpb.Request{})
			if tt.code == codes.OK {
				if err != nil {
					t.Fatalf("dry run: %v, want it accepted", err)
				}
				if !r.GetSchemaChecked() {
					t.Error("dry run with --yang: schema_checked unset")
				}
			} else {
				st := sidecartest.WantStatus(t, err, tt.code, tt.message)
				if !strings.Contains(st.Message(), "the device would refuse this Set") {
					t.Errorf("dry run's refusal %q does not say the device would refuse the Set", st.Message())
				}
			}
			// The real Set gets the same code from the device.
			_, err = s.Set(t, tt.req)
			if got := status.Code(err); got != tt.code {
				t.Errorf("the real Set: %v; the dry run answered %v", err, tt.code)
			}
		})
	}
}

// TestDryRunRollback: a dry run of a rollback, of the newest change or to
// a point (a tag or a proposal index), answers what the rollback would
// change, leaf by leaf, journaling and sending nothing; one the journal
// would refuse is refused alike.
func TestDryRunRollback(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	s.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("d1"))) // 1
	s.MustSet(t, sidecartest.BareRequest(sidecartest.SidecarExtension(t, &sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "t1"}})))
	s.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("d2")))   // 2
	s.MustSet(t, sidecartest.UpdateRequest(t, mtuPath, sidecartest.UintVal(1400)))      // 3
	s.MustSet(t, sidecartest.UpdateRequest(t, "/system/config/hostname", ietf(`"h3"`))) // 4
	uint1400 := sidecartest.UintVal(1400).String()
	for _, tt := range []struct {
		name     string
		rollback *sidecarpb.Rollback
		index    uint64
		restored *sidecarpb.Restored
		want     []change
		code     codes.Code
		message  string
	}{{
		name:     "the newest change",
		rollback: &sidecarpb.Rollback{},
		index:    4,
		want:     []change{{Path: "/system/config/hostname", Old: `"h3"`}},
	}, {
		name:     "the newest change by its index",
		rollback: &sidecarpb.Rollback{Index: 4},
		index:    4,
		want:     []change{{Path: "/system/config/hostname", Old: `"h3"`}},
	}, {
		name:     "to a tag",
		rollback: &sidecarpb.Rollback{ToTag: "t1"},
		restored: &sidecarpb.Restored{Tag: "t1", PointIndex: 1},
		want: []change{
			{Path: descPath, Old: `"d2"`, New: `"d1"`},
			{Path: mtuPath, Old: uint1400},
			{Path: "/system/config/hostname", Old: `"h3"`},
		},
	}, {
		name:     "to a proposal index",
		rollback: &sidecarpb.Rollback{ToIndex: proto.Uint64(3)},
		restored: &sidecarpb.Restored{PointIndex: 3},
		want:     []change{{Path: "/system/config/hostname", Old: `"h3"`}},
	}, {
		name:     "to the newest change: nothing",
		rollback: &sidecarpb.Rollback{ToIndex: proto.Uint64(4)},
		restored: &sidecarpb.Restored{PointIndex: 4, Unchanged: true},
		want:     []change{},
	}, {
		name:     "a change a later one follows",
		rollback: &sidecarpb.Rollback{Index: 2},
		code:     codes.FailedPrecondition,
	}, {
		name:     "a proposal that does not exist",
		rollback: &sidecarpb.Rollback{Index: 9},
		code:     codes.NotFound,
	}, {
		name:     "to a tag that does not exist",
		rollback: &sidecarpb.Rollback{ToTag: "nope"},
		code:     codes.NotFound,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := dryRun(t, s, &gpb.SetRequest{}, &sidecarpb.Request{Rollback: tt.rollback})
			if tt.code != codes.OK {
				dry := sidecartest.WantStatus(t, err, tt.code)
				// The rollback itself is refused with the same message.
				_, err := s.Set(t, sidecartest.BareRequest(sidecartest.SidecarExtension(t, &sidecarpb.Request{Rollback: tt.rollback})))
				real := sidecartest.WantStatus(t, err, tt.code)
				if dry.Message() != real.Message() {
					t.Errorf("dry run refused with %q, the rollback with %q", dry.Message(), real.Message())
				}
				return
			}
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if diff := cmp.Diff(tt.want, changesOf(r.GetDiff())); diff != "" {
				t.Errorf("dry run's diff (-want +got):\n%s", diff)
			}
			if r.GetIndex() != tt.index {
				t.Errorf("dry run's index %d, want %d", r.GetIndex(), tt.index)
			}
			if !proto.Equal(r.GetRestored(), tt.restored) {
				t.Errorf("dry run's restored %v, want %v", r.GetRestored(), tt.restored)
			}
		})
	}
	// What the dry runs predicted is what the rollback does.
	resp := s.MustSet(t, sidecartest.BareRequest(sidecartest.SidecarExtension(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{ToTag: "t1"}})))
	if r := sidecartest.ResponseExtension(t, resp); r.GetApply() != sidecarpb.Status_STATUS_COMPLETE {
		t.Fatalf("rollback to t1: %v", r)
	}
	s.WantDeviceLeaf(t, descPath, sidecartest.StringVal("d1"))
	s.WantDeviceLeaf(t, mtuPath, nil)
}

// TestDryRunRollbackCombinations: a dry run goes with a rollback, not with
// a resolve, a tag or commit-confirmed.
func TestDryRunRollbackCombinations(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	s.MustSet(t, sidecartest.UpdateRequest(t, descPath, sidecartest.StringVal("d1")))
	_, err := s.Set(t, sidecartest.BareRequest(sidecartest.SidecarExtension(t, &sidecarpb.Request{DryRun: true,
		Rollback: &sidecarpb.Rollback{}, Tag: &sidecarpb.Tag{Name: "x"}})))
	sidecartest.WantStatus(t, err, codes.InvalidArgument, "both a rollback and a tag")
	_, err = s.Set(t, sidecartest.BareRequest(sidecartest.SidecarExtension(t, &sidecarpb.Request{DryRun: true,
		Resolve: &sidecarpb.Resolve{Action: sidecarpb.Resolve_ACTION_RETRY}})))
	sidecartest.WantStatus(t, err, codes.InvalidArgument, "both a resolve and a dry run")
}
