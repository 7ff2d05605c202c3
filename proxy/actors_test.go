package proxy_test

import (
	"context"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// Every state-changing action records who asked for it and when, in the
// journal and in the introspection tree: a commit-confirmed's commit,
// extend, confirm and cancel, the rollback a cancel starts, and a tag's
// creation and deletion.
func TestStateChangingActionsRecordAuthors(t *testing.T) {
	r := sidecartest.Start(t, sidecartest.Options{})
	p := "/interfaces/interface[name=eth0]/config/description"
	as := func(user string, req *gpb.SetRequest) *gpb.SetResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), "username", user), 20*time.Second)
		defer cancel()
		resp, err := r.Client.Set(ctx, sidecartest.AskReceipt(req))
		if err != nil {
			t.Fatalf("Set by %s: %v", user, err)
		}
		return resp
	}
	commit := func(id string, action any) *gnmi_ext.Extension { return sidecartest.CommitExtension(id, action) }
	started := time.Now()

	// c1: committed by writer, extended then cancelled by boss.
	as("writer", sidecartest.UpdateRequest(t, p, sidecartest.StringVal("c1"), commit("c1", sidecartest.CommitFor(time.Hour))))
	i1 := r.LastIndex(t)
	if cc := r.OutstandingCommit(t); cc.GetAuthor() != "writer" {
		t.Errorf("the outstanding commit-confirmed's author is %q, want writer", cc.GetAuthor())
	}
	as("boss", sidecartest.BareRequest(commit("c1", sidecartest.ExtendTo(30*time.Minute))))
	if cc := r.OutstandingCommit(t); cc.GetExtendedBy() != "boss" || cc.GetExtended().AsTime().Before(started) {
		t.Errorf("after extend: extended_by %q at %v, want boss now", cc.GetExtendedBy(), cc.GetExtended().AsTime())
	}
	as("boss", sidecartest.BareRequest(commit("c1", &gnmi_ext.CommitCancel{}),
		sidecartest.SidecarExtension(t, &sidecarpb.Request{Comment: "not tonight"})))
	p1 := r.Proposal(t, i1)
	if rb := p1.GetRollback(); rb.GetAuthor() != "boss" || rb.GetComment() != "not tonight" {
		t.Errorf("the cancel's rollback: author %q comment %q, want boss, not tonight", rb.GetAuthor(), rb.GetComment())
	}
	wantActions(t, p1, []string{journal.CommitActionExtend, journal.CommitActionCancel}, []string{"boss", "boss"}, started)

	// c2: committed by writer, confirmed by admin.
	as("writer", sidecartest.UpdateRequest(t, p, sidecartest.StringVal("c2"), commit("c2", sidecartest.CommitFor(time.Hour))))
	i2 := r.LastIndex(t)
	as("admin", sidecartest.BareRequest(commit("c2", &gnmi_ext.CommitConfirm{})))
	wantActions(t, r.Proposal(t, i2), []string{journal.CommitActionConfirm}, []string{"admin"}, started)

	// A tag made by boss, deleted by admin.
	tag := func(del bool) *gpb.SetRequest {
		return sidecartest.BareRequest(sidecartest.SidecarExtension(t, &sidecarpb.Request{Tag: &sidecarpb.Tag{Name: "good", Delete: del}, Comment: "why"}))
	}
	as("boss", tag(false))
	as("admin", tag(true))
	dels, err := r.Journal.TagDeletions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(dels) != 1 || dels[0].GetAuthor() != "admin" || dels[0].GetComment() != "why" || dels[0].GetTag().GetAuthor() != "boss" ||
		dels[0].GetDeleted().AsTime().Before(started) {
		t.Errorf("tag deletions %v, want good (made by boss) deleted by admin", dels)
	}

	// The introspection tree shows them.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for path, want := range map[string]string{
		"/proposals/proposal[index=1]/state/rollback-author":     "boss",
		"/proposals/proposal[index=1]/state/commit-cancelled-by": "boss",
		"/proposals/proposal[index=1]/state/commit-extended-by":  "boss",
		"/proposals/proposal[index=2]/state/commit-confirmed-by": "admin",
		"/proposals/proposal[index=2]/state/author":              "writer",
		"/tag-deletions/tag-deletion[seq=2]/state/author":        "admin",
		"/tag-deletions/tag-deletion[seq=2]/state/name":          "good",
	} {
		resp, err := r.Client.Get(ctx, &gpb.GetRequest{Path: []*gpb.Path{sidecartest.IntrospectionPath(t, path)}, Encoding: gpb.Encoding_JSON_IETF})
		if err != nil {
			t.Errorf("Get %s: %v", path, err)
			continue
		}
		var got *gpb.TypedValue
		for _, n := range resp.GetNotification() {
			for _, u := range n.GetUpdate() {
				got = u.GetVal()
			}
		}
		if !proto.Equal(got, sidecartest.StringVal(want)) {
			t.Errorf("Get %s = %v, want %q", path, got, want)
		}
	}
}

// wantActions checks proposal p's commit-confirmed actions: their names
// and authors, timed after started.
func wantActions(t *testing.T, p *journal.Proposal, actions, authors []string, started time.Time) {
	t.Helper()
	got := p.GetChange().GetCommitActions()
	if len(got) != len(actions) {
		t.Fatalf("proposal %d: commit actions %v, want %v by %v", p.GetIndex(), got, actions, authors)
	}
	for n, a := range got {
		if a.GetAction() != actions[n] || a.GetAuthor() != authors[n] || a.GetTime().AsTime().Before(started) {
			t.Errorf("proposal %d: commit action %d = %v, want %s by %s", p.GetIndex(), n, a, actions[n], authors[n])
		}
	}
}
