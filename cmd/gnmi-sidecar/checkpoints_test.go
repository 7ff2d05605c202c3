package main

// Tests of the operator's view: who did what (authors, comments), what a
// change would do (set --dry-run, journal show --diff), and named points
// to go back to (journal tag, rollback --to), through the real commands
// against a whole sidecar in front of the simulated device.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// shapeSet is one Set of the shapes real clients send against the
// simulated device's OpenConfig model, as `gnmi-sidecar set` flags:
// scalar and JSON leaves, JSON containers and lists, a replace at a
// container, deletes of leaves and entries, several operations per Set.
func shapeSet(r *rand.Rand) []string {
	intf := fmt.Sprintf("eth%d", r.IntN(4))
	entry := "/interfaces/interface[name=" + intf + "]"
	word := func() string { return fmt.Sprintf(`"w%d"`, r.IntN(50)) }
	var args []string
	for range 1 + r.IntN(3) {
		switch r.IntN(8) {
		case 0:
			args = append(args, "--update", entry+"/config/description="+word())
		case 1:
			args = append(args, "--update", fmt.Sprintf(`%s/config={"name":%q,"mtu":%d,"description":%s}`, entry, intf, 1280+r.IntN(8000), word()))
		case 2:
			args = append(args, "--replace", fmt.Sprintf(`%s/config={"name":%q,"enabled":%t}`, entry, intf, r.IntN(2) == 0))
		case 3:
			args = append(args, "--delete", entry)
		case 4:
			args = append(args, "--update", fmt.Sprintf(`/interfaces={"interface":[{"name":%q,"config":{"name":%q,"description":%s}}]}`, intf, intf, word()))
		case 5:
			args = append(args, "--update", "/system/config/hostname="+word())
		case 6:
			args = append(args, "--update", fmt.Sprintf(`%s/subinterfaces/subinterface[index=%d]={"index":%[2]d,"config":{"index":%[2]d,"description":%s}}`, entry, r.IntN(2), word()))
		default:
			args = append(args, "--delete", entry+"/config/description")
		}
	}
	return args
}

// deviceLeaves is the device's configuration, path → value text.
func deviceLeaves(t *testing.T, s *sidecartest.Sidecar) map[string]string {
	t.Helper()
	leaves, err := s.Dev.ConfigLeaves()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(leaves))
	for p, v := range leaves {
		if p == "/system/state/boot-time" {
			continue
		}
		out[p] = prototext.Format(v)
	}
	return out
}

// TestOpsRollbackToTag: after a tag and 20 changes of every shape,
// `rollback --to TAG` leaves the device exactly as it was at the tag, in
// one device SetRequest, recorded as one proposal naming the tag; a History
// snapshot at the tag's time reads that configuration; rolling the
// restore back returns to before it; a second `rollback --to` has nothing
// to do.
func TestOpsRollbackToTag(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	r := rand.New(rand.NewPCG(21, 10))
	set := func() {
		args := append([]string{"set"}, shapeSet(r)...)
		mustOps(t, s.Addr, args...)
	}
	for range 5 {
		set()
	}
	mustOps(t, s.Addr, "journal", "tag", "known-good", "--comment", "before the maintenance")
	atTag := deviceLeaves(t, s)
	var tags TagList
	decodeJSON(t, mustOps(t, s.Addr, "journal", "tags", "-o", "json"), &tags)
	if len(tags.Tags) != 1 || tags.Tags[0].Name != "known-good" || !tags.Tags[0].Restorable || tags.Tags[0].Comment != "before the maintenance" {
		t.Fatalf("journal tags: %+v", tags)
	}
	tagTime := tags.Tags[0].HistoryTime
	for range 20 {
		set()
	}
	before := deviceLeaves(t, s)
	if maps.Equal(before, atTag) {
		t.Fatal("20 random changes left the device as at the tag: the test proves nothing")
	}
	sets := s.Dev.SetCount()

	var res RestoreResult
	decodeJSON(t, mustOps(t, s.Addr, "rollback", "--to", "known-good", "--comment", "undo the maintenance", "-o", "json"), &res)
	if res.Index == 0 || res.Apply != "COMPLETE" || res.Tag != "known-good" || res.Unchanged {
		t.Fatalf("rollback --to: %+v", res)
	}
	if got := s.Dev.SetCount() - sets; got != 1 {
		t.Errorf("the rollback to the tag took %d device SetRequests, want 1", got)
	}
	if got := deviceLeaves(t, s); !maps.Equal(got, atTag) {
		t.Fatalf("after rollback --to known-good the device differs from the tag:\n%s", leafDiff(atTag, got))
	}
	show := mustOps(t, s.Addr, "journal", "show", fmt.Sprint(res.Index))
	if keyValue(t, show, "restores-tag") != "known-good" || keyValue(t, show, "comment") != "undo the maintenance" {
		t.Errorf("journal show of the restore:\n%s", show)
	}

	// History at the tag's time reads the configuration at the tag: a
	// leaf the later changes rewrote reads as it was.
	assertHistoryMatches(t, s, tagTime, atTag)

	// Nothing left to do.
	out := mustOps(t, s.Addr, "rollback", "--to", "known-good")
	if !strings.Contains(out, "nothing to roll back") {
		t.Errorf("a second rollback --to: %q", out)
	}
	// The restore is a change like any: rolling it back goes back to
	// before it, in one Set too.
	sets = s.Dev.SetCount()
	mustOps(t, s.Addr, "rollback")
	if got := deviceLeaves(t, s); !maps.Equal(got, before) {
		t.Fatalf("rolling back the restore: the device differs from before it:\n%s", leafDiff(before, got))
	}
	if got := s.Dev.SetCount() - sets; got != 1 {
		t.Errorf("rolling back the restore took %d device SetRequests, want 1", got)
	}
	// To a proposal index, and to before the first change.
	decodeJSON(t, mustOps(t, s.Addr, "rollback", "--to", "0", "-o", "json"), &res)
	if res.Unchanged || res.PointIndex != 0 {
		t.Fatalf("rollback --to 0: %+v", res)
	}
	if got := deviceLeaves(t, s); len(got) != 0 {
		t.Errorf("after rollback --to 0 the device still holds %v", got)
	}
}

