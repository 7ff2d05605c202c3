package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestTwoSidecarsOneDeviceExactlyOneWrites: two sidecars with separate
// journals and --master-arbitration in front of one device. Each presents
// an election id of its own (term, journal incarnation); the device's
// arbitration lets exactly one write, the other reports itself fenced and
// refuses Sets with a clear error, and the device's value never flaps.
func TestTwoSidecarsOneDeviceExactlyOneWrites(t *testing.T) {
	a := startStack(t, nil, []string{"--master-arbitration"})
	b := *a // same device, a journal and a process of its own
	dir := t.TempDir()
	b.journalDir, b.tracePath = filepath.Join(dir, "journal"), filepath.Join(dir, "trace.jsonl")
	b.startSidecarOnly(t, "127.0.0.1:0") // it may be fenced at once: not waiting for its re-push
	b.client, b.clientAddr = dial(t, b.sidecar.addr), b.sidecar.addr

	set := func(s *stack, val string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := setDesc(ctx, s.client, "eth0", val)
		return err
	}
	fenced := func(s *stack) bool {
		var v struct {
			Device struct {
				Fenced bool `json:"fenced"`
			} `json:"device"`
		}
		if err := json.Unmarshal([]byte(mustOps(t, s.sidecar.addr, "status", "--output", "json")), &v); err != nil {
			t.Fatal(err)
		}
		return v.Device.Fenced
	}
	poll(t, 10*time.Second, "the second sidecar to be master or fenced", func() (bool, string) {
		var v struct {
			Configuration struct {
				Status string `json:"status"`
			} `json:"configuration"`
			Device struct {
				Connected, Fenced bool
			} `json:"device"`
		}
		r := runOpsAt(t, b.sidecar.addr, "status", "--output", "json")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil {
			return false, r.stderr
		}
		return v.Device.Fenced || v.Device.Connected && v.Configuration.Status == "COMPLETE", r.stdout
	})
	// Both write in turn until one of them is refused as fenced.
	var winner, loser *stack
	names := map[*stack]string{a: "a", &b: "b"}
	for round := 0; round < 3 && winner == nil; round++ {
		for _, s := range []*stack{a, &b} {
			err := set(s, fmt.Sprintf("%s-%d", names[s], round))
			if err == nil {
				continue
			}
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "fenced") {
				t.Fatalf("sidecar %s: Set refused with %v; want FAILED_PRECONDITION saying it is fenced", names[s], err)
			}
			loser = s
			winner = &b
			if s == &b {
				winner = a
			}
			break
		}
	}
	if loser == nil {
		t.Fatal("both sidecars kept writing to the device: fencing does not fence")
	}
	t.Logf("sidecar %s is master, %s is fenced", names[winner], names[loser])
	if !fenced(loser) || fenced(winner) {
		t.Fatalf("status: %s fenced %v, %s fenced %v; want only the loser fenced", names[loser], fenced(loser), names[winner], fenced(winner))
	}
	for n := range 5 {
		want := fmt.Sprintf("%s-final-%d", names[winner], n)
		if err := set(winner, want); err != nil {
			t.Fatalf("the master's Set: %v", err)
		}
		err := set(loser, fmt.Sprintf("%s-final-%d", names[loser], n))
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "fenced") {
			t.Fatalf("the fenced sidecar's Set: %v; want FAILED_PRECONDITION saying it is fenced", err)
		}
		if got, _ := mustGetLeaf(t, a.devClient, descPath("eth0")); got != want {
			t.Fatalf("device eth0 description = %q after the master wrote %q: the value flapped", got, want)
		}
	}
	// The refusal journals nothing.
	lastBefore := mustOps(t, loser.sidecar.addr, "journal", "list", "--output", "json")
	_ = set(loser, "refused")
	if after := mustOps(t, loser.sidecar.addr, "journal", "list", "--output", "json"); after != lastBefore {
		t.Errorf("a Set refused as fenced changed the fenced sidecar's journal")
	}
}
