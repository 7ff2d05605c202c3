package journal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// helperEnv selects a helper role when the test binary re-executes itself.
const helperEnv = "JOURNAL_TEST_HELPER"

func TestMain(m *testing.M) {
	role := os.Getenv(helperEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	var err error
	switch role {
	case "crash":
		err = runCrashHelper(os.Getenv("JOURNAL_DIR"), os.Getenv("JOURNAL_SEED"), os.Getenv("JOURNAL_RETAIN"))
	case "hold":
		err = runHoldHelper(os.Getenv("JOURNAL_DIR"))
	case "fill":
		err = runFillHelper(os.Getenv("JOURNAL_DIR"), os.Getenv("JOURNAL_FILL"))
	case "rss":
		err = runRSSHelper(os.Getenv("JOURNAL_DIR"))
	default:
		err = fmt.Errorf("unknown helper role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runHoldHelper opens the journal, says so, and keeps it open until stdin
// closes.
func runHoldHelper(dir string) error {
	j, err := Open(dir, Options{NoSync: true})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	_, _ = os.Stdin.Read(make([]byte, 1))
	return j.Close()
}

func openTest(t testing.TB, dir string, opts Options) *Journal {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	j, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := j.Close(); err != nil && err != ErrClosed {
			t.Errorf("Close: %v", err)
		}
	})
	return j
}

func mustPath(t testing.TB, s string) *gnmi.Path {
	t.Helper()
	origin := ""
	if o, rest, ok := strings.Cut(s, ":"); ok && !strings.HasPrefix(s, "/") {
		origin, s = o, rest
	}
	p, err := ygot.StringToStructuredPath(s)
	if err != nil {
		t.Fatalf("path %q: %v", s, err)
	}
	p.Origin = origin
	return p
}

func strVal(s string) *gnmi.TypedValue {
	return &gnmi.TypedValue{Value: &gnmi.TypedValue_StringVal{StringVal: s}}
}

func jsonVal(s string) *gnmi.TypedValue {
	return &gnmi.TypedValue{Value: &gnmi.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
}

// update builds an Update op writing path=value pairs (alternating
// strings): at the leaf's path for one pair, at the root for several.
func update(t testing.TB, kv ...string) *Op {
	root := &gnmi.Path{}
	if len(kv) == 2 {
		root = mustPath(t, kv[0])
	}
	return &Op{Kind: OpUpdate, Path: root, Values: leafValues(t, kv)}
}

// replace replaces at root with the given leaves.
func replace(t testing.TB, root string, kv ...string) *Op {
	return &Op{Kind: OpReplace, Path: mustPath(t, root), Values: leafValues(t, kv)}
}

// asciiUpdate writes an opaque (ASCII) value at path: one unit, whatever
// it holds.
func asciiUpdate(t testing.TB, path, text string) *Op {
	return &Op{Kind: OpUpdate, Path: mustPath(t, path), Values: []*Leaf{{Path: mustPath(t, path),
		Value: &gnmi.TypedValue{Value: &gnmi.TypedValue_AsciiVal{AsciiVal: text}}}}}
}

func del(t testing.TB, path string) *Op {
	return &Op{Kind: OpDelete, Path: mustPath(t, path)}
}

func leafValues(t testing.TB, kv []string) []*Leaf {
	var out []*Leaf
	for n := 0; n+1 < len(kv); n += 2 {
		v := strVal(kv[n+1])
		if strings.HasPrefix(kv[n+1], "{") {
			v = jsonVal(kv[n+1])
		}
		out = append(out, &Leaf{Path: mustPath(t, kv[n]), Value: v})
	}
	return out
}

// synced makes the journal ready to apply: a connection and a re-push for
// its term. It returns the term.
func synced(t testing.TB, j *Journal) uint64 {
	t.Helper()
	ctx := context.Background()
	m, err := j.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.StartReconcile(ctx, m.Term); err != nil {
		t.Fatal(err)
	}
	if _, err := j.CompleteReconcile(ctx, m.Term, 0); err != nil {
		t.Fatal(err)
	}
	return m.Term
}

// applyChange proposes ops and drives them to applied.
func applyChange(t testing.TB, j *Journal, term uint64, ops ...*Op) uint64 {
	t.Helper()
	ctx := context.Background()
	p, err := j.ProposeChange(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	commitAndApply(t, j, term, p.Index)
	return p.Index
}

func commitAndApply(t testing.TB, j *Journal, term, i uint64) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := j.CommitChange(ctx, i); err != nil {
		t.Fatalf("CommitChange(%d): %v", i, err)
	}
	if _, _, err := j.StartApply(ctx, i); err != nil {
		t.Fatalf("StartApply(%d): %v", i, err)
	}
	if _, _, err := j.CompleteApply(ctx, i, term); err != nil {
		t.Fatalf("CompleteApply(%d): %v", i, err)
	}
}

func rollback(t testing.TB, j *Journal, term, i uint64) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := j.ProposeRollback(ctx, i); err != nil {
		t.Fatalf("ProposeRollback(%d): %v", i, err)
	}
	if _, _, err := j.CommitRollback(ctx, i); err != nil {
		t.Fatalf("CommitRollback(%d): %v", i, err)
	}
	if _, _, err := j.StartApplyRollback(ctx, i); err != nil {
		t.Fatalf("StartApplyRollback(%d): %v", i, err)
	}
	if _, _, err := j.CompleteApplyRollback(ctx, i, term); err != nil {
		t.Fatalf("CompleteApplyRollback(%d): %v", i, err)
	}
}

// render shows a value map as "path=value@index" / "path=deleted@index".
func render(pv *PathValue) string {
	if pv.GetDeleted() {
		return fmt.Sprintf("%s=deleted@%d", gnmipath.String(pv.GetPath()), pv.GetIndex())
	}
	v := pv.GetValue()
	var s string
	switch x := v.GetValue().(type) {
	case *gnmi.TypedValue_StringVal:
		s = x.StringVal
	case *gnmi.TypedValue_JsonIetfVal:
		s = string(x.JsonIetfVal)
	case *gnmi.TypedValue_AsciiVal:
		s = x.AsciiVal
	case *gnmi.TypedValue_JsonVal:
		s = string(x.JsonVal)
	default:
		s = v.String()
	}
	return fmt.Sprintf("%s=%s@%d", gnmipath.String(pv.GetPath()), s, pv.GetIndex())
}

func committedList(t testing.TB, j *Journal, prefix *gnmi.Path) []string {
	t.Helper()
	var out []string
	if err := j.Committed(context.Background(), prefix, func(pv *PathValue) error {
		out = append(out, render(pv))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func appliedList(t testing.TB, j *Journal) []string {
	t.Helper()
	var out []string
	if err := j.Applied(context.Background(), nil, func(pv *PathValue) error {
		out = append(out, render(pv))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// appliedReplayList renders the applied values in the order a re-push
// sends them (ReplayApplied).
func appliedReplayList(t testing.TB, j *Journal) []string {
	t.Helper()
	var out []string
	if err := j.ReplayApplied(context.Background(), func(pv *PathValue) error {
		out = append(out, render(pv))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func committedAtList(t testing.TB, j *Journal, at int64, prefix *gnmi.Path) ([]string, error) {
	t.Helper()
	var out []string
	err := j.CommittedAt(context.Background(), fakeTime(at), prefix, func(pv *PathValue) error {
		out = append(out, render(pv))
		return nil
	})
	return out, err
}

// dump returns every key and value in the database, to prove a refused
// transition wrote nothing.
func dump(t testing.TB, j *Journal) map[string]string {
	t.Helper()
	out := make(map[string]string)
	err := j.view(context.Background(), func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[string(it.Item().Key())] = string(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkInvariants verifies the journal's internal consistency: every kept
// proposal is whole, statuses respect index order, the configuration
// indexes agree with the proposals, every stored value traces to the
// proposal that wrote it, the applied-index entries match the applied
// values, the history replays to the committed values, and committed equals
// applied whenever their indexes agree. The writer's published heads (the
// configuration, mastership and commit-confirmed records it keeps decoded)
// equal the records stored.
func checkInvariants(t testing.TB, j *Journal) {
	t.Helper()
	if err := invariants(j); err != nil {
		t.Fatal(err)
	}
}

func invariants(j *Journal) error {
	ctx := context.Background()
	if err := recentAsStored(j); err != nil {
		return err
	}
	if err := statusesAsStored(j); err != nil {
		return err
	}
	if err := valuesAsStored(j); err != nil {
		return err
	}
	if err := headsAsStored(j); err != nil {
		return err
	}
	c, err := j.Configuration(ctx)
	if err != nil {
		return err
	}
	props := map[uint64]*Proposal{}
	err = j.view(context.Background(), func(txn *badger.Txn) error {
		err := iteratePrefix(txn, nsProposal, func(key, val []byte) error {
			p := &Proposal{}
			if err := decodeRecord(val, p); err != nil {
				return err
			}
			props[p.Index] = p
			if string(proposalKey(p.Index)) != string(key) {
				return fmt.Errorf("proposal %d stored under %q", p.Index, key)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return completeDerived(txn, props)
	})
	if err != nil {
		return err
	}
	if want := int(c.LastIndex - c.FirstIndex + 1); len(props) != want {
		return fmt.Errorf("%d proposal records, want %d (first %d, last %d)", len(props), want, c.FirstIndex, c.LastIndex)
	}
	inProgress := 0
	for i := c.FirstIndex; i <= c.LastIndex; i++ {
		p, ok := props[i]
		if !ok {
			return fmt.Errorf("proposal %d missing", i)
		}
		ch := p.GetChange()
		// (A baseline of a device that holds nothing has no operations.)
		if p.Phase == journalpb.Phase_PHASE_UNSET || ch == nil || (len(ch.Ops) == 0 && !ch.Baseline) || ch.Proposed == nil ||
			ch.Commit == StatusUnset || ch.Apply == StatusUnset {
			return fmt.Errorf("proposal %d is incomplete: %v", i, p)
		}
		if ch.Commit == StatusComplete && (ch.Committed == nil || p.Rollback == nil) {
			return fmt.Errorf("proposal %d committed without rollback record: %v", i, p)
		}
		if p.Phase == PhaseRollback && (p.GetRollback().GetCommit() == StatusUnset || p.GetRollback().GetApply() == StatusUnset) {
			return fmt.Errorf("proposal %d rollback incomplete: %v", i, p)
		}
		if ch.Apply == StatusInProgress || p.GetRollback().GetApply() == StatusInProgress {
			inProgress++
		}
		if ch.Apply == StatusInProgress && c.Applied.Proposal != i {
			return fmt.Errorf("proposal %d apply in progress but applied.proposal = %d", i, c.Applied.Proposal)
		}
		if prev, ok := props[i-1]; ok {
			// A failed commit stays decided when FailApply re-bases a
			// proposal before it (its client was told; its failure does
			// not depend on the configuration), as does an older
			// journal's proposal aborted by an earlier failure.
			rebasedBefore := prev.Change.Commit == StatusPending && (ch.Commit == StatusFailed || ch.AbortedBy != 0)
			if ch.Commit != StatusPending && !Finished(prev.Change.Commit) && !rebasedBefore {
				return fmt.Errorf("proposal %d commit %v before proposal %d commit finished (%v)", i, ch.Commit, i-1, prev.Change.Commit)
			}
			if ch.Apply != StatusPending && !Finished(prev.Change.Apply) {
				return fmt.Errorf("proposal %d apply %v before proposal %d apply finished (%v)", i, ch.Apply, i-1, prev.Change.Apply)
			}
		}
		if p.Phase == PhaseRollback && p.Rollback.Apply != StatusComplete && c.RollingBack != i {
			return fmt.Errorf("proposal %d rolling back but configuration says %d", i, c.RollingBack)
		}
	}
	if inProgress > 1 {
		return fmt.Errorf("%d applies in progress", inProgress)
	}
	if p, ok := props[c.Committed.Index]; ok && p.Change.Commit != StatusComplete {
		return fmt.Errorf("committed.index %d but its commit is %v", c.Committed.Index, p.Change.Commit)
	}
	if p, ok := props[c.Applied.Index]; ok && p.Change.Apply != StatusComplete {
		return fmt.Errorf("applied.index %d but its apply is %v", c.Applied.Index, p.Change.Apply)
	}
	if r := c.RollingBack; r != 0 && props[r].GetPhase() != PhaseRollback {
		return fmt.Errorf("rolling back %d, which is not a rollback", r)
	}
	// The outstanding commit-confirmed names the newest proposal, whose
	// change has not failed and is not rolled back.
	rec, err := j.CommitConfirm(ctx)
	switch {
	case err == nil:
		p, ok := props[rec.Proposal]
		ch := p.GetChange()
		switch {
		case rec.Id == "" || rec.Deadline == nil || rec.Started == nil:
			return fmt.Errorf("commit-confirmed record incomplete: %v", rec)
		case rec.Proposal != c.LastIndex:
			return fmt.Errorf("commit-confirmed of proposal %d, but the newest is %d", rec.Proposal, c.LastIndex)
		case !ok:
			return fmt.Errorf("commit-confirmed of proposal %d, which is not kept", rec.Proposal)
		case p.Phase != PhaseChange || ch.Commit == StatusFailed || ch.Commit == StatusAborted ||
			ch.Apply == StatusFailed || ch.Apply == StatusAborted:
			return fmt.Errorf("commit-confirmed of proposal %d, which is %v with commit %v, apply %v",
				rec.Proposal, p.Phase, ch.Commit, ch.Apply)
		}
	case !errors.Is(err, ErrNotFound):
		return err
	}

	committed, err := valueMap(j, nsCommitted)
	if err != nil {
		return err
	}
	applied, err := valueMap(j, nsApplied)
	if err != nil {
		return err
	}
	for name, m := range map[string]map[string]*PathValue{"committed": committed, "applied": applied} {
		for k, pv := range m {
			if string(PathKey(pv.Path)) != k {
				return fmt.Errorf("%s value %s stored under another key", name, gnmipath.String(pv.Path))
			}
			if pv.Index == 0 {
				// A live value with index 0 is the device's own, read before
				// a change and taken in at its commit (takeDeviceReads), or
				// put back by a rollback of one: some kept proposal's device
				// reads hold it (unless the proposals that did are
				// compacted away).
				if !pv.Deleted && !isDeviceRead(props, pv) && c.FirstIndex <= 1 {
					return fmt.Errorf("%s value %s with index 0 is not a tombstone nor a device read", name, render(pv))
				}
				if pv.Unknown {
					return fmt.Errorf("%s value %s is marked unknown: only before-images are", name, render(pv))
				}
				continue
			}
			p, ok := props[pv.Index]
			if !ok {
				continue // compacted
			}
			found := false
			for _, w := range append(slices.Clone(p.Change.Values), p.GetRollback().GetValues()...) {
				if proto.Equal(w, pv) {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("%s value %s is not a write of proposal %d", name, render(pv), pv.Index)
			}
		}
	}
	// lt/ indexes every applied tombstone; an entry whose tombstone a
	// later value replaced may stay until retention drops it.
	tombstones, err := keySet(j, nsAppliedDeleted)
	if err != nil {
		return err
	}
	for k, pv := range applied {
		if pv.Deleted && !tombstones[string(appliedTombstoneKey(pv.Index, []byte(k)))] {
			return fmt.Errorf("applied tombstone %s has no tombstone index entry", render(pv))
		}
	}
	// Nothing is left of the namespaces of older formats.
	for _, ns := range retiredNamespaces {
		left, err := keySet(j, ns)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("%d records left under %q, a namespace of an older format", len(left), ns)
		}
	}
	// The history replays to the committed values.
	if c.HistoryFloor == nil {
		state := map[string]*PathValue{}
		var seq uint64
		err = j.view(context.Background(), func(txn *badger.Txn) error {
			return iteratePrefix(txn, nsHistory, func(key, val []byte) error {
				d := &journalpb.HistoryDelta{}
				if err := decodeRecord(val, d); err != nil {
					return err
				}
				seq++
				for _, e := range d.Entries {
					p := e.GetAfter().GetPath()
					if p == nil {
						p = e.GetBefore().GetPath()
					}
					k := string(PathKey(p))
					if state[k] == nil && e.Before.GetIndex() == 0 &&
						((!e.Before.GetDeleted() && (isDeviceRead(props, e.Before) || c.FirstIndex > 1)) || e.Before.GetUnknown()) {
						// What the device held there, read before the
						// change and taken in at its commit with no
						// delta of its own, or what it held there that
						// could not be read.
						state[k] = e.Before
					}
					if !proto.Equal(state[k], e.Before) && !(state[k] == nil && e.Before == nil) {
						return fmt.Errorf("history delta %q: %s held %v, delta says before was %v", key, gnmipath.String(p), state[k], e.Before)
					}
					if e.After == nil {
						delete(state, k)
					} else {
						state[k] = e.After
					}
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		if seq != c.HistorySeq {
			return fmt.Errorf("%d history deltas, configuration says %d", seq, c.HistorySeq)
		}
		// The device's values taken in where no change wrote since: no
		// delta records them.
		for k, pv := range committed {
			if _, ok := state[k]; !ok && pv.Index == 0 && !pv.Deleted {
				state[k] = pv
			}
		}
		if err := sameValues(state, committed); err != nil {
			return fmt.Errorf("history replay vs committed: %w", err)
		}
	}
	if c.Committed.Index == c.Applied.Index && c.RollingBack == 0 {
		if err := sameValues(committed, applied); err != nil {
			return fmt.Errorf("committed.index = applied.index = %d but: %w", c.Applied.Index, err)
		}
	}
	return nil
}

// isDeviceRead reports whether pv (index 0) is a unit of a kept proposal's
// device reads: the device's value, taken in at that proposal's commit.
func isDeviceRead(props map[uint64]*Proposal, pv *PathValue) bool {
	key := string(PathKey(pv.GetPath()))
	for _, p := range props {
		for _, op := range p.GetChange().GetDeviceReads() {
			for _, u := range Units(op) {
				if string(PathKey(u.GetPath())) == key && proto.Equal(u.GetValue(), pv.GetValue()) {
					return true
				}
			}
		}
	}
	return false
}

// keySet returns every key with the prefix ns.
func keySet(j *Journal, ns []byte) (map[string]bool, error) {
	keys := map[string]bool{}
	err := j.view(context.Background(), func(txn *badger.Txn) error {
		return iteratePrefix(txn, ns, func(key, _ []byte) error {
			keys[string(key)] = true
			return nil
		})
	})
	return keys, err
}

func sameValues(a, b map[string]*PathValue) error {
	for k, v := range a {
		if !proto.Equal(v, b[k]) {
			return fmt.Errorf("%s: %s vs %s", gnmipath.String(v.Path), render(v), render(b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			return fmt.Errorf("%s only in one: %s", gnmipath.String(v.Path), render(v))
		}
	}
	return nil
}

func valueMap(j *Journal, ns []byte) (map[string]*PathValue, error) {
	m := map[string]*PathValue{}
	err := j.view(context.Background(), func(txn *badger.Txn) error {
		return scanValues(context.Background(), txn, ns, nil, func(k, v []byte) error {
			pv := &PathValue{}
			if err := decodeRecord(v, pv); err != nil {
				return err
			}
			m[string(k)] = pv
			return nil
		})
	})
	return m, err
}

// headsAsStored checks that the heads the writer published, if any, are
// the records Badger holds.
func headsAsStored(j *Journal) error {
	published := j.heads.Load()
	if published == nil {
		return nil
	}
	var stored *heads
	if err := j.view(context.Background(), func(txn *badger.Txn) (err error) {
		stored, err = loadHeads(txn)
		return err
	}); err != nil {
		return err
	}
	for _, r := range []struct {
		name           string
		published, got proto.Message
	}{
		{"configuration", published.config, stored.config},
		{"mastership", published.mastership, stored.mastership},
		{"commit-confirmed", published.confirm, stored.confirm},
	} {
		if !proto.Equal(r.published, r.got) {
			return fmt.Errorf("the writer's %s record is %v, the journal holds %v", r.name, r.published, r.got)
		}
	}
	return nil
}

// recentAsStored checks that every proposal record the writer keeps
// decoded (Journal.recent) is the record Badger holds.
func recentAsStored(j *Journal) error {
	j.recent.mu.Lock()
	kept := maps.Clone(j.recent.byIndex)
	j.recent.mu.Unlock()
	return j.view(context.Background(), func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		for i, e := range kept {
			stored := &Proposal{}
			found, err := getRecord(txn, proposalKey(i), stored)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("the writer keeps proposal %d, which the journal no longer holds", i)
			}
			if e.plain == nil {
				// Completed with a later record (derived.go): the record
				// stored reads as e.p through that one.
				if !derivedComplete(c, stored) {
					return fmt.Errorf("the writer keeps proposal %d without its encoding, and its record %v is not completed by a later one", i, stored)
				}
				if stored, err = loadProposal(txn, c, i); err != nil {
					return err
				}
				if !proto.Equal(shallowProposal(e.p), shallowProposal(stored)) {
					return fmt.Errorf("the writer keeps proposal %d as %v, the journal's records read %v", i, e.p, stored)
				}
				continue
			}
			if !proto.Equal(shallowProposal(e.p), shallowProposal(stored)) {
				return fmt.Errorf("the writer keeps proposal %d as %v, the journal holds %v", i, e.p, stored)
			}
			plain := &Proposal{}
			if err := proto.Unmarshal(e.plain, plain); err != nil {
				return fmt.Errorf("the writer keeps proposal %d's encoding undecodable: %w", i, err)
			}
			if !proto.Equal(shallowProposal(plain), shallowProposal(stored)) || len(e.plain) != e.size {
				return fmt.Errorf("the writer keeps proposal %d encoded (%d bytes, size %d) as %v, the journal holds %v", i, len(e.plain), e.size, plain, stored)
			}
		}
		return nil
	})
}

// statusesAsStored checks that every proposal status the writer holds
// for retention (statuses.go) is the status of the journal's record of
// that proposal, as readers read it (derived completions included).
func statusesAsStored(j *Journal) error {
	j.statuses.mu.Lock()
	held := maps.Clone(j.statuses.byIndex)
	j.statuses.mu.Unlock()
	return j.view(context.Background(), func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		for i, s := range held {
			if err := kept(c, i); err != nil {
				return fmt.Errorf("the writer holds a status of proposal %d, which the journal no longer holds: %w", i, err)
			}
			stored, err := loadProposalStatus(txn, c, i)
			if err != nil {
				return err
			}
			want, ok := heldStatusOf(stored)
			if !ok {
				return fmt.Errorf("the writer holds a status of proposal %d, whose record %v has none", i, stored)
			}
			if got := s.derived(c, i); got != want || s.done(c, i) != proposalDone(stored) {
				return fmt.Errorf("the writer holds proposal %d's status as %+v, the journal's record reads %+v", i, got, want)
			}
		}
		return nil
	})
}

// derived is s as proposal i's record reads under configuration c: its
// change complete if c completes it (derivedComplete).
func (s heldStatus) derived(c *Configuration, i uint64) heldStatus {
	var ch Change
	var rb Rollback
	p := Proposal{Change: &ch, Rollback: &rb}
	s.view(&p, c, i)
	d, _ := heldStatusOf(&p)
	return d
}

// completeDerived completes, in props (proposal records as stored, by
// index), the changes whose completion a later record holds (derived.go),
// as every reader of the journal reads them.
func completeDerived(txn *badger.Txn, props map[uint64]*Proposal) error {
	c, err := loadConfiguration(txn)
	if err != nil {
		return err
	}
	for _, p := range props {
		if err := completeIfDerived(txn, c, p); err != nil {
			return err
		}
	}
	return nil
}

// valuesAsStored checks that every value record the writer keeps
// (Journal.values) is the record Badger holds, or its absence.
func valuesAsStored(j *Journal) error {
	j.values.mu.Lock()
	kept := maps.Clone(j.values.byKey)
	j.values.mu.Unlock()
	return j.view(context.Background(), func(txn *badger.Txn) error {
		for key, v := range kept {
			stored := &PathValue{}
			found, err := getRecord(txn, []byte(key), stored)
			if err != nil {
				return err
			}
			if found == v.deleted {
				return fmt.Errorf("the writer keeps the value %q as deleted=%v, the journal holds it: %v", key, v.deleted, found)
			}
			if v.deleted {
				continue
			}
			keptValue := &PathValue{}
			if err := decodeRecord(v.b, keptValue); err != nil {
				return fmt.Errorf("the writer keeps the value %q undecodable: %w", key, err)
			}
			if !proto.Equal(keptValue, stored) {
				return fmt.Errorf("the writer keeps the value %q as %v, the journal holds %v", key, keptValue, stored)
			}
			if v.tombstone != stored.GetDeleted() {
				return fmt.Errorf("the writer keeps the value %q as deleted %v; the journal holds %v", key, v.tombstone, stored)
			}
		}
		return nil
	})
}

// incompressible returns n letters that compression does not shrink much
// (records are stored compressed, codec.go): a test that needs its values
// to take room, in the tree or the value log, uses it, not a repeated
// letter.
func incompressible(n int) string {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}