// assertHistoryMatches reads the device's configuration as the journal
// held it at time at (a Get with the History extension through the
// sidecar) and checks it against want, leaf by leaf by meaning.
func assertHistoryMatches(t *testing.T, s *sidecartest.Sidecar, at int64, want map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := s.Client.Get(ctx, &gpb.GetRequest{
		Path:     []*gpb.Path{{}},
		Encoding: gpb.Encoding_JSON_IETF,
		Extension: []*gnmi_ext.Extension{{Ext: &gnmi_ext.Extension_History{History: &gnmi_ext.History{
			Request: &gnmi_ext.History_SnapshotTime{SnapshotTime: at}}}}},
	})
	if err != nil {
		t.Fatalf("History Get at the tag's time: %v", err)
	}
	got := map[string]string{}
	for _, n := range resp.GetNotification() {
		for _, u := range n.GetUpdate() {
			got[gnmipath.String(gnmipath.Join(n.GetPrefix(), u.GetPath()))] = meaning(u.GetVal())
		}
	}
	for p, v := range want {
		if strings.HasSuffix(p, "/name") || strings.HasSuffix(p, "/index") {
			continue // key leaves: the device makes them with the entry
		}
		tv := &gpb.TypedValue{}
		if err := prototext.Unmarshal([]byte(v), tv); err != nil {
			t.Fatal(err)
		}
		if got[p] != meaning(tv) {
			t.Errorf("History at the tag: %s = %q, the device held %q then", p, got[p], meaning(tv))
		}
	}
}

// meaning renders a scalar or a JSON leaf value as text: "w1" for both
// string_val w1 and JSON "w1".
func meaning(v *gpb.TypedValue) string {
	if b := v.GetJsonIetfVal(); b != nil {
		var x any
		if json.Unmarshal(b, &x) == nil {
			return fmt.Sprint(x)
		}
	}
	if s, ok := v.GetValue().(*gpb.TypedValue_StringVal); ok {
		return s.StringVal
	}
	if u, ok := v.GetValue().(*gpb.TypedValue_UintVal); ok {
		return fmt.Sprint(float64(u.UintVal))
	}
	if b, ok := v.GetValue().(*gpb.TypedValue_BoolVal); ok {
		return fmt.Sprint(b.BoolVal)
	}
	return prototext.Format(v)
}

func leafDiff(want, got map[string]string) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if got[p] != want[p] {
			fmt.Fprintf(&b, "  %s: want %q, got %q\n", p, want[p], got[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			fmt.Fprintf(&b, "  %s: want nothing, got %q\n", p, got[p])
		}
	}
	return b.String()
}

