package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent/trace"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed/diskfault"
)

// TestJournalDiskFaultsMidRun fills the journal's disk, then makes it
// read-only, while clients keep sending Sets to the running sidecar: the
// Sets are refused with RESOURCE_EXHAUSTED, then UNAVAILABLE, saying why,
// and the sidecar serves again by itself once the fault is gone. At the end
// every acknowledged Set is journaled, applied and on the device, and no
// refused one is journaled.
func TestJournalDiskFaultsMidRun(t *testing.T) {
	const clients, reserve = 3, 8 << 20
	mnt := diskfault.Tmpfs(t, 32<<20)
	s := newStack(t, nil, []string{"--journal-min-free", fmt.Sprint(reserve)})
	s.journalDir = filepath.Join(mnt, "journal")
	s.startSidecar(t, "127.0.0.1:0")
	writers, _, stopWriters := startWriters(t, s.sidecar.addr, clients, 0, rand.Uint64())

	for _, fault := range []struct {
		name string
		make func() (undo func())
		code codes.Code
		msg  string
	}{
		{"disk full", func() func() { return diskfault.Fill(t, mnt, reserve/2) },
			codes.ResourceExhausted, "the sidecar's journal is short of disk space: nothing was journaled"},
		{"read-only", func() func() { return diskfault.ReadOnly(t, s.journalDir) },
			codes.Unavailable, "the sidecar's journal cannot be written (its filesystem is read-only): nothing was journaled"},
	} {
		waitAcked(t, writers, 5, "before: "+fault.name)
		undo := fault.make()
		var before int64
		for _, w := range writers {
			before += w.refusals(fault.code)
		}
		poll(t, 20*time.Second, fmt.Sprintf("5 Sets refused with %v", fault.code), func() (bool, string) {
			n := -before
			for _, w := range writers {
				n += w.refusals(fault.code)
			}
			return n >= 5, fmt.Sprintf("%d refused", n)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := setDesc(ctx, s.client, "eth0", "during "+fault.name)
		cancel()
		if st := status.Convert(err); st.Code() != fault.code || !strings.Contains(st.Message(), fault.msg) {
			t.Errorf("%s: Set answered %v; want %v saying %q", fault.name, err, fault.code, fault.msg)
		}
		undo()
		waitAcked(t, writers, 5, "after: "+fault.name)
	}
	stopWriters()

	select {
	case <-s.sidecar.done:
		t.Fatalf("the sidecar exited: %v", s.sidecar.err)
	default:
	}
	s.waitQuiescent(t, 20*time.Second, nil)
	cfg, err := deviceConfig(t, s.devAdmin)
	if err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	checkJournal(t, s.journalDir, writers, cfg)
}

// TestJournalWriteFailureStopsTheSidecar makes a write fail inside the
// journal's database (the directory turns immutable: Badger's next
// memtable cannot be created): the Set gets UNAVAILABLE saying the journal
// failed, the sidecar exits non-zero naming the file, and once the
// directory is writable again a restart serves with every acknowledged Set.
func TestJournalWriteFailureStopsTheSidecar(t *testing.T) {
	mnt := diskfault.Tmpfs(t, 256<<20)
	s := newStack(t, nil, nil)
	s.journalDir = filepath.Join(mnt, "journal")
	s.startSidecar(t, "127.0.0.1:0")
	mustSetDesc(t, s.client, "eth0", "before")

	restore := diskfault.Immutable(t, s.journalDir)
	// Sets of 10 KB of random letters (the journal stores its records
	// compressed) until Badger needs a new value-log file (4 MiB each; a
	// proposal's record holds its value four times: as sent, as its unit,
	// in the change's values and in the rollback's) or memtable file.
	letters := rand.New(rand.NewPCG(1, 2))
	var acked []string
	var failure error
	for k := 0; failure == nil; k++ {
		if k == 1000 {
			t.Fatal("1000 Sets of 10 KB and no new value-log or memtable file")
		}
		random := make([]byte, 10_000)
		for i := range random {
			random[i] = byte('a' + letters.IntN(26))
		}
		value := fmt.Sprintf("%04d-%s", k, random)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, failure = setDesc(ctx, s.client, "eth1", value)
		cancel()
		if failure == nil {
			acked = append(acked, value)
		}
	}
	t.Logf("%d Sets acknowledged, then: %v", len(acked), failure)
	// The write that failed may be this Set's own, or one of the agent's
	// for it once journaled.
	switch st := status.Convert(failure); {
	case st.Code() == codes.Unavailable && strings.Contains(st.Message(), "the sidecar's journal failed a write to its disk"):
	case st.Code() == codes.Aborted && strings.Contains(st.Message(), "the Set is journaled as proposal"):
	default:
		t.Errorf("the Set whose write failed: %v; want UNAVAILABLE saying the journal failed, or ABORTED saying the Set is journaled", failure)
	}

	exited, err := s.sidecar.exited(30 * time.Second)
	if !exited {
		t.Fatal("the sidecar still runs 30 s after its journal failed")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("the sidecar exited with %v; want status 1", err)
	}
	stderr := s.sidecar.errOut.text()
	for _, want := range []string{"the journal takes no more reads or writes", "start it again once the cause is fixed"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the sidecar's stderr does not say %q:\n%s", want, stderr)
		}
	}
	if !regexp.MustCompile(`\.(mem|vlog): operation not permitted`).MatchString(stderr) {
		t.Errorf("the sidecar's stderr does not name the memtable or value-log file it could not create:\n%s", stderr)
	}

	restore()
	s.startSidecar(t, "127.0.0.1:0")
	// The device holds the last acknowledged value, or the one in doubt.
	if v, _ := mustGetLeaf(t, s.devClient, descPath("eth1")); len(acked) > 0 && v[:4] < acked[len(acked)-1][:4] {
		t.Errorf("after the restart the device holds eth1 %.10q..., older than the last acknowledged %.10q...", v, acked[len(acked)-1])
	}
	mustSetDesc(t, s.client, "eth0", "after")
	s.waitQuiescent(t, 20*time.Second, nil)
}

// waitAcked waits until every writer has n more Sets acknowledged.
func waitAcked(t *testing.T, writers []*writer, n int64, what string) {
	t.Helper()
	from := make([]int64, len(writers))
	for k, w := range writers {
		from[k] = w.nacked.Load()
	}
	poll(t, 30*time.Second, fmt.Sprintf("%d acknowledged Sets per client (%s)", n, what), func() (bool, string) {
		for k, w := range writers {
			if got := w.nacked.Load() - from[k]; got < n {
				return false, fmt.Sprintf("client %d: %d", w.k, got)
			}
		}
		return true, ""
	})
}

// checkJournal opens the stopped sidecar's journal and checks it against
// what the writers were told: every acknowledged Set is a proposal applied
// to the device, no Set refused with RESOURCE_EXHAUSTED or UNAVAILABLE is
// journaled, every proposal is finished, and the applied values are the
// device's configuration cfg.
func checkJournal(t *testing.T, dir string, writers []*writer, cfg map[string]*gpb.TypedValue) {
	t.Helper()
	proposals, applied := readJournal(t, dir)
	journaled := map[string]*journal.Proposal{} // value → proposal
	for _, p := range proposals {
		ch := p.GetChange()
		if !journal.Finished(ch.GetCommit()) || !journal.Finished(ch.GetApply()) {
			t.Errorf("proposal %d not finished at rest: commit %v, apply %v", p.GetIndex(), ch.GetCommit(), ch.GetApply())
		}
		for _, op := range ch.GetOps() {
			for _, l := range op.GetValues() {
				journaled[l.GetValue().GetStringVal()] = p
			}
		}
	}
	for _, w := range writers {
		for _, a := range w.acked {
			p, ok := journaled[w.value(a.seq)]
			switch {
			case !ok:
				t.Errorf("client %d: acknowledged %q is not journaled", w.k, w.value(a.seq))
			case p.GetChange().GetApply() != journal.StatusComplete:
				t.Errorf("client %d: acknowledged %q is proposal %d, apply %v", w.k, w.value(a.seq), p.GetIndex(), p.GetChange().GetApply())
			}
		}
		for seq, code := range w.failed {
			if p, ok := journaled[w.value(seq)]; ok && (code == codes.ResourceExhausted || code == codes.Unavailable) {
				t.Errorf("client %d: %q was refused with %v, yet journaled as proposal %d", w.k, w.value(seq), code, p.GetIndex())
			}
		}
		t.Logf("client %d: %d sent, %d acknowledged, errors %v", w.k, w.sent, len(w.acked), w.errs)
	}
	for _, v := range trace.CheckDevice(applied, cfg) {
		t.Errorf("journal's applied values vs the device: %v", v)
	}
	t.Logf("journal: %d proposals, %d applied values, all on the device", len(journaled), len(applied))
}

// readJournal opens the journal in dir (its sidecar stopped) and returns
// every proposal and the applied values.
func readJournal(t *testing.T, dir string) ([]*journal.Proposal, []*journal.PathValue) {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	var proposals []*journal.Proposal
	if err := j.Proposals(ctx, 1, 0, func(p *journal.Proposal) error { proposals = append(proposals, p); return nil }); err != nil {
		t.Fatal(err)
	}
	var applied []*journal.PathValue
	if err := j.Applied(ctx, nil, func(pv *journal.PathValue) error { applied = append(applied, pv); return nil }); err != nil {
		t.Fatal(err)
	}
	return proposals, applied
}
