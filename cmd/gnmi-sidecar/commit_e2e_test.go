package main

import (
	"context"
	"testing"
	"time"

	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
)

// commitFor is a commit-confirmed extension committing with id and
// rollback duration d.
func commitFor(id string, d time.Duration) *gnmi_ext.Extension {
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_Commit{Commit: &gnmi_ext.Commit{Id: id,
		Action: &gnmi_ext.Commit_Commit{Commit: &gnmi_ext.CommitRequest{RollbackDuration: durationpb.New(d)}}}}}
}

// TestCommitConfirmedSurvivesSidecarKill: the commit-confirmed timer lives
// in the journal, so a sidecar killed with SIGKILL while a commit waits for
// its confirmation still rolls it back at the deadline once it runs again:
// restarted before the deadline, it waits for it; restarted after, it rolls
// back at once.
func TestCommitConfirmedSurvivesSidecarKill(t *testing.T) {
	s := startStack(t, nil, nil)
	mustSetDesc(t, s.client, "eth0", "stable")

	desc := func() string {
		v, _ := mustGetLeaf(t, s.devClient, descPath("eth0"))
		return v
	}
	commit := func(val, id string, d time.Duration) time.Time {
		t.Helper()
		start := time.Now()
		// A new connection: the stack's may still be backing off after the
		// restart.
		mustSetDesc(t, dial(t, s.sidecar.addr), "eth0", val, commitFor(id, d))
		if got := desc(); got != val {
			t.Fatalf("device holds %q after the commit, want %q", got, val)
		}
		return start.Add(d)
	}

	// Processes started in a subtest would end with it: one test, in steps.
	{
		t.Log("step 1: restarted before the deadline")
		const wait = 6 * time.Second
		deadline := commit("candidate", "before-deadline", wait)
		s.sidecar.kill(t)
		s.startSidecar(t, s.sidecar.addr)
		if time.Now().Before(deadline) {
			if got := desc(); got != "candidate" {
				t.Fatalf("device holds %q after the restart, before the deadline; want the commit's %q", got, "candidate")
			}
		} else {
			t.Logf("restart took past the deadline; only the rollback is checked")
		}
		poll(t, wait+20*time.Second, "the unconfirmed commit to be rolled back", func() (bool, string) {
			got := desc()
			return got == "stable", "device holds " + got
		})
		if early := time.Until(deadline); early > 0 {
			t.Errorf("rolled back %v before the deadline", early)
		}
	}
	{
		t.Log("step 2: down at the deadline")
		deadline := commit("candidate-2", "after-deadline", 2*time.Second)
		s.sidecar.kill(t)
		time.Sleep(time.Until(deadline) + 500*time.Millisecond)
		s.startSidecar(t, s.sidecar.addr)
		poll(t, 20*time.Second, "the commit whose deadline passed while the sidecar was down to be rolled back", func() (bool, string) {
			got := desc()
			return got == "stable", "device holds " + got
		})
	}

	// Nothing is outstanding any more: a plain Set goes through.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := setDesc(ctx, dial(t, s.sidecar.addr), "eth0", "after"); err != nil {
		t.Fatalf("plain Set after the rollbacks: %v", err)
	}
	// A SIGKILL can land after a transition became durable and before its
	// trace line was written (the device's answer is recorded just after
	// the client's): check the trace with the lost lines put back from the
	// journal, once the sidecar stopped cleanly.
	s.stop(t)
	proposals, _ := readJournal(t, s.journalDir)
	trace.Verify(t, s.tracePath, trace.VerifyOptions{Quiescent: true, Proposals: proposals})
}