// TestOpsDryRunPredictsTheChange: for random Sets of every shape, `set
// --dry-run` journals nothing, and what it prints is exactly what the same
// Set then does (journal show --diff of its proposal).
func TestOpsDryRunPredictsTheChange(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	r := rand.New(rand.NewPCG(7, 3))
	for step := range 25 {
		ops := shapeSet(r)
		last := s.LastIndex(t)
		sets := s.Dev.SetCount()
		type diffOutput struct {
			Index uint64          `json:"index"`
			Diff  json.RawMessage `json:"diff"`
		}
		var dry diffOutput
		decodeJSON(t, mustOps(t, s.Addr, append([]string{"set", "--dry-run", "-o", "json"}, ops...)...), &dry)
		if s.LastIndex(t) != last || s.Dev.SetCount() != sets {
			t.Fatalf("step %d: the dry run journaled or sent something", step)
		}
		var done SetResult
		decodeJSON(t, mustOps(t, s.Addr, append([]string{"set", "-o", "json"}, ops...)...), &done)
		var shown diffOutput
		decodeJSON(t, mustOps(t, s.Addr, "journal", "show", fmt.Sprint(done.Index), "--diff", "-o", "json"), &shown)
		got, want := string(withoutUnknown(t, dry.Diff)), string(withoutUnknown(t, shown.Diff))
		if got != want {
			t.Fatalf("step %d: %v\ndry run:  %s\nthe Set: %s", step, ops, got, want)
		}
	}
}

