package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
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
// out-of-sync path (DESIGN "never stuck, never silent").
func TestRefusedRollbackAndRepushDoNotBlock(t *testing.T) {
	s := startStack(t, nil, nil)
	eth0 := "/interfaces/interface[name=eth0]/config/description"
	mustSetDesc(t, s.client, "eth0", "one")
	mustSetDesc(t, s.client, "eth0", "two")

	refusePath(t, s.devAdmin, eth0)
	r := runOpsAt(t, s.sidecar.addr, "rollback")
	r.wantCode(t, exitFailed, "refused the rollback of proposal 2", "out of sync")
	setWithin(t, s, "eth1", "after the refused rollback", 10*time.Second)
	if got := outOfSyncPaths(t, s.sidecar.addr); !slices.Equal(got, []string{eth0}) {
		t.Fatalf("out of sync after the refused rollback: %v, want [%s]", got, eth0)
	}
	if text := mustOps(t, s.sidecar.addr, "status"); !strings.Contains(text, eth0) || !strings.Contains(text, "ROLLBACK") {
		t.Errorf("status does not name the out-of-sync path:\n%s", text)
	}

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
	s.verifyTrace(t, trace.VerifyOptions{Quiescent: true})
}
