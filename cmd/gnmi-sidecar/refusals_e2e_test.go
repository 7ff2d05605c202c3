package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// postAdmin posts to a gnmi-testbed admin endpoint and requires 200 OK.
func postAdmin(t *testing.T, admin, path string) {
	t.Helper()
	resp, err := http.Post(admin+path, "", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s", path, resp.Status, body)
	}
}

// refusePath makes the device refuse every Set writing at or under path.
func refusePath(t *testing.T, admin, path string) {
	t.Helper()
	postAdmin(t, admin, "/faults/refuse?code=INVALID_ARGUMENT&path="+url.QueryEscape(path))
}

// outOfSyncPaths reads `gnmi-sidecar status --output json` and returns the
// out-of-sync paths it names.
func outOfSyncPaths(t *testing.T, addr string) []string {
	t.Helper()
	var v struct {
		Configuration struct {
			OutOfSync uint64 `json:"out_of_sync"`
		} `json:"configuration"`
		OutOfSync []struct {
			Path string `json:"path"`
		} `json:"out_of_sync"`
	}
	if err := json.Unmarshal([]byte(mustOps(t, addr, "status", "--output", "json")), &v); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range v.OutOfSync {
		out = append(out, o.Path)
	}
	if uint64(len(out)) != v.Configuration.OutOfSync {
		t.Errorf("status lists %d out-of-sync paths, configuration counts %d", len(out), v.Configuration.OutOfSync)
	}
	return out
}

// setWithin requires a Set of interface intf's description to succeed
// within d.
func setWithin(t *testing.T, s *stack, intf, val string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	if _, err := setDesc(ctx, s.client, intf, val); err != nil {
		t.Fatalf("Set of %s after the refusal: %v (after %v)", intf, err, time.Since(start).Round(time.Millisecond))
	}
}