// withoutUnknown drops from a dry run's diff what the journal cannot
// show of the Set afterwards: the old_unknown marks (a path the Set
// deletes where the journal held nothing), and the entries that are only
// that.
func withoutUnknown(t *testing.T, diff json.RawMessage) json.RawMessage {
	t.Helper()
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(diff, &entries); err != nil {
		t.Fatal(err)
	}
	out := []map[string]json.RawMessage{}
	for _, e := range entries {
		if _, ok := e["old_unknown"]; ok {
			delete(e, "old_unknown")
			if string(e["old"]) == "null" && string(e["new"]) == "null" {
				continue
			}
		}
		out = append(out, e)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpsAuthorship: each proposal records who sent it, by the order of
// docs/cli.md (a verified client certificate's subject, else the username
// metadata, else the address) and the comment of the sidecar extension;
// journal list, journal show and the introspection tree show them;
// nothing records a password.
func TestOpsAuthorship(t *testing.T) {
	pki := sidecartest.NewPKI(t)
	s := sidecartest.Start(t, sidecartest.Options{ServerOptions: []grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{pki.Server(t)},
			ClientCAs:    pki.Pool(),
			ClientAuth:   tls.VerifyClientCertIfGiven,
			MinVersion:   tls.VersionTLS12,
		})),
	}})
	const password = "s3cr3t-Pa55"
	anon := sidecartest.DialTLS(t, s.Addr, pki.Pool())
	bot := sidecartest.DialTLS(t, s.Addr, pki.Pool(), pki.Client(t, "netops-bot"))
	set := func(c gpb.GNMIClient, ctx context.Context, path, val string, r *sidecarpb.Request) {
		t.Helper()
		req := sidecartest.UpdateRequest(t, path, sidecartest.StringVal(val))
		if r != nil {
			req.Extension = []*gnmi_ext.Extension{sidecartest.SidecarExtension(t, r)}
		}
		if _, err := c.Set(ctx, req); err != nil {
			t.Fatalf("Set %s: %v", path, err)
		}
	}
	ctx := t.Context()
	// As gnmic --username alice --password ... sends them: metadata.
	alice := metadata.AppendToOutgoingContext(ctx, "username", "alice", "password", password)
	set(anon, alice, descA, "by alice", &sidecarpb.Request{Comment: "ticket NET-42: uplink description"})
	set(bot, ctx, descB, "by the bot", nil)
	// A certificate wins over a username.
	set(bot, metadata.AppendToOutgoingContext(ctx, "username", "mallory", "password", password), descC, "bot as mallory", nil)
	set(anon, ctx, descA, "anonymous", nil)

	tlsArgs := []string{"--tls-skip-verify"}
	var l JournalList
	decodeJSON(t, mustOps(t, s.Addr, append([]string{"journal", "list", "-o", "json"}, tlsArgs...)...), &l)
	var authors, comments []string
	for _, p := range l.Proposals {
		authors = append(authors, p.Author)
		comments = append(comments, p.Comment)
	}
	if authors[0] != "alice" || authors[1] != "cert:CN=netops-bot" || authors[2] != "cert:CN=netops-bot" || authors[3] != "127.0.0.1" {
		t.Errorf("authors %q, want alice, cert:CN=netops-bot twice, then the client's host (no port)", authors)
	}
	if comments[0] != "ticket NET-42: uplink description" || comments[1] != "" {
		t.Errorf("comments %q", comments)
	}
	text := mustOps(t, s.Addr, append([]string{"journal", "list"}, tlsArgs...)...)
	rows := tableRows(t, text, "INDEX")
	if rows[0][5] != "alice" || rows[1][5] != "cert:CN=netops-bot" {
		t.Errorf("journal list's AUTHOR column: %q", rows)
	}
	if show := mustOps(t, s.Addr, append([]string{"journal", "show", "1"}, tlsArgs...)...); keyValue(t, show, "author") != "alice" ||
		keyValue(t, show, "comment") != "ticket NET-42: uplink description" {
		t.Errorf("journal show 1:\n%s", show)
	}
	// A rollback records its own author and comment.
	mustOps(t, s.Addr, append([]string{"rollback", "--comment", "wrong port", "--username", "bob"}, tlsArgs...)...)
	show := mustOps(t, s.Addr, append([]string{"journal", "show", "4"}, tlsArgs...)...)
	if keyValue(t, show, "rollback-author") != "bob" || keyValue(t, show, "rollback-comment") != "wrong port" {
		t.Errorf("journal show 4 after its rollback:\n%s", show)
	}

	// Nothing the journal holds carries the password.
	s.Settle(t)
	err := s.Journal.Proposals(ctx, 0, 0, func(p *journal.Proposal) error {
		if strings.Contains(prototext.Format(p), password) {
			t.Errorf("proposal %d records the password: %v", p.GetIndex(), p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dump := mustOps(t, s.Addr, append([]string{"journal", "list", "-o", "json", "--limit", "0"}, tlsArgs...)...)
	if strings.Contains(dump, password) {
		t.Error("journal list shows the password")
	}
}

// TestOpsCheckpointErrors: what an operator gets wrong is refused with
// an exit code a script can test and a message saying what to do.
func TestOpsCheckpointErrors(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	mustOps(t, s.Addr, "set", "--update", descA+`="one"`)
	mustOps(t, s.Addr, "journal", "tag", "t1")
	for _, tt := range []struct {
		name string
		args []string
		code int
		msg  []string
	}{
		{"tag name in use", []string{"journal", "tag", "t1"}, exitFailed, []string{`tag "t1" exists already`, "--delete"}},
		{"tag named by a number", []string{"journal", "tag", "42"}, exitUsage, []string{"not all digits"}},
		{"tag at a proposal that does not exist", []string{"journal", "tag", "later", "99"}, exitNotFound, []string{"proposal 99 does not exist"}},
		{"delete of an unknown tag", []string{"journal", "tag", "--delete", "nope"}, exitNotFound, []string{`no tag "nope"`}},
		{"rollback to an unknown tag", []string{"rollback", "--to", "nope"}, exitNotFound, []string{`no tag "nope"`}},
		{"rollback of a proposal and to a point", []string{"rollback", "1", "--to", "t1"}, exitUsage, []string{"not both"}},
		{"rollback to a bad point", []string{"rollback", "--to", "a b"}, exitUsage, []string{"neither a proposal index nor a tag name"}},
		{"set with nothing", []string{"set"}, exitUsage, []string{"nothing to set"}},
		{"set of a value that is not JSON", []string{"set", "--update", descA + "=plain"}, exitUsage, []string{"not JSON", `'"text"'`}},
		{"set without a value", []string{"set", "--update", descA}, exitUsage, []string{"want PATH=JSON"}},
		{"a dry run refused as the Set would be", []string{"set", "--dry-run", "--update", "/interfaces/interface[name=eth0]/config/mtu=1", "--comment", strings.Repeat("x", 2000)}, exitFailed, []string{"comment is 2000 bytes long"}},
		{"a Set the device refuses", []string{"set", "--update", `/interfaces/interface[name=eth0]/config/mtu="nine"`}, exitDeviceRefused, []string{"mtu"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runOpsAt(t, s.Addr, tt.args...).wantCode(t, tt.code, tt.msg...)
		})
	}
	// Pointed at the device itself by mistake: a dry run sends nothing (a
	// device would apply the Set), a Set is applied and says so.
	sets := s.Dev.SetCount()
	runOpsAt(t, s.Target, "set", "--dry-run", "--update", descA+`="direct"`).wantCode(t, exitUnreachable, "not a gnmi-sidecar", "nothing was sent")
	if s.Dev.SetCount() != sets {
		t.Error("a dry run against the device sent it a Set")
	}
	if r := runOpsAt(t, s.Target, "set", "--update", descA+`="direct"`); r.code != 0 || !strings.Contains(r.stderr, "not a gnmi-sidecar") {
		t.Errorf("a Set sent to the device itself: exit %d, stderr %q; want 0 and a note", r.code, r.stderr)
	}

	var out TagState
	decodeJSON(t, mustOps(t, s.Addr, "journal", "tag", "--delete", "t1", "-o", "json"), &out)
	if out.Name != "t1" {
		t.Errorf("deleted tag %+v", out)
	}
}
