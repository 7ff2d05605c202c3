package journal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openconfig/gnmi/proto/gnmi"
)

// TestCrashRecovery kills a process driving the journal with SIGKILL at
// random moments, reopens the journal each time and checks that every
// transition the process reported done survived and that the journal's
// invariants hold.
func TestCrashRecovery(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("JOURNAL_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with JOURNAL_CRASH_SEED=%d)", seed, seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	const kills = 24
	reported := map[string]uint64{} // "op index" → count, for the log
	var done []string
	for round := 0; round < kills; round++ {
		// The second half of the rounds also compacts (keeping 30 proposals).
		retain := -1
		if round >= kills/2 {
			retain = 30
		}
		lines := runAndKill(t, dir, rnd.Uint64(), retain, 1+rnd.IntN(80), time.Duration(rnd.IntN(20))*time.Millisecond)
		done = append(done, lines...)
		for _, l := range lines {
			reported[strings.Fields(l)[1]]++
		}
		j, err := Open(dir, Options{Retain: -1})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		if err := invariants(j); err != nil {
			_ = j.Close()
			t.Fatalf("round %d: invariants after SIGKILL: %v", round, err)
		}
		if err := checkReported(j, done); err != nil {
			_ = j.Close()
			t.Fatalf("round %d: %v", round, err)
		}
		if round == kills-1 {
			c, _ := j.Configuration(context.Background())
			t.Logf("final journal: proposals %d..%d, committed %d, applied %d, term %d",
				c.FirstIndex, c.LastIndex, c.Committed.Index, c.Applied.Index, c.Applied.Term)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kills; transitions reported done and verified: %v", kills, reported)
	if reported["commit"] == 0 || reported["apply"] == 0 {
		t.Fatalf("the helper made no progress: %v", reported)
	}
}

// runAndKill starts the helper, waits until it reported `after` transitions
// (or exited), waits `extra`, kills it with SIGKILL and returns the
// transitions it reported done.
func runAndKill(t *testing.T, dir string, seed uint64, retain, after int, extra time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=crash", "JOURNAL_DIR="+dir, fmt.Sprintf("JOURNAL_SEED=%d", seed),
		fmt.Sprintf("JOURNAL_RETAIN=%d", retain))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	progress := make(chan struct{}, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		r := bufio.NewReader(stdout)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return // a line torn by the kill has no newline and is dropped
			}
			mu.Lock()
			lines = append(lines, strings.TrimSuffix(l, "\n"))
			mu.Unlock()
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	deadline := time.After(60 * time.Second)
wait:
	for {
		mu.Lock()
		n := len(lines)
		mu.Unlock()
		if n >= after {
			break
		}
		select {
		case <-progress:
		case <-readDone:
			break wait
		case <-deadline:
			break wait
		}
	}
	time.Sleep(extra)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-readDone
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper did not die by SIGKILL (%v); stderr:\n%s", err, stderr.String())
	}
	var out []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "done" {
			t.Fatalf("helper printed %q", l)
		}
		out = append(out, l)
	}
	return out
}

// checkReported verifies that every reported transition is in the journal
// (a later transition may have moved the state further).
func checkReported(j *Journal, lines []string) error {
	ctx := context.Background()
	c, err := j.Configuration(ctx)
	if err != nil {
		return err
	}
	m, err := j.Mastership(ctx)
	if err != nil {
		return err
	}
	in := func(s Status, set ...Status) bool {
		for _, x := range set {
			if s == x {
				return true
			}
		}
		return false
	}
	for _, l := range lines {
		f := strings.Fields(l)
		op := f[1]
		n, _ := strconv.ParseUint(f[2], 10, 64)
		switch op {
		case "connect":
			if m.Term < n {
				return fmt.Errorf("reported %q but mastership term is %d", l, m.Term)
			}
			continue
		case "reconcile":
			if c.Applied.Term < n {
				return fmt.Errorf("reported %q but applied term is %d", l, c.Applied.Term)
			}
			continue
		}
		p, err := j.Proposal(ctx, n)
		if errors.Is(err, ErrCompacted) {
			continue // retention drops only finished proposals
		}
		if err != nil {
			return fmt.Errorf("reported %q: %w", l, err)
		}
		ch, rb := p.Change, p.Rollback
		ok := true
		switch op {
		case "propose":
		case "commit":
			ok = ch.Commit == StatusComplete
		case "failcommit":
			ok = ch.Commit == StatusFailed
		case "startapply":
			ok = in(ch.Apply, StatusInProgress, StatusComplete, StatusFailed)
		case "apply":
			ok = ch.Apply == StatusComplete
		case "failapply":
			ok = ch.Apply == StatusFailed
		case "abortapply":
			ok = ch.Apply == StatusAborted
		case "rollback":
			ok = p.Phase == PhaseRollback
		case "commitrollback":
			ok = rb.Commit == StatusComplete
		case "startapplyrollback":
			ok = in(rb.Apply, StatusInProgress, StatusComplete)
		case "applyrollback":
			ok = rb.Apply == StatusComplete
		default:
			return fmt.Errorf("unknown report %q", l)
		}
		if !ok {
			return fmt.Errorf("reported %q but proposal %d is phase %v, change %v/%v, rollback %v/%v",
				l, n, p.Phase, ch.Commit, ch.Apply, rb.Commit, rb.Apply)
		}
	}
	return nil
}

