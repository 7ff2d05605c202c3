package proxy_test

import (
	"bytes"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// journalRecords is every record of the journal, as stored.
func journalRecords(t testing.TB, s *sidecartest.Sidecar) map[string][]byte {
	t.Helper()
	recs, err := s.Journal.Records(t.Context())
	if err != nil {
		t.Fatalf("journal records: %v", err)
	}
	return recs
}

// wantSameRecords fails t unless before and after hold the same keys with
// the same bytes, naming the ones that differ.
func wantSameRecords(t testing.TB, what string, before, after map[string][]byte) {
	t.Helper()
	var diff []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diff = append(diff, "removed "+strings.ToValidUTF8(k, "?"))
		} else if !bytes.Equal(v, w) {
			diff = append(diff, "changed "+strings.ToValidUTF8(k, "?"))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diff = append(diff, "added "+strings.ToValidUTF8(k, "?"))
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("%s changed the journal: %q", what, diff)
	}
}

func ext(t testing.TB, r *sidecarpb.Request) *gnmi_ext.Extension {
	return sidecartest.SidecarExtension(t, r)
}

// A refused Set changes no journal record, master arbitration included:
// every check of the request runs before the arbitration journals the
// highest election id (docs/security.md). Each request carries the
// maximum election id; after all of them, a Set with a small election id
// is still the master's.
func TestRefusedSetChangesNothing(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	p := "/interfaces/interface[name=eth0]/config/description"
	r.MustSet(t, sidecartest.UpdateRequest(t, p, sidecartest.StringVal("before"), arbitration("", 0, 1)))
	r.Settle(t)
	maxID := func() *gnmi_ext.Extension { return arbitration("", math.MaxUint64, math.MaxUint64) }
	withMax := func(req *gpb.SetRequest) *gpb.SetRequest {
		req.Extension = append(req.Extension, maxID())
		return req
	}
	update := func() *gpb.SetRequest { return sidecartest.UpdateRequest(t, p, sidecartest.StringVal("x")) }
	bare := func(exts ...*gnmi_ext.Extension) *gpb.SetRequest { return sidecartest.BareRequest(exts...) }
	one := uint64(1)
	tests := []struct {
		name string
		req  *gpb.SetRequest
		code codes.Code
		msg  string
	}{
		{"an operation without a value", withMax(&gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.Path(t, p)}}}),
			codes.InvalidArgument, "has no value"},
		{"a path of the journal's tree", withMax(&gpb.SetRequest{Update: []*gpb.Update{{Path: sidecartest.IntrospectionPath(t, "/proposals"), Val: sidecartest.StringVal("x")}}}),
			codes.InvalidArgument, "read-only journal tree"},
		{"a deprecated path element", withMax(&gpb.SetRequest{Delete: []*gpb.Path{{Element: []string{"interfaces"}}}}),
			codes.InvalidArgument, "deprecated element"},
		{"an unknown set mode", withMax(func() *gpb.SetRequest {
			q := update()
			q.Extension = append(q.Extension, ext(t, &sidecarpb.Request{Mode: 7}))
			return q
		}()),
			codes.InvalidArgument, "unknown set mode"},
		{"a comment too long", withMax(func() *gpb.SetRequest {
			q := update()
			q.Extension = append(q.Extension, ext(t, &sidecarpb.Request{Comment: strings.Repeat("x", 2000)}))
			return q
		}()), codes.InvalidArgument, "the comment is 2000 bytes long"},
		{"a rollback and a tag", withMax(bare(ext(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{}, Tag: &sidecarpb.Tag{Name: "t"}}))),
			codes.InvalidArgument, "cannot carry both"},
		{"a rollback with operations", withMax(func() *gpb.SetRequest {
			q := update()
			q.Extension = append(q.Extension, ext(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{}}))
			return q
		}()), codes.InvalidArgument, "must carry no operations"},
		{"a rollback to a bad tag name", withMax(bare(ext(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{ToTag: "bad name/"}}))),
			codes.InvalidArgument, ""},
		{"a tag named like the baseline's", withMax(bare(ext(t, &sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "baseline"}}))),
			codes.InvalidArgument, "the sidecar's own"},
		{"a tag deleted with an index", withMax(bare(ext(t, &sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "t", Delete: true, Index: &one}}))),
			codes.InvalidArgument, "leave index unset"},
		{"a resolve of a bad path", withMax(bare(ext(t, &sidecarpb.Request{Resolve: &sidecarpb.Resolve{Action: sidecarpb.Resolve_ACTION_SKIP, Paths: []string{"/a[b"}}}))),
			codes.InvalidArgument, "resolve: path"},
		{"a resolve without an action", withMax(bare(ext(t, &sidecarpb.Request{Resolve: &sidecarpb.Resolve{}}))),
			codes.InvalidArgument, "unknown action"},
		{"a commit-confirmed without an id", withMax(func() *gpb.SetRequest {
			q := update()
			q.Extension = append(q.Extension, sidecartest.CommitExtension("", sidecartest.CommitFor(time.Minute)))
			return q
		}()), codes.InvalidArgument, "id is required"},
		{"a commit-confirmed of 100 years", withMax(func() *gpb.SetRequest {
			q := update()
			q.Extension = append(q.Extension, sidecartest.CommitExtension("c", sidecartest.CommitFor(876000*time.Hour)))
			return q
		}()), codes.InvalidArgument, "limit of 1h0m0s"},
		{"a commit-confirmed without operations", withMax(bare(sidecartest.CommitExtension("c", sidecartest.CommitFor(time.Minute)))),
			codes.InvalidArgument, "carries no operations"},
		{"a confirm with operations", withMax(func() *gpb.SetRequest {
			q := update()
			q.Extension = append(q.Extension, sidecartest.CommitExtension("c", &gnmi_ext.CommitConfirm{}))
			return q
		}()), codes.InvalidArgument, "must carry no operations"},
		{"an extend beyond the limit", withMax(bare(sidecartest.CommitExtension("c", sidecartest.ExtendTo(2*time.Hour)))),
			codes.InvalidArgument, "limit of 1h0m0s"},
		{"a commit-confirmed without an action", withMax(bare(sidecartest.CommitExtension("c", nil))),
			codes.InvalidArgument, "no action"},
		{"two arbitrations", withMax(withMax(update())), codes.InvalidArgument, "more than one MasterArbitration"},
		{"an extension for the device on a rollback", withMax(bare(ext(t, &sidecarpb.Request{Rollback: &sidecarpb.Rollback{}}),
			sidecartest.RegisteredExtension(gnmi_ext.ExtensionID_EID_EXPERIMENTAL+1, []byte("x")))),
			codes.InvalidArgument, "cannot carry extensions for the device"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := journalRecords(t, r)
			_, err := r.Set(t, proto.CloneOf(tc.req))
			sidecartest.WantStatus(t, err, tc.code, tc.msg)
			wantSameRecords(t, tc.name, before, journalRecords(t, r))
		})
	}
	// The master is still the one of election id 1.
	r.MustSet(t, sidecartest.UpdateRequest(t, p, sidecartest.StringVal("after"), arbitration("", 0, 1)))
	r.WantDeviceLeaf(t, p, sidecartest.StringVal("after"))
}