// TestRefusedRollbackAndRepushDoNotBlock: against a real gnmi-testbed set
// to refuse one path, a rollback and a re-push the device refuses end,
// later Sets on other paths succeed within 10 s, and `status` names the
// out-of-sync path (docs/design.md "never stuck, never silent").
func TestRefusedRollbackAndRepushDoNotBlock(t *testing.T) {
	s := startStack(t, nil, nil)
	eth0 := "/interfaces/interface[name=eth0]/config/description"
	mustSetDesc(t, s.client, "eth0", "one")
	mustSetDesc(t, s.client, "eth0", "two")

	refusePath(t, s.devAdmin, eth0)
	r := runOpsAt(t, s.sidecar.addr, "rollback")
	r.wantCode(t, exitDeviceRefused, "refused the rollback of proposal 2", "out of sync")
	setWithin(t, s, "eth1", "after the refused rollback", 10*time.Second)
	if got := outOfSyncPaths(t, s.sidecar.addr); !slices.Equal(got, []string{eth0}) {
		t.Fatalf("out of sync after the refused rollback: %v, want [%s]", got, eth0)
	}
	if text := mustOps(t, s.sidecar.addr, "status"); !strings.Contains(text, eth0) || !strings.Contains(text, "ROLLBACK") {
		t.Errorf("status does not name the out-of-sync path:\n%s", text)
	}

	// A dry run of the retry names it, selected as the sidecar selects
	// (a list path covers its entries), and does nothing.
	if out := mustOps(t, s.sidecar.addr, "resolve", "retry", "/interfaces/interface", "--dry-run"); !strings.Contains(out, eth0+": ") {
		t.Errorf("resolve retry --dry-run /interfaces/interface:\n%s", out)
	}
	if out := mustOps(t, s.sidecar.addr, "resolve", "retry", "/system", "--dry-run"); !strings.Contains(out, "nothing to do") {
		t.Errorf("resolve retry --dry-run /system:\n%s", out)
	}
	if got := outOfSyncPaths(t, s.sidecar.addr); !slices.Equal(got, []string{eth0}) {
		t.Fatalf("out of sync after the dry run: %v, want [%s]", got, eth0)
	}

	// A retry while the device still refuses it leaves it out of sync.
	runOpsAt(t, s.sidecar.addr, "resolve", "retry").wantCode(t, exitFailed, "1 paths still out of sync")

	// The device restarts empty while it refuses eth1's description: the
	// re-push pushes everything else and marks that path out of sync.
	postAdmin(t, s.devAdmin, "/faults/clear")
	eth1 := "/interfaces/interface[name=eth1]/config/description"
	refusePath(t, s.devAdmin, eth1)
	postAdmin(t, s.devAdmin, "/restart")
	poll(t, 20*time.Second, "the re-push to mark eth1's description out of sync", func() (bool, string) {
		got := outOfSyncPaths(t, s.sidecar.addr)
		return slices.Contains(got, eth1), strings.Join(got, ", ")
	})
	setWithin(t, s, "eth2", "after the refused re-push", 10*time.Second)
	// The re-push got eth0's journal value ("one", the rollback's) onto
	// the empty device: that path is settled.
	if got := outOfSyncPaths(t, s.sidecar.addr); !slices.Equal(got, []string{eth1}) {
		t.Errorf("out of sync after the re-push: %v, want [%s]", got, eth1)
	}
	if v, _ := mustGetLeaf(t, s.devClient, descPath("eth0")); v != "one" {
		t.Errorf("device eth0 description = %q after the re-push, want the rolled-back value %q", v, "one")
	}

	// skip: the device's value (none: it restarted empty and refused the
	// re-push's) becomes the journal's, recorded as a proposal.
	out := mustOps(t, s.sidecar.addr, "resolve", "skip")
	if !strings.Contains(out, "skip: 1 out-of-sync paths settled") {
		t.Errorf("resolve skip printed %q", out)
	}
	if got := outOfSyncPaths(t, s.sidecar.addr); len(got) != 0 {
		t.Fatalf("out of sync after resolve skip: %v", got)
	}
	postAdmin(t, s.devAdmin, "/faults/clear")

	// adopt: a value written on the device behind the sidecar's back
	// becomes the journal's, so a re-push keeps it.
	eth3 := "/interfaces/interface[name=eth3]/config/description"
	if _, err := setDesc(context.Background(), s.devClient, "eth3", "written on the device"); err != nil {
		t.Fatal(err)
	}
	var adopted ResolveOutput
	if err := json.Unmarshal([]byte(mustOps(t, s.sidecar.addr, "resolve", "adopt", eth3, "--output", "json")), &adopted); err != nil {
		t.Fatal(err)
	}
	if adopted.Proposal == 0 {
		t.Fatalf("resolve adopt recorded no proposal: %+v", adopted)
	}
	show := mustOps(t, s.sidecar.addr, "journal", "show", fmt.Sprint(adopted.Proposal))
	for _, want := range []string{"adopted:", "true", "author:", "127.0.0.1", eth3, "written on the device"} {
		if !strings.Contains(show, want) {
			t.Errorf("journal show %d lacks %q:\n%s", adopted.Proposal, want, show)
		}
	}

	// adopt settles an out-of-sync path too: eth2's description, refused
	// by the re-push after another restart, becomes what the device has
	// there (nothing).
	eth2 := "/interfaces/interface[name=eth2]/config/description"
	refusePath(t, s.devAdmin, eth2)
	postAdmin(t, s.devAdmin, "/restart")
	poll(t, 20*time.Second, "the re-push to mark eth2's description out of sync", func() (bool, string) {
		got := outOfSyncPaths(t, s.sidecar.addr)
		return slices.Equal(got, []string{eth2}), strings.Join(got, ", ")
	})
	if out := mustOps(t, s.sidecar.addr, "resolve", "adopt", eth2); !strings.Contains(out, "adopt: 1 out-of-sync paths settled") {
		t.Errorf("resolve adopt of an out-of-sync path printed %q", out)
	}
	if got := outOfSyncPaths(t, s.sidecar.addr); len(got) != 0 {
		t.Fatalf("out of sync after resolve adopt: %v", got)
	}
	postAdmin(t, s.devAdmin, "/faults/clear")

	// Each resolve is recorded with who asked: status shows them.
	var st struct {
		Resolutions []struct {
			Author, Action string
			Settled        []string `json:"settled"`
		} `json:"resolutions"`
	}
	if err := json.Unmarshal([]byte(mustOps(t, s.sidecar.addr, "status", "--output", "json")), &st); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range st.Resolutions {
		if r.Author != "127.0.0.1" {
			t.Errorf("resolution %s recorded author %q, want the client's address", r.Action, r.Author)
		}
		actions = append(actions, fmt.Sprintf("%s:%d", r.Action, len(r.Settled)))
	}
	if want := []string{"RETRY:0", "SKIP:1", "ADOPT:0", "ADOPT:1"}; !slices.Equal(actions, want) {
		t.Errorf("resolutions (action:settled) = %v, want %v", actions, want)
	}

	// Both survive a SIGKILL of the sidecar and a device restart.
	s.sidecar.kill(t)
	s.startSidecar(t, s.sidecar.addr)
	postAdmin(t, s.devAdmin, "/restart")
	poll(t, 20*time.Second, "the re-push to restore the adopted value", func() (bool, string) {
		v, ok, err := getLeaf(context.Background(), s.devClient, descPath("eth3"))
		return err == nil && ok && v == "written on the device", fmt.Sprintf("%q %v %v", v, ok, err)
	})
	if got := outOfSyncPaths(t, s.sidecar.addr); len(got) != 0 {
		t.Errorf("out of sync after a restart: %v", got)
	}
	for _, intf := range []string{"eth1", "eth2"} {
		if _, ok, _ := getLeaf(context.Background(), s.devClient, descPath(intf)); ok {
			t.Errorf("the skipped or adopted-as-absent %s description came back on the device", intf)
		}
	}
	s.verifyTrace(t, trace.VerifyOptions{Quiescent: true})
}