// runCrashHelper plays the agent against a durable journal until killed:
// it reconnects and re-pushes, finishes what the previous incarnation left,
// then proposes, commits, applies, fails and rolls back at random, printing
// "done <transition> <index>" after each transition returns.
func runCrashHelper(dir, seedText, retainText string) error {
	seed, err := strconv.ParseUint(seedText, 10, 64)
	if err != nil {
		return err
	}
	retain, err := strconv.Atoi(retainText)
	if err != nil {
		return err
	}
	rnd := rand.New(rand.NewPCG(seed, 1))
	j, err := Open(dir, Options{Retain: retain})
	if err != nil {
		return err
	}
	ctx := context.Background()
	var outMu sync.Mutex
	report := func(op string, n uint64) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(os.Stdout, "done %s %d\n", op, n)
	}
	reconnect := func() (uint64, error) {
		m, err := j.Connect(ctx)
		if err != nil {
			return 0, err
		}
		report("connect", m.Term)
		if _, err := j.StartReconcile(ctx, m.Term); err != nil {
			return 0, err
		}
		// The re-push itself: read the applied values.
		if err := j.ReplayApplied(ctx, func(*PathValue) error { return nil }); err != nil {
			return 0, err
		}
		if _, err := j.CompleteReconcile(ctx, m.Term, 0); err != nil {
			return 0, err
		}
		report("reconcile", m.Term)
		return m.Term, nil
	}
	term, err := reconnect()
	if err != nil {
		return err
	}
	h := &crashDriver{j: j, rnd: rnd, report: report, term: term}
	for {
		if err := h.advance(ctx); err != nil {
			return err
		}
		// Concurrent proposals share transactions (group commit).
		n := 1 + rnd.IntN(4)
		opsList := make([][]*Op, n)
		for k := range opsList {
			opsList[k] = randomOps(rnd)
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for k := range n {
			wg.Go(func() {
				p, err := j.ProposeChange(ctx, opsList[k])
				if err == nil {
					report("propose", p.Index)
				}
				errs[k] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if err := h.advance(ctx); err != nil {
			return err
		}
		if rnd.IntN(4) == 0 {
			if i, err := j.NewestRollbackable(ctx); err == nil {
				if _, _, err := j.ProposeRollback(ctx, i); err != nil {
					return err
				}
				report("rollback", i)
			}
		}
		if rnd.IntN(15) == 0 {
			if h.term, err = reconnect(); err != nil {
				return err
			}
		}
		if rnd.IntN(10) == 0 {
			if _, err := j.Compact(ctx); err != nil {
				return err
			}
		}
	}
}

type crashDriver struct {
	j      *Journal
	rnd    *rand.Rand
	report func(string, uint64)
	term   uint64
}

// advance drives every unfinished proposal forward in index order.
func (h *crashDriver) advance(ctx context.Context) error {
	c, err := h.j.Configuration(ctx)
	if err != nil {
		return err
	}
	for i := c.FirstIndex; i <= c.LastIndex; i++ {
		if err := h.advanceOne(ctx, i); err != nil {
			return fmt.Errorf("proposal %d: %w", i, err)
		}
	}
	return nil
}

func (h *crashDriver) advanceOne(ctx context.Context, i uint64) error {
	j := h.j
	p, err := j.Proposal(ctx, i)
	if errors.Is(err, ErrCompacted) {
		return nil // finished, and dropped by the background retention since advance read the configuration
	}
	if err != nil {
		return err
	}
	if p.Phase == PhaseRollback {
		rb := p.Rollback
		if rb.Commit == StatusPending {
			if _, _, err := j.CommitRollback(ctx, i); err != nil {
				return err
			}
			h.report("commitrollback", i)
		}
		if rb.Apply == StatusPending || rb.Apply == StatusInProgress {
			if _, _, err := j.StartApplyRollback(ctx, i); err != nil {
				return err
			}
			h.report("startapplyrollback", i)
			if _, _, err := j.CompleteApplyRollback(ctx, i, h.term); err != nil {
				return err
			}
			h.report("applyrollback", i)
		}
		return nil
	}
	ch := p.Change
	if ch.Commit == StatusPending {
		if h.rnd.IntN(20) == 0 {
			if p, _, err = j.FailCommit(ctx, i, 3, "invalid"); err != nil {
				return err
			}
			h.report("failcommit", i)
		} else {
			if p, _, err = j.CommitChange(ctx, i); err != nil {
				return err
			}
			h.report("commit", i)
		}
		ch = p.Change
	}
	switch {
	case ch.Apply == StatusPending && ch.Commit != StatusComplete:
		if _, _, err := j.AbortApply(ctx, i); err != nil {
			return err
		}
		h.report("abortapply", i)
	case ch.Apply == StatusPending || ch.Apply == StatusInProgress:
		if _, _, err := j.StartApply(ctx, i); err != nil {
			return err
		}
		h.report("startapply", i)
		if h.rnd.IntN(10) == 0 {
			if _, _, err := j.FailApply(ctx, i, 3, "rejected by device"); err != nil {
				return err
			}
			h.report("failapply", i)
		} else {
			if _, _, err := j.CompleteApply(ctx, i, h.term); err != nil {
				return err
			}
			h.report("apply", i)
		}
	}
	return nil
}

// randomOps returns a small random Set over a few overlapping paths.
func randomOps(rnd *rand.Rand) []*Op {
	path := func(elems ...string) *gnmi.Path {
		p := &gnmi.Path{}
		for _, e := range elems {
			name, key, _ := strings.Cut(e, "=")
			pe := &gnmi.PathElem{Name: name}
			if key != "" {
				pe.Name = "item"
				pe.Key = map[string]string{"id": key}
			}
			p.Elem = append(p.Elem, pe)
		}
		return p
	}
	item := func() string { return "item=" + strconv.Itoa(rnd.IntN(3)) }
	leaf := func() string { return "leaf" + strconv.Itoa(rnd.IntN(3)) }
	val := func() *gnmi.TypedValue {
		return &gnmi.TypedValue{Value: &gnmi.TypedValue_IntVal{IntVal: rnd.Int64N(1000)}}
	}
	var ops []*Op
	for range 1 + rnd.IntN(3) {
		switch r := rnd.IntN(10); {
		case r == 0:
			ops = append(ops, &Op{Kind: OpDelete, Path: path("a", item())})
		case r == 1:
			ops = append(ops, &Op{Kind: OpDelete, Path: path("a")})
		case r == 2:
			id := item()
			ops = append(ops, &Op{Kind: OpReplace, Path: path("a", id), Values: []*Leaf{
				{Path: path("a", id, leaf()), Value: val()},
			}})
		case r == 3:
			ops = append(ops, &Op{Kind: OpUpdate, Path: path("c"), Values: []*Leaf{
				{Path: path("c"), Value: &gnmi.TypedValue{Value: &gnmi.TypedValue_JsonIetfVal{
					JsonIetfVal: []byte(fmt.Sprintf(`{"x":%d}`, rnd.IntN(100)))}}},
			}})
		default:
			p := path("a", item(), leaf())
			ops = append(ops, &Op{Kind: OpUpdate, Path: p, Values: []*Leaf{{Path: p, Value: val()}}})
		}
	}
	return ops
}