// A commit-confirmed may not ask for more than --max-rollback-duration,
// neither at its commit nor by extending it; one without a duration gets
// the default, never more than the limit.
func TestCommitConfirmedMaxRollbackDuration(t *testing.T) {
	p := "/interfaces/interface[name=eth0]/config/description"
	commit := func(id string, action any) *gpb.SetRequest {
		return sidecartest.UpdateRequest(t, p, sidecartest.StringVal(id), sidecartest.CommitExtension(id, action))
	}
	t.Run("default limit", func(t *testing.T) {
		r := sidecartest.Start(t, sidecartest.Options{})
		_, err := r.Set(t, commit("c1", sidecartest.CommitFor(876000*time.Hour)))
		sidecartest.WantStatus(t, err, codes.InvalidArgument,
			"rollback_duration 876000h0m0s is above the sidecar's limit of 1h0m0s (serve --max-rollback-duration)")
		if rec := r.OutstandingCommit(t); rec != nil {
			t.Fatalf("a refused commit-confirmed left %v outstanding", rec)
		}
		r.MustSet(t, commit("c2", sidecartest.CommitFor(time.Hour)))
		_, err = r.Set(t, sidecartest.BareRequest(sidecartest.CommitExtension("c2", sidecartest.ExtendTo(time.Hour+time.Second))))
		sidecartest.WantStatus(t, err, codes.InvalidArgument, "above the sidecar's limit of 1h0m0s")
		if d := time.Until(r.OutstandingCommit(t).GetDeadline().AsTime()); d > time.Hour {
			t.Errorf("deadline in %v, want at most 1h", d)
		}
	})
	t.Run("a lower limit caps the default", func(t *testing.T) {
		r := sidecartest.Start(t, sidecartest.Options{MaxRollbackDuration: time.Minute})
		r.MustSet(t, commit("c3", &gnmi_ext.CommitRequest{}))
		if d := time.Until(r.OutstandingCommit(t).GetDeadline().AsTime()); d > time.Minute {
			t.Errorf("deadline in %v, want at most the 1m limit", d)
		}
		_, err := r.Set(t, sidecartest.BareRequest(sidecartest.CommitExtension("c3", sidecartest.ExtendTo(2*time.Minute))))
		sidecartest.WantStatus(t, err, codes.InvalidArgument, "limit of 1m0s")
	})
}