// TestAsyncSetRefusedInItsTurnIsTold: an ASYNC Set, acknowledged once
// committed, that writes the path of an earlier Set the device then
// refuses is not failed for it: it is re-based and sent in its turn, and
// here the device refuses it too (as it would sent directly); its client
// finds it with the proposal index of its Set response in `journal list
// --failed` and in the introspection origin, with the device's own error.
// An independent ASYNC Set committed on top of the refused one is applied.
func TestAsyncSetRefusedInItsTurnIsTold(t *testing.T) {
	s := startStack(t, nil, nil)
	async := sidecarExt(t, &sidecarpb.Request{Mode: sidecarpb.SetMode_SET_MODE_ASYNC})
	refusePath(t, s.devAdmin, "/interfaces/interface[name=eth0]/config/description")
	postAdmin(t, s.devAdmin, "/faults/delay?d=300ms")
	bad := mustSetDesc(t, s.client, "eth0", "refused", async)
	dependent := mustSetDesc(t, s.client, "eth0", "acknowledged, then refused in its turn", async)
	independent := mustSetDesc(t, s.client, "eth1", "independent", async)
	t.Logf("proposals: refused %d, same path %d, independent %d", bad.GetIndex(), dependent.GetIndex(), independent.GetIndex())

	var listed []string
	poll(t, 20*time.Second, "journal list --failed to show both refused Sets", func() (bool, string) {
		var l JournalList
		if err := json.Unmarshal([]byte(mustOps(t, s.sidecar.addr, "journal", "list", "--failed", "--output", "json")), &l); err != nil {
			t.Fatal(err)
		}
		listed = nil
		for _, p := range l.Proposals {
			listed = append(listed, fmt.Sprintf("%d:%s", p.Index, p.ApplyStatus))
		}
		want := []string{fmt.Sprintf("%d:FAILED", bad.GetIndex()), fmt.Sprintf("%d:FAILED", dependent.GetIndex())}
		return slices.Equal(listed, want), strings.Join(listed, " ")
	})
	v, ok := mustGetLeaf(t, s.client, &gpb.Path{Origin: "gnmi-sidecar", Elem: []*gpb.PathElem{{Name: "proposals"},
		{Name: "proposal", Key: map[string]string{"index": fmt.Sprint(dependent.GetIndex())}}, {Name: "state"}, {Name: "apply-status"}}})
	if !ok || v != "FAILED" {
		t.Errorf("introspection: proposal %d apply-status = %q, want FAILED", dependent.GetIndex(), v)
	}
	show := mustOps(t, s.sidecar.addr, "journal", "show", fmt.Sprint(dependent.GetIndex()))
	if !strings.Contains(show, "refused by injected fault") || strings.Contains(show, fmt.Sprintf("proposal %d failed to apply", bad.GetIndex())) {
		t.Errorf("journal show %d does not give the device's own refusal:\n%s", dependent.GetIndex(), show)
	}
	poll(t, 10*time.Second, "the independent Set on the device", func() (bool, string) {
		v, ok, err := getLeaf(context.Background(), s.devClient, descPath("eth1"))
		return err == nil && ok && v == "independent", v
	})
	s.verifyTrace(t, trace.VerifyOptions{Quiescent: true})
}
