package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

func fakeTime(sec int64) time.Time { return time.Unix(1_700_000_000+sec, 0).UTC() }

// fakeClock is a settable clock for Options.Clock.
type fakeClock struct{ sec atomic.Int64 }

func (c *fakeClock) now() time.Time { return fakeTime(c.sec.Load()) }

func TestPathKey(t *testing.T) {
	key := func(s string) []byte { return PathKey(mustPath(t, s)) }
	t.Run("equal paths have equal keys", func(t *testing.T) {
		a := &gnmi.Path{Target: "dev1", Elem: []*gnmi.PathElem{{Name: "l", Key: map[string]string{"a": "1", "b": "2"}}}}
		b := &gnmi.Path{Target: "dev2", Elem: []*gnmi.PathElem{{Name: "l", Key: map[string]string{"b": "2", "a": "1"}}}}
		if !bytes.Equal(PathKey(a), PathKey(b)) {
			t.Fatal("list key order or target changed the key")
		}
	})
	distinct := [][2]string{
		{"/a/b", "/a/bc"},
		{"/a/b", "/ab"},
		{"/a[k=v]", "/a/k/v"},
		{"/a[k=v]/b", "/a[k=v/b]"},
		{"oc:/a", "/a"},
		{"/a[x=1][y=2]", "/a[x=12]"},
	}
	for _, d := range distinct {
		if bytes.Equal(key(d[0]), key(d[1])) {
			t.Errorf("%s and %s share a key", d[0], d[1])
		}
	}
	escaped := &gnmi.Path{Elem: []*gnmi.PathElem{{Name: "a\x01b"}}}
	if IsUnder(escaped, mustPath(t, "/a")) || bytes.Equal(PathKey(escaped), key("/a/b")) {
		t.Error("separator bytes inside a name are not escaped")
	}
	under := []struct {
		child, parent string
		want          bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b/c", "/a/b", true},
		{"/a/bc", "/a/b", false},
		{"/a/b[k=1]/c", "/a/b", true}, // a keyless list path covers its entries
		{"/a/b[k=1]/c", "/a/b[k=1]", true},
		{"/a/b[k=2]/c", "/a/b[k=1]", false},
		{"/a/b[k=10]", "/a/b[k=1]", false},
		{"/x", "/", true},
		{"oc:/x", "/", false},
	}
	for _, c := range under {
		if got := IsUnder(mustPath(t, c.child), mustPath(t, c.parent)); got != c.want {
			t.Errorf("IsUnder(%s, %s) = %v, want %v", c.child, c.parent, got, c.want)
		}
	}
	sorted := []string{"/a", "/a/b", "/a/b/c", "/a/b[k=1]", "/a/b[k=1]/c", "/a/bc", "/b"}
	keys := make([][]byte, len(sorted))
	for n, s := range sorted {
		keys[n] = key(s)
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Errorf("parents do not sort before their children: %q", keys)
	}
}

func TestProposeChangeRejectsInvalidOps(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	leafless := update(t, "/a/b", "1")
	leafless.Values = nil
	cases := map[string][]*Op{
		"no operations":       nil,
		"no path":             {{Kind: OpUpdate, Values: []*Leaf{{Path: mustPath(t, "/a"), Value: strVal("1")}}}},
		"no kind":             {{Path: mustPath(t, "/a"), Values: []*Leaf{{Path: mustPath(t, "/a"), Value: strVal("1")}}}},
		"update without leaf": {leafless},
		"leaf outside path":   {{Kind: OpUpdate, Path: mustPath(t, "/a/b"), Values: []*Leaf{{Path: mustPath(t, "/a/bc"), Value: strVal("1")}}}},
		"leaf without value":  {{Kind: OpUpdate, Path: mustPath(t, "/a"), Values: []*Leaf{{Path: mustPath(t, "/a")}}}},
		"delete with values":  {{Kind: OpDelete, Path: mustPath(t, "/a"), Values: []*Leaf{{Path: mustPath(t, "/a"), Value: strVal("1")}}}},
		//lint:ignore SA1019 the deprecated field must be refused
		"deprecated element": {{Kind: OpDelete, Path: &gnmi.Path{Element: []string{"a"}}}},
		"wildcard update":    {update(t, "/a/*", "x")},
		"... in a delete":    {del(t, "/a/...")},
	}
	for name, ops := range cases {
		t.Run(name, func(t *testing.T) {
			before := dump(t, j)
			_, err := j.ProposeChange(context.Background(), ops)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !maps.Equal(before, dump(t, j)) {
				t.Fatal("a refused proposal wrote to the journal")
			}
		})
	}
}

func TestChangeLifecycle(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	term := synced(t, j)
	ops := []*Op{update(t, "/a/b", "1")}
	ops[0].Path.Target = "dev"
	p, err := j.ProposeChange(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	if p.Index != 1 || p.Change.Commit != StatusPending || p.Change.Apply != StatusPending || p.Change.Proposed == nil {
		t.Fatalf("proposed %v", p)
	}
	if p.Change.Ops[0].Path.Target != "" || ops[0].Path.Target != "dev" {
		t.Fatal("the target must be dropped from the journaled copy only")
	}
	p, c, err := j.CommitChange(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Change.Commit != StatusComplete || c.Committed.Index != 1 || c.Committed.Proposal != 1 || p.Rollback.Index != 0 {
		t.Fatalf("after commit: %v / %v", p, c)
	}
	if got := render(p.Rollback.Values[0]); got != "/a/b=deleted@0" {
		t.Fatalf("rollback value %s, want the absent path as a tombstone at 0", got)
	}
	if got := appliedList(t, j); len(got) != 0 {
		t.Fatalf("applied before apply: %v", got)
	}
	p, c, err = j.StartApply(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Change.Apply != StatusInProgress || c.Applied.Proposal != 1 || c.Applied.Index != 0 {
		t.Fatalf("after start apply: %v / %v", p, c)
	}
	before := dump(t, j)
	p, _, err = j.StartApply(ctx, 1)
	if err != nil {
		t.Fatalf("re-entering an apply in progress: %v", err)
	}
	if p.Change.Apply != StatusInProgress || !maps.Equal(before, dump(t, j)) {
		t.Fatalf("re-entering an apply in progress must write nothing and report it in progress: %v", p)
	}
	p, c, err = j.CompleteApply(ctx, 1, term)
	if err != nil {
		t.Fatal(err)
	}
	if p.Change.Apply != StatusComplete || c.Applied.Index != 1 || p.Change.Applied == nil || p.Change.ApplyStarted == nil {
		t.Fatalf("after apply: %v / %v", p, c)
	}
	want := []string{"/a/b=1@1"}
	if got := appliedList(t, j); !slices.Equal(got, want) {
		t.Fatalf("applied %v, want %v", got, want)
	}
	if got := committedList(t, j, nil); !slices.Equal(got, want) {
		t.Fatalf("committed %v, want %v", got, want)
	}
	checkInvariants(t, j)
}

// TestGuards drives the journal into a state, attempts a transition the
// spec forbids there, and checks the sentinel error and that nothing at all
// was written.
func TestGuards(t *testing.T) {
	type env struct {
		j    *Journal
		term uint64
	}
	ctx := context.Background()
	propose := func(t *testing.T, e env, n int) {
		for range n {
			if _, err := e.j.ProposeChange(ctx, []*Op{update(t, "/a", "v")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name    string
		noSync  bool // skip the re-push
		setup   func(t *testing.T, e env)
		attempt func(e env) error
		want    error
	}{
		{"commit unknown proposal", false, nil,
			func(e env) error { _, _, err := e.j.CommitChange(ctx, 1); return err }, ErrNotFound},
		{"commit twice", false, func(t *testing.T, e env) { propose(t, e, 1); mustCommit(t, e.j, 1) },
			func(e env) error { _, _, err := e.j.CommitChange(ctx, 1); return err }, ErrGuard},
		{"commit out of order", false, func(t *testing.T, e env) { propose(t, e, 2) },
			func(e env) error { _, _, err := e.j.CommitChange(ctx, 2); return err }, ErrGuard},
		{"fail commit of a committed proposal", false, func(t *testing.T, e env) { propose(t, e, 1); mustCommit(t, e.j, 1) },
			func(e env) error { _, _, err := e.j.FailCommit(ctx, 1, 3, "x"); return err }, ErrGuard},
		{"commit during a rollback", false, func(t *testing.T, e env) {
			applyChange(t, e.j, e.term, update(t, "/a", "1"))
			mustDo(t, func() error { _, _, err := e.j.ProposeRollback(ctx, 1); return err })
			propose(t, e, 1)
		}, func(e env) error { _, _, err := e.j.CommitChange(ctx, 2); return err }, ErrGuard},
		{"apply before commit", false, func(t *testing.T, e env) { propose(t, e, 1) },
			func(e env) error { _, _, err := e.j.StartApply(ctx, 1); return err }, ErrGuard},
		{"apply before re-push", true, func(t *testing.T, e env) { propose(t, e, 1); mustCommit(t, e.j, 1) },
			func(e env) error { _, _, err := e.j.StartApply(ctx, 1); return err }, ErrGuard},
		{"apply after a new term without re-push", false, func(t *testing.T, e env) {
			propose(t, e, 1)
			mustCommit(t, e.j, 1)
			mustDo(t, func() error { _, err := e.j.Connect(ctx); return err })
		}, func(e env) error { _, _, err := e.j.StartApply(ctx, 1); return err }, ErrGuard},
		{"apply out of order", false, func(t *testing.T, e env) { propose(t, e, 2); mustCommit(t, e.j, 1); mustCommit(t, e.j, 2) },
			func(e env) error { _, _, err := e.j.StartApply(ctx, 2); return err }, ErrGuard},
		{"complete an apply not started", false, func(t *testing.T, e env) { propose(t, e, 1); mustCommit(t, e.j, 1) },
			func(e env) error { _, _, err := e.j.CompleteApply(ctx, 1, e.term); return err }, ErrGuard},
		{"complete an apply under a stale term", false, func(t *testing.T, e env) {
			propose(t, e, 1)
			mustCommit(t, e.j, 1)
			mustDo(t, func() error { _, _, err := e.j.StartApply(ctx, 1); return err })
			synced(t, e.j)
		}, func(e env) error { _, _, err := e.j.CompleteApply(ctx, 1, e.term); return err }, ErrGuard},
		{"fail an apply not started", false, func(t *testing.T, e env) { propose(t, e, 1); mustCommit(t, e.j, 1) },
			func(e env) error { _, _, err := e.j.FailApply(ctx, 1, 3, "x"); return err }, ErrGuard},
		{"abort the apply of a committed proposal", false, func(t *testing.T, e env) { propose(t, e, 1); mustCommit(t, e.j, 1) },
			func(e env) error { _, _, err := e.j.AbortApply(ctx, 1); return err }, ErrGuard},
		{"roll back an unapplied proposal", false, func(t *testing.T, e env) { propose(t, e, 1); mustCommit(t, e.j, 1) },
			func(e env) error { _, _, err := e.j.ProposeRollback(ctx, 1); return err }, ErrGuard},
		{"roll back an older proposal first", false, func(t *testing.T, e env) {
			applyChange(t, e.j, e.term, update(t, "/a", "1"))
			applyChange(t, e.j, e.term, update(t, "/a", "2"))
		}, func(e env) error { _, _, err := e.j.ProposeRollback(ctx, 1); return err }, ErrGuard},
		{"roll back with a later proposal pending", false, func(t *testing.T, e env) {
			applyChange(t, e.j, e.term, update(t, "/a", "1"))
			propose(t, e, 1)
		}, func(e env) error { _, _, err := e.j.ProposeRollback(ctx, 1); return err }, ErrGuard},
		{"roll back a rollback", false, func(t *testing.T, e env) {
			applyChange(t, e.j, e.term, update(t, "/a", "1"))
			mustDo(t, func() error { _, _, err := e.j.ProposeRollback(ctx, 1); return err })
		}, func(e env) error { _, _, err := e.j.ProposeRollback(ctx, 1); return err }, ErrGuard},
		{"roll back a proposal that does not exist", false, nil,
			func(e env) error { _, _, err := e.j.ProposeRollback(ctx, 7); return err }, ErrNotFound},
		{"commit a rollback not proposed", false, func(t *testing.T, e env) { applyChange(t, e.j, e.term, update(t, "/a", "1")) },
			func(e env) error { _, _, err := e.j.CommitRollback(ctx, 1); return err }, ErrGuard},
		{"apply a rollback not committed", false, func(t *testing.T, e env) {
			applyChange(t, e.j, e.term, update(t, "/a", "1"))
			mustDo(t, func() error { _, _, err := e.j.ProposeRollback(ctx, 1); return err })
		}, func(e env) error { _, _, err := e.j.StartApplyRollback(ctx, 1); return err }, ErrGuard},
		{"complete a rollback apply not started", false, func(t *testing.T, e env) {
			applyChange(t, e.j, e.term, update(t, "/a", "1"))
			mustDo(t, func() error { _, _, err := e.j.ProposeRollback(ctx, 1); return err })
			mustDo(t, func() error { _, _, err := e.j.CommitRollback(ctx, 1); return err })
		}, func(e env) error { _, _, err := e.j.CompleteApplyRollback(ctx, 1, e.term); return err }, ErrGuard},
		{"re-push for a stale term", false, func(t *testing.T, e env) { synced(t, e.j) },
			func(e env) error { _, err := e.j.StartReconcile(ctx, e.term); return err }, ErrGuard},
		{"complete a re-push not started", false, func(t *testing.T, e env) {
			mustDo(t, func() error { _, err := e.j.Connect(ctx); return err })
		}, func(e env) error { _, err := e.j.CompleteReconcile(ctx, e.term+1, 0); return err }, ErrGuard},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			e := env{j: j}
			if !c.noSync {
				e.term = synced(t, j)
			}
			if c.setup != nil {
				c.setup(t, e)
			}
			before := dump(t, j)
			err := c.attempt(e)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if after := dump(t, j); !maps.Equal(before, after) {
				t.Fatal("the refused transition wrote to the journal")
			}
			checkInvariants(t, j)
		})
	}
}

func mustCommit(t *testing.T, j *Journal, i uint64) {
	t.Helper()
	mustDo(t, func() error { _, _, err := j.CommitChange(context.Background(), i); return err })
}

func mustDo(t *testing.T, fn func() error) {
	t.Helper()
	if err := fn(); err != nil {
		t.Fatal(err)
	}
}

// TestCommitExpansion checks how a Set's operations become per-path values.
func TestCommitExpansion(t *testing.T) {
	cases := []struct {
		name    string
		initial [][]*Op // applied one proposal each, before the one under test
		ops     []*Op
		want    []string // committed values, in key order
	}{
		{"update writes leaves", nil,
			[]*Op{update(t, "/a/b", "1", "/a/c", "2")},
			[]string{"/a/b=1@1", "/a/c=2@1"}},
		{"delete tombstones the stored subtree", [][]*Op{{update(t, "/a/b", "1", "/a/c/d", "2", "/x", "3")}},
			[]*Op{del(t, "/a")},
			[]string{"/a=deleted@2", "/a/b=deleted@2", "/a/c/d=deleted@2", "/x=3@1"}},
		{"delete /a/b leaves /a/bc alone", [][]*Op{{update(t, "/a/b", "1"), update(t, "/a/bc", "2")}},
			[]*Op{del(t, "/a/b")},
			[]string{"/a/b=deleted@2", "/a/bc=2@1"}},
		{"delete a list removes its entries", [][]*Op{{update(t, "/l[k=1]/v", "1"), update(t, "/l[k=2]/v", "2"), update(t, "/lx", "3")}},
			[]*Op{del(t, "/l")},
			[]string{"/l=deleted@2", "/l[k=1]=deleted@2", "/l[k=1]/v=deleted@2", "/l[k=2]=deleted@2", "/l[k=2]/v=deleted@2", "/lx=3@1"}},
		{"a leaf under a list entry records the entry", nil,
			[]*Op{update(t, "/l[k=1]/v", "1")},
			[]string{"/l[k=1]={}@1", "/l[k=1]/v=1@1"}},
		{"an entry that holds values is not recorded again", [][]*Op{{update(t, "/l[k=1]/v", "1")}},
			[]*Op{update(t, "/l[k=1]/w", "2")},
			[]string{"/l[k=1]={}@1", "/l[k=1]/v=1@1", "/l[k=1]/w=2@2"}},
		{"deleting a leaf keeps its entry", [][]*Op{{update(t, "/l[k=1]/v", "1")}},
			[]*Op{del(t, "/l[k=1]/v")},
			[]string{"/l[k=1]={}@1", "/l[k=1]/v=deleted@2"}},
		{"replacing an entry records it anew", [][]*Op{{update(t, "/l[k=1]/v", "1")}},
			[]*Op{replace(t, "/l[k=1]", "/l[k=1]/w", "2")},
			[]string{"/l[k=1]={}@2", "/l[k=1]/v=deleted@2", "/l[k=1]/w=2@2"}},
		{"replace drops what the new value lacks", [][]*Op{{update(t, "/a/b", "1", "/a/c", "2")}},
			[]*Op{replace(t, "/a", "/a/b", "9")},
			[]string{"/a=deleted@2", "/a/b=9@2", "/a/c=deleted@2"}},
		{"deletes go first, updates last, whatever the order given", nil,
			[]*Op{update(t, "/a/b", "1"), del(t, "/a"), replace(t, "/a/c", "/a/c", "2")},
			[]string{"/a=deleted@1", "/a/b=1@1", "/a/c=2@1"}},
		{"a JSON value is recorded leaf by leaf", [][]*Op{{update(t, "/a", `{"b":1,"c":2}`)}},
			[]*Op{update(t, "/a/b", "5")},
			[]string{"/a/b=5@2", "/a/c=2@1"}},
		{"two JSON updates of a container merge", [][]*Op{{update(t, "/a", `{"b":1,"c":2}`)}},
			[]*Op{update(t, "/a", `{"d":3}`)},
			[]string{"/a/b=1@1", "/a/c=2@1", "/a/d=3@2"}},
		{"a JSON replace removes what it lacks", [][]*Op{{update(t, "/a", `{"b":1,"c":2}`)}},
			[]*Op{replace(t, "/a", "/a", `{"d":3}`)},
			[]string{"/a=deleted@2", "/a/b=deleted@2", "/a/c=deleted@2", "/a/d=3@2"}},
		{"the later write to a path wins", nil,
			[]*Op{update(t, "/a", "1"), update(t, "/a", "2")},
			[]string{"/a=2@1"}},
		{"deleting an absent path records a tombstone", nil,
			[]*Op{del(t, "/nothing")},
			[]string{"/nothing=deleted@1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			term := synced(t, j)
			for _, ops := range c.initial {
				applyChange(t, j, term, ops...)
			}
			applyChange(t, j, term, c.ops...)
			if got := committedList(t, j, nil); !slices.Equal(got, c.want) {
				t.Fatalf("committed:\n got %v\nwant %v", got, c.want)
			}
			checkInvariants(t, j)
		})
	}
}

func TestRollbackRestoresExactly(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	term := synced(t, j)
	applyChange(t, j, term, update(t, "/a/b", "1", "/a/c", "2"))
	state1 := committedList(t, j, nil)
	applyChange(t, j, term, del(t, "/a/c"), update(t, "/a/b", "3", "/new", "4"))
	if _, err := j.NewestRollbackable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ProposeChange(ctx, []*Op{update(t, "/z", "1")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.ProposeRollback(ctx, 2); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "proposal 3") {
		t.Fatalf("rollback with proposal 3 pending: %v, want a guard error naming proposal 3", err)
	}
	commitAndApply(t, j, term, 3)
	rollback(t, j, term, 3)
	i, err := j.NewestRollbackable(ctx)
	if err != nil || i != 2 {
		t.Fatalf("NewestRollbackable = %d, %v; want 2", i, err)
	}
	if _, _, err := j.ProposeRollback(ctx, 1); err == nil || !strings.Contains(err.Error(), "roll back proposal 2 first") {
		t.Fatalf("rolling back 1 before 2: %v", err)
	}
	rollback(t, j, term, 2)
	want := append(slices.Clone(state1), "/new=deleted@0", "/z=deleted@0")
	slices.Sort(want)
	got := committedList(t, j, nil)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("after rolling back 3 and 2:\n got %v\nwant %v (state after 1, absent paths as tombstones)", got, want)
	}
	c, _ := j.Configuration(ctx)
	if c.Committed.Index != 1 || c.Applied.Index != 1 || c.RollingBack != 0 {
		t.Fatalf("configuration %v", c)
	}
	if a := appliedList(t, j); !slices.Equal(a, committedList(t, j, nil)) {
		t.Fatalf("applied %v differs from committed", a)
	}
	checkInvariants(t, j)
	// A rolled-back proposal cannot be rolled back again; the next
	// change builds on the restored state.
	if _, _, err := j.ProposeRollback(ctx, 2); !errors.Is(err, ErrGuard) {
		t.Fatalf("second rollback of 2: %v", err)
	}
	applyChange(t, j, term, update(t, "/a/c", "5"))
	if got := committedList(t, j, mustPath(t, "/a")); !slices.Equal(got, []string{"/a/b=1@1", "/a/c=5@4"}) {
		t.Fatalf("after a new change: %v", got)
	}
	checkInvariants(t, j)
}

// FailApply of proposal 2 re-bases a later proposal committed on top of
// it (issue 34: no Set fails for another's failure): its commit goes back
// to Pending and, committed again, it has the values and rollback
// before-images it would have had had 2 never existed (the same
// proposals with 2's commit failed instead), and applies.
func TestFailApplyRebasesLaterProposals(t *testing.T) {
	for _, tc := range []struct {
		name string
		// failed are proposal 2's operations, later proposal 3's.
		failed, later []*Op
		// wantValues and wantRollback are 3's values and rollback values
		// once committed again.
		wantValues, wantRollback []string
	}{{
		name:         "same leaf",
		failed:       []*Op{update(t, "/a/b", "2")},
		later:        []*Op{update(t, "/a/b", "3")},
		wantValues:   []string{"/a/b=3@3"},
		wantRollback: []string{"/a/b=1@1"},
	}, {
		name:         "parent container as a JSON value",
		failed:       []*Op{update(t, "/a/b", "2", "/a/d", "2")},
		later:        []*Op{update(t, "/a", `{"b":"3","d":"3"}`)},
		wantValues:   []string{`/a/b="3"@3`, `/a/d="3"@3`},
		wantRollback: []string{"/a/b=1@1", "/a/d=deleted@0"},
	}, {
		name:         "parent container replaced",
		failed:       []*Op{update(t, "/a/d", "2")},
		later:        []*Op{replace(t, "/a", "/a/b", "3")},
		wantValues:   []string{"/a=deleted@3", "/a/b=3@3", "/a/c=deleted@3"},
		wantRollback: []string{"/a=deleted@0", "/a/b=1@1", "/a/c=1@1"},
	}, {
		name:         "child leaf of a JSON value",
		failed:       []*Op{update(t, "/a", `{"b":"2","d":"2"}`)},
		later:        []*Op{update(t, "/a/d", "3")},
		wantValues:   []string{"/a/d=3@3"},
		wantRollback: []string{"/a/d=deleted@0"},
	}, {
		name:         "delete of the subtree",
		failed:       []*Op{update(t, "/a/d", "2")},
		later:        []*Op{del(t, "/a")},
		wantValues:   []string{"/a=deleted@3", "/a/b=deleted@3", "/a/c=deleted@3"},
		wantRollback: []string{"/a=deleted@0", "/a/b=1@1", "/a/c=1@1"},
	}, {
		name:         "independent path",
		failed:       []*Op{update(t, "/a/b", "2")},
		later:        []*Op{update(t, "/y", "3")},
		wantValues:   []string{"/y=3@3"},
		wantRollback: []string{"/y=deleted@0"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// run journals 1 (applied), 2 and 3, commits 2 and 3 and
			// ends 2 with fail; it returns proposal 3 committed again.
			run := func(fail func(j *Journal, term uint64, rec *recorder) []string) (*Journal, *Proposal, []string) {
				rec := &recorder{}
				j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})
				term := synced(t, j)
				applyChange(t, j, term, update(t, "/a/b", "1", "/a/c", "1", "/x", "1"))
				for _, ops := range [][]*Op{tc.failed, tc.later} {
					if _, err := j.ProposeChange(ctx, ops); err != nil {
						t.Fatal(err)
					}
				}
				rec.take()
				events := fail(j, term, rec)
				checkInvariants(t, j)
				mustCommit(t, j, 3)
				p3, err := j.Proposal(ctx, 3)
				if err != nil {
					t.Fatal(err)
				}
				checkInvariants(t, j)
				if _, _, err := j.StartApply(ctx, 3); err != nil {
					t.Fatalf("StartApply(3) after the re-commit: %v", err)
				}
				if _, _, err := j.CompleteApply(ctx, 3, term); err != nil {
					t.Fatal(err)
				}
				checkInvariants(t, j)
				return j, p3, events
			}
			rebased, p3, events := run(func(j *Journal, term uint64, rec *recorder) []string {
				mustCommit(t, j, 2)
				mustCommit(t, j, 3)
				if _, _, err := j.StartApply(ctx, 2); err != nil {
					t.Fatal(err)
				}
				rec.take()
				p2, c, err := j.FailApply(ctx, 2, 3, "bad value")
				if err != nil {
					t.Fatal(err)
				}
				if p2.Change.Apply != StatusFailed || p2.Change.Error.GetMessage() != "bad value" {
					t.Errorf("proposal 2 after FailApply: %v", p2.Change)
				}
				if c.Committed.Index != 1 || c.Committed.Proposal != 2 {
					t.Errorf("committed = %v, want index 1 (applied), proposal 2 (3 is re-based)", c.Committed)
				}
				if got := committedList(t, j, nil); !slices.Equal(got, appliedList(t, j)) {
					t.Errorf("committed after FailApply %v, want the applied %v", got, appliedList(t, j))
				}
				p3, err := j.Proposal(ctx, 3)
				if err != nil {
					t.Fatal(err)
				}
				if ch := p3.Change; ch.Commit != StatusPending || ch.Apply != StatusPending || ch.AbortedBy != 0 ||
					ch.Error != nil || len(ch.Values) != 0 || ch.Committed != nil || len(p3.Rollback.GetValues()) != 0 || len(ch.Ops) == 0 {
					t.Errorf("proposal 3 after 2 failed: %v; want commit pending, not aborted, ops kept, values dropped", p3)
				}
				// Refused until it is committed again.
				if _, _, err := j.StartApply(ctx, 3); !errors.Is(err, ErrGuard) {
					t.Errorf("StartApply(3) before its new commit: %v, want ErrGuard", err)
				}
				return rec.take()
			})
			direct, want3, _ := run(func(j *Journal, term uint64, _ *recorder) []string {
				if _, _, err := j.FailCommit(ctx, 2, 3, "bad value"); err != nil {
					t.Fatal(err)
				}
				if _, _, err := j.AbortApply(ctx, 2); err != nil {
					t.Fatal(err)
				}
				return nil
			})
			if want := []string{"FailApply(2)", "Rebase(3)"}; !slices.Equal(events, want) {
				t.Errorf("events of FailApply: %v, want %v", events, want)
			}
			var values, undo []string
			for _, pv := range p3.Change.Values {
				values = append(values, render(pv))
			}
			for _, pv := range p3.Rollback.GetValues() {
				undo = append(undo, render(pv))
			}
			if !slices.Equal(values, tc.wantValues) || !slices.Equal(undo, tc.wantRollback) || p3.Rollback.GetIndex() != 1 {
				t.Errorf("proposal 3 committed again: values %v, rollback %v (index %d); want %v, %v (index 1)",
					values, undo, p3.Rollback.GetIndex(), tc.wantValues, tc.wantRollback)
			}
			if !slices.EqualFunc(p3.Change.Values, want3.Change.Values, func(a, b *PathValue) bool { return proto.Equal(a, b) }) {
				t.Errorf("values %v, want those of a direct commit %v", p3.Change.Values, want3.Change.Values)
			}
			if !slices.EqualFunc(p3.Rollback.GetValues(), want3.Rollback.GetValues(), func(a, b *PathValue) bool { return proto.Equal(a, b) }) {
				t.Errorf("rollback values %v, want those of a direct commit %v", p3.Rollback.GetValues(), want3.Rollback.GetValues())
			}
			if got, want := appliedList(t, rebased), appliedList(t, direct); !slices.Equal(got, want) {
				t.Errorf("applied after 3: %v, want %v", got, want)
			}
			if i, _ := rebased.NewestRollbackable(ctx); i != 3 {
				t.Errorf("NewestRollbackable = %d, want 3", i)
			}
		})
	}
}

// FailApply re-bases every later proposal committed and not applied, in
// index order, past one whose commit failed (aborted in its turn, its own
// error kept); commits then go on in index order from the first re-based
// one, and the outstanding commit-confirmed of a re-based proposal stays.
func TestFailApplyRebasesPastFailedCommit(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	j := openTest(t, "", Options{NoSync: true, Observer: rec.observe})
	term := synced(t, j)
	applyChange(t, j, term, update(t, "/a", "1"))
	for _, v := range []string{"2", "3", "4"} {
		if _, err := j.ProposeChange(ctx, []*Op{update(t, "/a", v, "/b"+v, v)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.ProposeConfirmedChange(ctx, Sender{}, []*Op{update(t, "/a", "5")}, "c5", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, j, 2)
	mustCommit(t, j, 3)
	if _, _, err := j.FailCommit(ctx, 4, 3, "invalid"); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, j, 5)
	if _, _, err := j.StartApply(ctx, 2); err != nil {
		t.Fatal(err)
	}
	rec.take()
	_, c, err := j.FailApply(ctx, 2, 3, "bad value")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rec.take(), []string{"FailApply(2)", "Rebase(3)", "Rebase(5)"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if c.Committed.Index != 1 || c.Committed.Proposal != 2 {
		t.Errorf("committed = %v, want index 1, proposal 2", c.Committed)
	}
	if got := committedList(t, j, nil); !slices.Equal(got, []string{"/a=1@1"}) {
		t.Errorf("committed after FailApply: %v, want the applied values", got)
	}
	if rec, err := j.CommitConfirm(ctx); err != nil || rec.GetProposal() != 5 {
		t.Errorf("commit-confirmed of the re-based proposal 5: %v, %v; want it kept", rec, err)
	}
	checkInvariants(t, j)
	if _, _, err := j.CommitChange(ctx, 5); !errors.Is(err, ErrGuard) {
		t.Errorf("CommitChange(5) before 3: %v, want ErrGuard (commits go in index order)", err)
	}
	mustCommit(t, j, 3)
	mustCommit(t, j, 5)
	p5, err := j.Proposal(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if p5.Rollback.GetIndex() != 3 {
		t.Errorf("proposal 5's rollback index %d, want 3 (4 failed to commit)", p5.Rollback.GetIndex())
	}
	if got := committedList(t, j, nil); !slices.Equal(got, []string{"/a=5@5", "/b3=3@3"}) {
		t.Errorf("committed after the re-commits: %v", got)
	}
	commitAndApplyCommitted(t, j, term, 3)
	if p, _, err := j.AbortApply(ctx, 4); err != nil || p.GetChange().GetError().GetMessage() != "invalid" {
		t.Errorf("AbortApply(4) = %v, %v; want aborted with its own error", p.GetChange(), err)
	}
	commitAndApplyCommitted(t, j, term, 5)
	checkInvariants(t, j)
}

func commitAndApplyCommitted(t *testing.T, j *Journal, term, i uint64) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := j.StartApply(ctx, i); err != nil {
		t.Fatalf("StartApply(%d): %v", i, err)
	}
	if _, _, err := j.CompleteApply(ctx, i, term); err != nil {
		t.Fatalf("CompleteApply(%d): %v", i, err)
	}
}

func TestAbortApplyAfterFailedCommit(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	term := synced(t, j)
	if _, err := j.ProposeChange(ctx, []*Op{update(t, "/a", "1")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.FailCommit(ctx, 1, 3, "schema says no"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.StartApply(ctx, 1); !errors.Is(err, ErrGuard) {
		t.Fatalf("apply of a failed commit: %v", err)
	}
	p, _, err := j.AbortApply(ctx, 1)
	if err != nil || p.Change.Apply != StatusAborted {
		t.Fatalf("AbortApply: %v, %v", p, err)
	}
	if got := committedList(t, j, nil); len(got) != 0 {
		t.Fatalf("a failed commit wrote values: %v", got)
	}
	applyChange(t, j, term, update(t, "/a", "2"))
	checkInvariants(t, j)
}

func TestCommittedAt(t *testing.T) {
	clock := &fakeClock{}
	j := openTest(t, "", Options{NoSync: true, Clock: clock.now, Retain: 2})
	ctx := context.Background()
	term := synced(t, j)
	clock.sec.Store(10)
	applyChange(t, j, term, update(t, "/a/b", "1", "/x", "1"))
	clock.sec.Store(20)
	applyChange(t, j, term, update(t, "/a/b", "2"), del(t, "/x"))
	clock.sec.Store(30)
	applyChange(t, j, term, update(t, "/a/c", "3"))
	clock.sec.Store(40)
	rollback(t, j, term, 3)
	cases := []struct {
		at     int64
		prefix string
		want   []string
	}{
		{5, "", nil},
		{10, "", []string{"/a/b=1@1", "/x=1@1"}},
		{15, "/a", []string{"/a/b=1@1"}},
		{25, "", []string{"/a/b=2@2", "/x=deleted@2"}},
		{35, "", []string{"/a/b=2@2", "/a/c=3@3", "/x=deleted@2"}},
		{35, "/a/c", []string{"/a/c=3@3"}},
		{45, "", []string{"/a/b=2@2", "/a/c=deleted@0", "/x=deleted@2"}},
	}
	for _, c := range cases {
		var prefix *gnmi.Path
		if c.prefix != "" {
			prefix = mustPath(t, c.prefix)
		}
		got, err := committedAtList(t, j, c.at, prefix)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("at %d under %q: %v, %v; want %v", c.at, c.prefix, got, err, c.want)
		}
	}
	// Retention (newest 2 of 3) drops proposal 1 and its history.
	if n, err := j.Compact(ctx); err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v", n, err)
	}
	if _, err := committedAtList(t, j, 5, nil); !errors.Is(err, ErrCompacted) {
		t.Fatalf("before the history floor: %v, want ErrCompacted", err)
	}
	// The dropped delta is at 10: later times are still reconstructible.
	if got, err := committedAtList(t, j, 15, nil); err != nil || !slices.Equal(got, []string{"/a/b=1@1", "/x=1@1"}) {
		t.Fatalf("after compaction at 15: %v, %v", got, err)
	}
	if got, err := committedAtList(t, j, 25, nil); err != nil || !slices.Equal(got, []string{"/a/b=2@2", "/x=deleted@2"}) {
		t.Fatalf("after compaction at 25: %v, %v", got, err)
	}
	if _, err := j.Proposal(ctx, 1); !errors.Is(err, ErrCompacted) {
		t.Fatalf("compacted proposal: %v", err)
	}
}

func TestReopenAfterCompactionKeepsConfiguration(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, Options{NoSync: true, Retain: 5})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	term := synced(t, j)
	for n := range 40 {
		ops := []*Op{update(t, fmt.Sprintf("/l[k=%d]/v", n%7), fmt.Sprint(n))}
		if n%9 == 4 {
			ops = append(ops, del(t, fmt.Sprintf("/l[k=%d]", (n+3)%7)))
		}
		applyChange(t, j, term, ops...)
		if n%10 == 9 {
			rollback(t, j, term, uint64(n+1))
		}
	}
	liveCommitted, liveApplied := live(committedList(t, j, nil)), live(appliedList(t, j))
	dropped, err := j.Compact(ctx)
	if err != nil || dropped != 35 {
		t.Fatalf("Compact = %d, %v; want 35 dropped", dropped, err)
	}
	// Compaction keeps every value in effect; the tombstones of the deletes
	// (proposals 5, 14, 23, 32, all dropped) go, as no value is stored at
	// an ancestor of what they deleted.
	committed, applied := committedList(t, j, nil), appliedList(t, j)
	if got := live(committed); !slices.Equal(got, liveCommitted) || !slices.Equal(committed, got) {
		t.Fatalf("committed after compaction:\n got %v\nwant %v", committed, liveCommitted)
	}
	if got := live(applied); !slices.Equal(got, liveApplied) || !slices.Equal(applied, got) {
		t.Fatalf("applied after compaction:\n got %v\nwant %v", applied, liveApplied)
	}
	c1, _ := j.Configuration(ctx)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openTest(t, dir, Options{NoSync: true, Retain: 5})
	c2, _ := j.Configuration(ctx)
	if c2.FirstIndex != 36 || c2.LastIndex != 40 || c1.String() != c2.String() {
		t.Fatalf("configuration record: before %v, after reopen %v", c1, c2)
	}
	if got := committedList(t, j, nil); !slices.Equal(got, committed) {
		t.Fatalf("committed changed:\n got %v\nwant %v", got, committed)
	}
	if got := appliedList(t, j); !slices.Equal(got, applied) {
		t.Fatalf("applied changed:\n got %v\nwant %v", got, applied)
	}
	var kept []uint64
	if err := j.Proposals(ctx, 0, 0, func(p *Proposal) error { kept = append(kept, p.Index); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kept, []uint64{36, 37, 38, 39, 40}) {
		t.Fatalf("kept proposals %v", kept)
	}
	checkInvariants(t, j)
	applyChange(t, j, synced(t, j), update(t, "/after", "1"))
	checkInvariants(t, j)
}

// live drops the tombstones from a rendered value list.
func live(values []string) []string {
	var out []string
	for _, v := range values {
		if !strings.Contains(v, "=deleted@") {
			out = append(out, v)
		}
	}
	return out
}

func TestRetentionDropsTombstonesNoLongerNeeded(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, Retain: 2})
	ctx := context.Background()
	term := synced(t, j)
	applyChange(t, j, term, asciiUpdate(t, "/a", "a b c"))      // 1: an opaque value at /a
	applyChange(t, j, term, del(t, "/a/b"))                     // 2: under /a@1, needed
	applyChange(t, j, term, del(t, "/x"))                       // 3: nothing above, dropped
	applyChange(t, j, term, update(t, "/l", `[{"k":1,"v":1}]`)) // 4: a value at the list's path
	applyChange(t, j, term, del(t, "/l[k=1]/v"))                // 5: under the list /l@4, needed
	applyChange(t, j, term, del(t, "/q/r"))                     // 6: /q is written later, dropped
	applyChange(t, j, term, update(t, "/q", `{"s":1}`))         // 7: JSON, leaf by leaf: nothing at /q
	applyChange(t, j, term, update(t, "/n", "1"))               // 8
	rollback(t, j, term, 8)                                     // /n=deleted@0, dropped
	// 9: a delete under a value the same Set writes: the delete runs first
	// and the value overwrites its tombstone.
	applyChange(t, j, term, update(t, "/z", "1"), update(t, "/m", `{"b":1}`), del(t, "/m/b"))
	applyChange(t, j, term, update(t, "/z", "2"), del(t, "/y")) // 10: kept proposal
	applyChange(t, j, term, update(t, "/w", "1"))               // 11: kept proposal
	before := committedList(t, j, nil)
	if n, err := j.Compact(ctx); err != nil || n != 9 {
		t.Fatalf("Compact = %d, %v; want 9 proposals dropped", n, err)
	}
	want := []string{
		"/a=a b c@1", "/a/b=deleted@2",
		`/l=[{"k":1,"v":1}]@4`, "/l[k=1]/v=deleted@5",
		"/m/b=1@9", "/q/s=1@7",
		"/w=1@11", "/y=deleted@10", "/z=2@10",
	}
	if got := committedList(t, j, nil); !slices.Equal(got, want) {
		t.Fatalf("committed after compaction:\n got %v\nwant %v\n(before %v)", got, want, before)
	}
	if got := appliedList(t, j); !slices.Equal(got, want) {
		t.Fatalf("applied after compaction:\n got %v\nwant %v", got, want)
	}
	// A re-push sends them in path order, what is under a value (/a, /l)
	// after it, in index order.
	if order := appliedReplayList(t, j); !slices.Equal(order, want) {
		t.Fatalf("re-push order %v, want %v", order, want)
	}
	// The committed configuration now and in the history agree.
	var now []string
	if err := j.CommittedAt(ctx, time.Now().Add(time.Hour), nil, func(pv *PathValue) error {
		now = append(now, render(pv))
		return nil
	}); err != nil || !slices.Equal(now, want) {
		t.Fatalf("CommittedAt(now) = %v, %v; want %v", now, err, want)
	}
	checkInvariants(t, j)
	// A second pass finds nothing more to drop, and the journal goes on.
	if _, err := j.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committedList(t, j, nil); !slices.Equal(got, want) {
		t.Fatalf("second compaction changed committed: %v", got)
	}
	applyChange(t, j, term, update(t, "/a/b", "3"))
	checkInvariants(t, j)
}

func TestRetentionStopsAtUnfinishedProposal(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, Retain: 1})
	ctx := context.Background()
	for range 3 {
		if _, err := j.ProposeChange(ctx, []*Op{update(t, "/a", "1")}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := j.Compact(ctx); err != nil || n != 0 {
		t.Fatalf("Compact dropped %d unfinished proposals (%v)", n, err)
	}
}

// TestRetentionDropsTombstonesUnderMarkers: a marker ({} at a list entry)
// holds nothing, so a tombstone under it is dropped like any other.
func TestRetentionDropsTombstonesUnderMarkers(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, Retain: 1})
	term := synced(t, j)
	applyChange(t, j, term, update(t, "/e[k=1]/v", "1")) // 1: the entry and v
	applyChange(t, j, term, del(t, "/e[k=1]/v"))         // 2: under the entry's marker
	applyChange(t, j, term, update(t, "/w", "1"))        // 3: kept
	if _, err := j.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"/e[k=1]={}@1", "/w=1@3"}
	if got := appliedList(t, j); !slices.Equal(got, want) {
		t.Fatalf("applied after compaction: got %v, want %v", got, want)
	}
	checkInvariants(t, j)
}

func TestReplayApplied(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	term := synced(t, j)
	applyChange(t, j, term, update(t, "/b", "1", "/a", `{"x":1,"y":1}`))
	applyChange(t, j, term, update(t, "/a/x", "2"))
	applyChange(t, j, term, update(t, "/b", "3"))
	got := appliedReplayList(t, j)
	want := []string{"/a/x=2@2", "/a/y=1@1", "/b=3@3"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestConnectNeverReusesTerms(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var terms []uint64
	for range 3 {
		j, err := Open(dir, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			m, err := j.Connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			terms = append(terms, m.Term)
			if m.Conn != m.Term {
				t.Fatalf("conn %d, term %d", m.Conn, m.Term)
			}
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(terms, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("terms %v", terms)
	}
}

// TestConcurrentWritersShareTransactions: concurrent proposals all succeed,
// get distinct consecutive indexes, and share commits.
func TestConcurrentWritersShareTransactions(t *testing.T) {
	j := openTest(t, "", Options{})
	ctx := context.Background()
	const writers, each = 32, 10
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := range each {
				p, err := j.ProposeChange(ctx, []*Op{update(t, fmt.Sprintf("/w%d", w), fmt.Sprint(n))})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[p.Index] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != writers*each {
		t.Fatalf("%d distinct indexes for %d proposals", len(seen), writers*each)
	}
	for i := uint64(1); i <= writers*each; i++ {
		if !seen[i] {
			t.Fatalf("index %d never assigned", i)
		}
	}
	checkInvariants(t, j)
}

func TestCancelledContextWritesNothing(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := dump(t, j)
	if _, err := j.ProposeChange(ctx, []*Op{update(t, "/a", "1")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if !maps.Equal(before, dump(t, j)) {
		t.Fatal("a cancelled request was written")
	}
}

func TestClosedJournal(t *testing.T) {
	j, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Connect(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if _, err := j.Configuration(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

// TestSecondProcessIsLockedOut opens the journal in a helper process and
// checks that this process cannot open it, then can once the helper is gone.
func TestSecondProcessIsLockedOut(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=hold", "JOURNAL_DIR="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 6)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	_, err = Open(dir, Options{NoSync: true})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open while another process holds it: %v, want ErrLocked naming the directory", err)
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	j := openTest(t, dir, Options{NoSync: true})
	if _, err := j.Configuration(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRejectsForeignData(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	// Pretend a future version wrote the directory.
	if err := j.submit(context.Background(), func(w *writeTxn) error {
		return w.put(keyMeta, &CommitConfirm{Id: "not a meta record"})
	}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{NoSync: true}); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open of an unreadable journal: %v", err)
	}
}

// TestOversizedTransitionFailsAlone: a transition too big for the largest
// memtable the journal may grow (here: no growth) fails with Badger's ErrTxnTooBig, while the transitions
// batched with it succeed and the journal stays consistent.
func TestOversizedTransitionFailsAlone(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, MemTableSize: 1 << 20, MaxMemTableSize: 1 << 20})
	ctx := context.Background()
	term := synced(t, j)
	var huge []string
	for n := range 5000 {
		huge = append(huge, fmt.Sprintf("/big[k=%d]/v", n), "x")
	}
	hugeIndex, err := j.ProposeChange(ctx, []*Op{update(t, huge...)})
	if err != nil {
		t.Fatal(err) // the record goes to the value log: proposing fits
	}
	errs := make(chan error, 9)
	var wg sync.WaitGroup
	wg.Go(func() { _, _, err := j.CommitChange(ctx, hugeIndex.Index); errs <- err })
	for n := range 8 {
		wg.Go(func() {
			_, err := j.ProposeChange(ctx, []*Op{update(t, fmt.Sprintf("/small%d", n), "1")})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if !errors.Is(err, badger.ErrTxnTooBig) || !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error %v, want ErrTooLarge", err)
			}
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d transitions failed, want only the oversized commit", failed)
	}
	p, err := j.Proposal(ctx, hugeIndex.Index)
	if err != nil || p.Change.Commit != StatusPending {
		t.Fatalf("oversized commit left %v, %v", p.GetChange().GetCommit(), err)
	}
	c, _ := j.Configuration(ctx)
	if c.LastIndex != 9 || c.Committed.Index != 0 {
		t.Fatalf("configuration %v", c)
	}
	if got := committedList(t, j, nil); len(got) != 0 {
		t.Fatalf("committed values after a failed commit: %d", len(got))
	}
	checkInvariants(t, j)
	// The agent can still fail the oversized proposal and carry on.
	if _, _, err := j.FailCommit(ctx, hugeIndex.Index, 8, "too large"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.AbortApply(ctx, hugeIndex.Index); err != nil {
		t.Fatal(err)
	}
	commitAndApply(t, j, term, 2)
	checkInvariants(t, j)
}

// TestBatchIsolatesFailingRequest drives the writer's batching directly: a
// request that fails after writing, or that overflows the transaction, is
// rolled back alone; the requests around it are committed.
func TestBatchIsolatesFailingRequest(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, MemTableSize: 1 << 20, MaxMemTableSize: 1 << 20})
	mark := func(name string) func(w *writeTxn) error {
		return func(w *writeTxn) error { return w.putEmpty([]byte("t/" + name)) }
	}
	broken := func(w *writeTxn) error {
		if err := w.putEmpty([]byte("t/broken")); err != nil {
			return err
		}
		return errors.New("disk on fire")
	}
	tooBig := func(w *writeTxn) error {
		for n := range 100_000 {
			if err := w.putEmpty(fmt.Appendf(nil, "t/big/%d", n)); err != nil {
				return err
			}
		}
		return nil
	}
	refused := func(*writeTxn) error { return guardf("no") }
	fns := []func(*writeTxn) error{mark("a"), refused, mark("b"), broken, mark("c"), tooBig, mark("d")}
	var batch []*request
	for _, fn := range fns {
		batch = append(batch, &request{fn: fn, done: make(chan struct{})})
	}
	for rest := batch; len(rest) > 0; {
		rest = rest[j.runBatch(rest):]
	}
	wantErr := []error{nil, ErrGuard, nil, errors.New("disk on fire"), nil, badger.ErrTxnTooBig, nil}
	for n, r := range batch {
		<-r.done
		switch {
		case wantErr[n] == nil && r.err != nil,
			wantErr[n] != nil && r.err == nil,
			wantErr[n] != nil && !errors.Is(r.err, wantErr[n]) && !strings.Contains(r.err.Error(), wantErr[n].Error()):
			t.Errorf("request %d: err = %v, want %v", n, r.err, wantErr[n])
		}
	}
	var keys []string
	for k := range dump(t, j) {
		if strings.HasPrefix(k, "t/") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if want := []string{"t/a", "t/b", "t/c", "t/d"}; !slices.Equal(keys, want) {
		t.Fatalf("written %v, want %v", keys, want)
	}
}

// TestConfigurationRecordThatDoesNotFit: a transaction writes the
// configuration record once, at its end (flushConfiguration). When that
// last record is what overflows the transaction, the batch's last request
// is the one that did not fit: the requests before it are committed with
// the record, and it runs in a transaction of its own. Nothing is lost,
// and the stored configuration is the one every request left.
func TestConfigurationRecordThatDoesNotFit(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true, MemTableSize: 1 << 20, MaxMemTableSize: 1 << 20})
	ctx := context.Background()
	before, err := j.Configuration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// How many entries one transaction holds (Badger counts its own
	// commit marker against its limit).
	capacity := 0
	txn := j.db.NewTransaction(true)
	for ; txn.Set(fmt.Appendf(nil, "t/probe/%d", capacity), nil) == nil; capacity++ {
	}
	txn.Discard()
	tagChange := func(w *writeTxn) error {
		c, err := w.configuration()
		if err != nil {
			return err
		}
		c.TagChanges++
		return w.putOwnedConfiguration(c)
	}
	fill := func(prefix string, n int) func(w *writeTxn) error {
		return func(w *writeTxn) error {
			for k := range n {
				if err := w.putEmpty(fmt.Appendf(nil, "t/%s/%d", prefix, k)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	both := func(fns ...func(*writeTxn) error) func(*writeTxn) error {
		return func(w *writeTxn) error {
			for _, fn := range fns {
				if err := fn(w); err != nil {
					return err
				}
			}
			return nil
		}
	}
	// The two requests' entries fill the transaction; the configuration
	// record both changed, which comes last, does not fit.
	batch := []*request{
		{fn: both(fill("a", capacity-2), tagChange), done: make(chan struct{})},
		{fn: both(fill("b", 2), tagChange), done: make(chan struct{})},
	}
	if n := j.runBatch(batch); n != 1 {
		t.Fatalf("the first transaction consumed %d requests, want 1 (the second did not fit with the configuration)", n)
	}
	if n := j.runBatch(batch[1:]); n != 1 {
		t.Fatalf("the second request alone: consumed %d", n)
	}
	for n, r := range batch {
		<-r.done
		if r.err != nil {
			t.Fatalf("request %d: %v", n, r.err)
		}
	}
	written := 0
	for k := range dump(t, j) {
		if strings.HasPrefix(k, "t/") {
			written++
		}
	}
	if want := capacity; written != want {
		t.Fatalf("%d entries written, want %d", written, want)
	}
	after, err := j.Configuration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.TagChanges != before.TagChanges+2 {
		t.Fatalf("tag changes %d, want %d: a request's configuration was lost", after.TagChanges, before.TagChanges+2)
	}
	checkInvariants(t, j)

	// Alone, a request whose configuration record does not fit fails with
	// ErrTooLarge (the memtable may not grow here) and writes nothing.
	alone := &request{fn: both(fill("c", capacity), tagChange), done: make(chan struct{})}
	if n := j.runBatch([]*request{alone}); n != 1 {
		t.Fatalf("consumed %d", n)
	}
	<-alone.done
	if !errors.Is(alone.err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", alone.err)
	}
	if got, err := j.Configuration(ctx); err != nil || got.TagChanges != after.TagChanges {
		t.Fatalf("configuration after a refused request: %v, %v", got, err)
	}
	for k := range dump(t, j) {
		if strings.HasPrefix(k, "t/c/") {
			t.Fatalf("the refused request wrote %s", k)
		}
	}
	checkInvariants(t, j)
}

func TestHistoryTimeNeverGoesBack(t *testing.T) {
	clock := &fakeClock{}
	j := openTest(t, "", Options{NoSync: true, Clock: clock.now})
	term := synced(t, j)
	clock.sec.Store(100)
	applyChange(t, j, term, update(t, "/a", "1"))
	clock.sec.Store(50) // the wall clock steps back
	applyChange(t, j, term, update(t, "/a", "2"))
	got, err := committedAtList(t, j, 75, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("at 75: %v, %v; want nothing (both changes happened at or after 100)", got, err)
	}
	// Each delta is strictly later than the one before: the second is
	// 1 ns after the first, so a time names one configuration.
	if got, _ := committedAtList(t, j, 100, nil); !slices.Equal(got, []string{"/a=1@1"}) {
		t.Fatalf("at 100: %v, want the first change only", got)
	}
	var later []string
	err = j.CommittedAt(context.Background(), fakeTime(100).Add(time.Nanosecond), nil, func(pv *PathValue) error {
		later = append(later, render(pv))
		return nil
	})
	if err != nil || !slices.Equal(later, []string{"/a=2@2"}) {
		t.Fatalf("at 100 s + 1 ns: %v, %v", later, err)
	}
}

// FuzzPathKey checks the path-key properties on arbitrary names and list
// keys: a child is under its parent and sorts after it, a sibling whose
// name extends the parent's is not under it, and different paths have
// different keys.
func FuzzPathKey(f *testing.F) {
	f.Add("a", "b", "k", "v", "c")
	f.Add("a\x01", "\x02b", "k\x03", "v\x04", "\x00")
	f.Add("", "", "", "", "")
	f.Fuzz(func(t *testing.T, n1, n2, k, v, extra string) {
		if n1 == "" || n2 == "" || extra == "" {
			return
		}
		parent := &gnmi.Path{Elem: []*gnmi.PathElem{{Name: n1}, {Name: n2, Key: map[string]string{k: v}}}}
		child := proto.CloneOf(parent)
		child.Elem = append(child.Elem, &gnmi.PathElem{Name: extra})
		if !IsUnder(child, parent) || bytes.Compare(PathKey(child), PathKey(parent)) <= 0 {
			t.Fatalf("child %q not under / after parent %q", PathKey(child), PathKey(parent))
		}
		sibling := proto.CloneOf(parent)
		sibling.Elem[1] = &gnmi.PathElem{Name: n2 + extra, Key: map[string]string{k: v}}
		if IsUnder(sibling, parent) {
			t.Fatalf("%s is under %s", gnmipath.String(sibling), gnmipath.String(parent))
		}
		other := proto.CloneOf(parent)
		other.Elem[1].Key = map[string]string{k: v + extra}
		if bytes.Equal(PathKey(other), PathKey(parent)) || IsUnder(other, parent) {
			t.Fatalf("list key values %q and %q collide", v, v+extra)
		}
		joined := &gnmi.Path{Elem: []*gnmi.PathElem{{Name: n1 + n2}}}
		if bytes.Equal(PathKey(joined), PathKey(&gnmi.Path{Elem: []*gnmi.PathElem{{Name: n1}, {Name: n2}}})) {
			t.Fatal("element boundaries are lost")
		}
	})
}

// ProposalStatus reads what the decisions read of a proposal (statuses,
// adoption, aborted_by) as Proposal reads it, in every state.
func TestProposalStatusMatchesProposal(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	term := synced(t, j)
	check := func(when string) {
		t.Helper()
		c, err := j.Configuration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := c.GetFirstIndex(); i <= c.GetLastIndex(); i++ {
			full, err := j.Proposal(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			st, err := j.ProposalStatus(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			ch, sc := full.GetChange(), st.GetChange()
			want := []any{full.GetIndex(), full.GetPhase(), ch.GetCommit(), ch.GetApply(), ch.GetAdopted(), ch.GetAdoptedTerm(),
				ch.GetAbortedBy(), ch.GetBaseline(), full.GetRollback().GetCommit(), full.GetRollback().GetApply()}
			got := []any{st.GetIndex(), st.GetPhase(), sc.GetCommit(), sc.GetApply(), sc.GetAdopted(), sc.GetAdoptedTerm(),
				sc.GetAbortedBy(), sc.GetBaseline(), st.GetRollback().GetCommit(), st.GetRollback().GetApply()}
			if !slices.Equal(got, want) {
				t.Errorf("%s: proposal %d: status view %v, proposal %v", when, i, got, want)
			}
		}
		// ProposalStatuses streams the same statuses (a proposal the
		// writer keeps decoded comes whole, values and all).
		statusOf := func(p *Proposal) []any {
			ch := p.GetChange()
			return []any{p.GetIndex(), p.GetPhase(), ch.GetCommit(), ch.GetApply(), ch.GetAdopted(), ch.GetAdoptedTerm(),
				ch.GetAbortedBy(), ch.GetBaseline(), p.GetRollback().GetCommit(), p.GetRollback().GetApply()}
		}
		next := c.GetFirstIndex()
		err = j.ProposalStatuses(ctx, 0, 0, func(p *Proposal) error {
			st, err := j.ProposalStatus(ctx, next)
			if err != nil {
				return err
			}
			if got, want := statusOf(p), statusOf(st); !slices.Equal(got, want) {
				t.Errorf("%s: ProposalStatuses gave %v for proposal %d, ProposalStatus %v", when, got, next, want)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if next != c.GetLastIndex()+1 {
			t.Errorf("%s: ProposalStatuses gave proposals up to %d, want up to %d", when, next-1, c.GetLastIndex())
		}
	}
	applyChange(t, j, term, update(t, "/a", "1"))
	for _, op := range []*Op{update(t, "/a", "2"), update(t, "/a", "4")} {
		if _, err := j.ProposeChange(ctx, []*Op{op}); err != nil {
			t.Fatal(err)
		}
	}
	check("proposed")
	mustCommit(t, j, 2)
	mustCommit(t, j, 3)
	if _, _, err := j.StartApply(ctx, 2); err != nil {
		t.Fatal(err)
	}
	check("started")
	if _, _, err := j.FailApply(ctx, 2, 3, "bad value"); err != nil {
		t.Fatal(err)
	}
	check("failed, a later one re-based")
	mustCommit(t, j, 3)
	check("re-based, committed again")
	if _, err := j.ProposeAdoption(ctx, Sender{Author: "device"}, []*Op{update(t, "/b", "5")}); err != nil {
		t.Fatal(err)
	}
	check("adopted")
	if _, err := j.ProposeBaseline(ctx, Sender{Author: "device"}, []*gnmi.Path{mustPath(t, "/c")}, []*Op{update(t, "/c", "6")}, BaselinePart{Final: true}); err != nil {
		t.Fatal(err)
	}
	check("baseline")
	if _, _, err := j.ProposeRollback(ctx, 1); err == nil {
		check("rolling back")
	}
}

// TestSameLeaf: sameLeaf agrees with proto.Equal, taking its shortcut
// only when the leaves share their parts.
func TestSameLeaf(t *testing.T) {
	path := mustPath(t, "/a/b[k=1]/c")
	value := strVal("x")
	withUnknown := proto.CloneOf(path)
	withUnknown.ProtoReflect().SetUnknown([]byte{0xf8, 0x3f, 0x01}) // field 1023, varint 1
	for _, tc := range []struct {
		name string
		a, b *Leaf
		want bool
	}{
		{"shared path elements and value", &Leaf{Path: path, Value: value}, &Leaf{Path: &gnmi.Path{Elem: slices.Clone(path.Elem)}, Value: value}, true},
		{"equal copies", &Leaf{Path: path, Value: value}, &Leaf{Path: proto.CloneOf(path), Value: strVal("x")}, true},
		{"another value", &Leaf{Path: path, Value: value}, &Leaf{Path: path, Value: strVal("y")}, false},
		{"another origin", &Leaf{Path: path, Value: value}, &Leaf{Path: &gnmi.Path{Origin: "o", Elem: path.Elem}, Value: value}, false},
		{"fewer elements", &Leaf{Path: path, Value: value}, &Leaf{Path: &gnmi.Path{Elem: path.Elem[:2]}, Value: value}, false},
		{"a missing path and an empty one", &Leaf{Value: value}, &Leaf{Path: &gnmi.Path{}, Value: value}, false},
		{"a path with unknown fields", &Leaf{Path: withUnknown, Value: value}, &Leaf{Path: &gnmi.Path{Elem: withUnknown.Elem}, Value: value}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameLeaf(tc.a, tc.b); got != tc.want {
				t.Errorf("sameLeaf = %v, want %v", got, tc.want)
			}
			if got := proto.Equal(tc.a, tc.b); got != tc.want {
				t.Errorf("proto.Equal = %v: the case's want is wrong", got)
			}
		})
	}
}
