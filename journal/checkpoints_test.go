package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// liveValues renders the committed values that are not tombstones as
// path → value by meaning (a JSON string and a string_val alike): what
// the device should hold.
func liveValues(t testing.TB, j *Journal) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := j.Committed(context.Background(), nil, func(pv *PathValue) error {
		addLive(out, pv)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func addLive(m map[string]string, pv *PathValue) {
	if pv.GetDeleted() {
		return
	}
	v := pv.GetValue()
	s := v.GetStringVal()
	if b := v.GetJsonIetfVal(); b != nil {
		var x any
		if err := json.Unmarshal(b, &x); err == nil {
			if str, ok := x.(string); ok {
				s = str
			} else {
				norm, _ := json.Marshal(x)
				s = string(norm)
			}
		}
	}
	m[gnmipath.String(pv.GetPath())] = s
}

func liveAt(t testing.TB, j *Journal, at time.Time) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := j.CommittedAt(context.Background(), at, nil, func(pv *PathValue) error {
		addLive(out, pv)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// randomSet is one random Set over a small tree: leaves, a JSON container,
// list entries (keys learned from their keyed paths), replaces,
// union_replaces and subtree deletes.
func randomSet(t testing.TB, r *rand.Rand, n int) []*Op {
	val := func() string { return fmt.Sprintf("v%d", r.IntN(4)) }
	entry := func() string { return fmt.Sprintf("/l/e[k=%d]", r.IntN(3)) }
	var ops []*Op
	for range 1 + r.IntN(n) {
		switch r.IntN(9) {
		case 8:
			ops = append(ops, del(t, "/l/e[k=*]/w"))
		case 7:
			ops = append(ops, &Op{Kind: OpUnionReplace, Path: mustPath(t, "/t"),
				Values: []*Leaf{{Path: mustPath(t, "/t"), Value: jsonVal(fmt.Sprintf(`{"a":%q,"c":{"d":%q}}`, val(), val()))}}})
		case 0:
			ops = append(ops, update(t, "/t/a", val()))
		case 1:
			ops = append(ops, update(t, entry()+"/v", val()))
		case 2:
			ops = append(ops, &Op{Kind: OpUpdate, Path: mustPath(t, "/t"),
				Values: []*Leaf{{Path: mustPath(t, "/t"), Value: jsonVal(fmt.Sprintf(`{"b":%q,"c":{"d":%q}}`, val(), val()))}}})
		case 3:
			ops = append(ops, replace(t, "/t", "/t/a", val()))
		case 4:
			ops = append(ops, del(t, entry()))
		case 5:
			ops = append(ops, del(t, "/t/c"))
		case 6:
			e := entry()
			ops = append(ops, &Op{Kind: OpUpdate, Path: mustPath(t, e),
				Values: []*Leaf{{Path: mustPath(t, e), Value: jsonVal(fmt.Sprintf(`{"v":%q,"w":%q}`, val(), val()))}}})
		}
	}
	return ops
}

// TestRestoreModel drives random Sets, rollbacks, tags and restores (to a
// tag, to an index, to before the first change) and checks after every
// restore that the committed configuration is exactly the one at the
// point, that a History snapshot at the tag's time reads it too, and that
// rolling the restore back returns to what was before it.
func TestRestoreModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 21))
			j := openTest(t, "", Options{NoSync: true})
			ctx := context.Background()
			term := synced(t, j)
			type point struct {
				name  string
				state map[string]string
				index uint64
			}
			var tags []point
			after := map[uint64]map[string]string{0: {}} // state right after proposal i's commit
			restores := 0
			for step := range 60 {
				switch k := r.IntN(10); {
				case k < 6:
					i := applyChange(t, j, term, randomSet(t, r, 3)...)
					after[i] = liveValues(t, j)
				case k == 6:
					name := fmt.Sprintf("tag-%d", step)
					tag, err := j.CreateTag(ctx, name, Point{Latest: true}, Sender{Author: "alice", Comment: "before step"})
					if err != nil {
						t.Fatal(err)
					}
					tags = append(tags, point{name, liveValues(t, j), tag.GetIndex()})
					if got := liveAt(t, j, tag.GetTime().AsTime()); !maps.Equal(got, liveValues(t, j)) {
						t.Fatalf("History at tag %s's time: %v, want %v", name, got, liveValues(t, j))
					}
				case k == 7:
					c, _ := j.Configuration(ctx)
					if c.GetCommitted().GetIndex() == 0 {
						continue
					}
					i := c.GetCommitted().GetIndex()
					if _, err := j.NewestRollbackable(ctx); err != nil {
						continue
					}
					predicted := predictRollback(t, j, i)
					rollback(t, j, term, i)
					if got := liveValues(t, j); !maps.Equal(got, predicted) {
						t.Fatalf("step %d: rollback of %d: the dry run predicted %v, the rollback made %v", step, i, predicted, got)
					}
				default:
					var pt Point
					var want map[string]string
					switch {
					case len(tags) > 0 && r.IntN(2) == 0:
						tp := tags[r.IntN(len(tags))]
						pt, want = Point{Tag: tp.name}, tp.state
					default:
						c, _ := j.Configuration(ctx)
						i := r.Uint64N(c.GetLastIndex() + 1)
						st, ok := after[i]
						if !ok {
							continue // a rollback, not a change
						}
						pt, want = Point{Index: i}, st
					}
					before := liveValues(t, j)
					keys := dump(t, j)
					diff, _, err := j.RestoreDiff(ctx, pt)
					if err != nil {
						t.Fatalf("step %d: dry run of the restore to %s: %v", step, pt, err)
					}
					if !maps.Equal(keys, dump(t, j)) {
						t.Fatal("the restore's dry run wrote to the journal")
					}
					if got := applyDiff(before, diff); !maps.Equal(got, want) {
						t.Fatalf("step %d: restore to %s: the dry run predicts %v, want %v", step, pt, got, want)
					}
					p, err := j.ProposeRestore(ctx, Sender{Author: "bob", Comment: "back"}, pt)
					if errors.Is(err, ErrNoChange) {
						if !maps.Equal(before, want) {
							t.Fatalf("step %d: restore to %s: nothing to change, yet %v != %v", step, pt, before, want)
						}
						continue
					}
					if err != nil {
						t.Fatalf("step %d: restore to %s: %v", step, pt, err)
					}
					if p.GetChange().GetRestores() == nil || p.GetChange().GetAuthor() != "bob" || p.GetChange().GetComment() != "back" {
						t.Fatalf("restore proposal records %v, author %q, comment %q", p.GetChange().GetRestores(), p.GetChange().GetAuthor(), p.GetChange().GetComment())
					}
					commitAndApply(t, j, term, p.GetIndex())
					restores++
					if got := liveValues(t, j); !maps.Equal(got, want) {
						t.Fatalf("step %d: after restoring %s:\n got %v\nwant %v\nops %v", step, pt, got, want, p.GetChange().GetOps())
					}
					after[p.GetIndex()] = liveValues(t, j)
					if r.IntN(3) == 0 {
						rollback(t, j, term, p.GetIndex())
						if got := liveValues(t, j); !maps.Equal(got, before) {
							t.Fatalf("step %d: rolling back the restore: %v, want %v", step, got, before)
						}
					}
				}
			}
			checkInvariants(t, j)
			if restores == 0 {
				t.Log("no restore changed anything in this seed")
			}
		})
	}
}

// applyDiff returns live values as a dry run's diff says they become.
func applyDiff(live map[string]string, diff []LeafDiff) map[string]string {
	out := maps.Clone(live)
	for _, d := range diff {
		delete(out, gnmipath.String(d.Path))
		addLive(out, d.After)
	}
	return out
}

// predictRollback returns the live values the rollback of proposal i
// would leave, by its dry run, checking that the dry run writes nothing.
func predictRollback(t *testing.T, j *Journal, i uint64) map[string]string {
	t.Helper()
	before, keys := liveValues(t, j), dump(t, j)
	diff, got, err := j.RollbackDiff(context.Background(), i)
	if err != nil || got != i {
		t.Fatalf("dry run of the rollback of %d: %v (proposal %d)", i, err, got)
	}
	if !maps.Equal(keys, dump(t, j)) {
		t.Fatal("the rollback's dry run wrote to the journal")
	}
	return applyDiff(before, diff)
}

func TestTags(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "", Options{NoSync: true})
	term := synced(t, j)
	applyChange(t, j, term, update(t, "/a", "1"))
	i2 := applyChange(t, j, term, update(t, "/a", "2"))
	applyChange(t, j, term, update(t, "/a", "3"))

	tag, err := j.CreateTag(ctx, "good", Point{Index: i2}, Sender{Author: "alice", Comment: "known good"})
	if err != nil {
		t.Fatal(err)
	}
	if tag.GetIndex() != i2 || tag.GetAuthor() != "alice" || tag.GetComment() != "known good" || tag.GetCreated() == nil {
		t.Fatalf("tag %v", tag)
	}
	if got := liveAt(t, j, tag.GetTime().AsTime()); !maps.Equal(got, map[string]string{"/a": "2"}) {
		t.Fatalf("History at the tag's time: %v", got)
	}
	if _, err := j.CreateTag(ctx, "good", Point{Latest: true}, Sender{}); !errors.Is(err, ErrExists) {
		t.Fatalf("a second tag good: %v, want ErrExists", err)
	}
	for _, bad := range []string{"", "123", "-x", "a b", strings.Repeat("x", 65), "é"} {
		if _, err := j.CreateTag(ctx, bad, Point{Latest: true}, Sender{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("tag name %q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := j.CreateTag(ctx, "future", Point{Index: 99}, Sender{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tag at proposal 99: %v, want ErrNotFound", err)
	}
	if _, err := j.ProposeRestore(ctx, Sender{}, Point{Tag: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restore to an unknown tag: %v, want ErrNotFound", err)
	}
	now, err := j.CreateTag(ctx, "now", Point{Latest: true}, Sender{})
	if err != nil || now.GetIndex() != 3 {
		t.Fatalf("tag now: %v, %v", now, err)
	}
	if _, err := j.ProposeRestore(ctx, Sender{}, Point{Tag: "now"}); !errors.Is(err, ErrNoChange) {
		t.Fatalf("restore to the present: %v, want ErrNoChange", err)
	}
	tags, err := j.Tags(ctx)
	if err != nil || len(tags) != 2 || tags[0].GetName() != "good" || tags[1].GetName() != "now" {
		t.Fatalf("Tags: %v, %v", tags, err)
	}
	if _, err := j.DeleteTag(ctx, "now"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.DeleteTag(ctx, "now"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}

	// A Set journaled but not committed yet: the restore cannot know what
	// it will hold, so it waits for the commit (here, made 30 ms later)
	// and refuses once it has waited long enough.
	pending, err := j.ProposeChange(ctx, []*Op{update(t, "/a", "pending")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.ProposeRestore(ctx, Sender{}, Point{Tag: "good"}); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("restore with a commit pending: %v, want ErrGuard", err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		commitAndApply(t, j, term, pending.GetIndex())
	}()
	restore, err := j.ProposeRestore(ctx, Sender{}, Point{Tag: "good"})
	if err != nil {
		t.Fatalf("restore once the pending Set is committed: %v", err)
	}
	commitAndApply(t, j, term, restore.GetIndex())
	if got := liveValues(t, j); !maps.Equal(got, map[string]string{"/a": "2"}) {
		t.Fatalf("after the restore: %v", got)
	}

	// A proposal whose commit failed is no point.
	p, err := j.ProposeChange(ctx, []*Op{update(t, "/b", "x")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.FailCommit(ctx, p.GetIndex(), 3, "bad"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.CreateTag(ctx, "failed", Point{Index: p.GetIndex()}, Sender{}); !errors.Is(err, ErrGuard) {
		t.Fatalf("tag at a failed commit: %v, want ErrGuard", err)
	}

	// Outstanding commit-confirmed: no restore.
	if _, err := j.ProposeConfirmedChange(ctx, Sender{}, []*Op{update(t, "/a", "4")}, "cc", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ProposeRestore(ctx, Sender{}, Point{Index: 0}); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "commit-confirmed") {
		t.Fatalf("restore during a commit-confirmed: %v, want ErrGuard", err)
	}
}

// TestRestoreCompacted: a point whose later history retention dropped
// cannot be gone back to; a tag says so.
func TestRestoreCompacted(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "", Options{NoSync: true, Retain: 2})
	term := synced(t, j)
	applyChange(t, j, term, update(t, "/a", "1"))
	tag, err := j.CreateTag(ctx, "old", Point{Latest: true}, Sender{})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 5 {
		applyChange(t, j, term, update(t, "/a", fmt.Sprint(n+2)))
	}
	if _, err := j.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := j.ProposeRestore(ctx, Sender{}, Point{Tag: "old"}); !errors.Is(err, ErrCompacted) {
		t.Fatalf("restore past retention: %v, want ErrCompacted", err)
	}
	if ok, err := j.TagRestorable(ctx, tag); err != nil || ok {
		t.Fatalf("TagRestorable: %v, %v; want false", ok, err)
	}
}

// TestDryRun checks, on random Sets, that the dry run's changes are
// exactly what committing the same Set changes, and that it writes
// nothing.
func TestDryRun(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		j := openTest(t, "", Options{NoSync: true})
		term := synced(t, j)
		for range 30 {
			ops := randomSet(t, r, 4)
			before := liveValues(t, j)
			keys := dump(t, j)
			diff, err := j.DryRun(ctx, ops, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(keys, dump(t, j)) {
				t.Fatal("the dry run wrote to the journal")
			}
			predicted := maps.Clone(before)
			for _, d := range diff {
				delete(predicted, gnmipath.String(d.Path))
				addLive(predicted, d.After)
			}
			applyChange(t, j, term, ops...)
			got := liveValues(t, j)
			if !maps.Equal(got, predicted) {
				t.Fatalf("seed %d: dry run predicted %v, the commit made %v (ops %v)", seed, predicted, got, ops)
			}
			for _, d := range diff {
				if d.After.GetDeleted() && (d.Before == nil || d.Before.GetDeleted()) && !d.Unknown {
					t.Fatalf("dry run reports a delete of nothing at %v", d.Path)
				}
				if d.Unknown && d.Before != nil && !d.Before.GetDeleted() {
					t.Fatalf("dry run reports %v as unknown, where the journal holds %v", d.Path, d.Before)
				}
			}
			if !slices.IsSortedFunc(diff, func(a, b LeafDiff) int { return strings.Compare(string(PathKey(a.Path)), string(PathKey(b.Path))) }) {
				t.Fatal("dry run not in path order")
			}
		}
	}
}

// TestUnionReplace: a Set's union_replaces act as one replace of the
// union of their values at each of their paths (gNMI 0.10), after its
// replaces and before its updates.
func TestUnionReplace(t *testing.T) {
	union := func(path, value string) *Op {
		return &Op{Kind: OpUnionReplace, Path: mustPath(t, path), Values: []*Leaf{{Path: mustPath(t, path), Value: jsonVal(value)}}}
	}
	for _, tt := range []struct {
		name string
		ops  []*Op
		want map[string]string
	}{{
		name: "replaces the subtree",
		ops:  []*Op{union("/t", `{"a":"9"}`)},
		want: map[string]string{"/t/a": "9", "/u/x": "1"},
	}, {
		name: "the union of overlapping values",
		ops:  []*Op{union("/t", `{"c":{"e":"1"}}`), union("/t/c", `{"d":"2"}`)},
		want: map[string]string{"/t/c/e": "1", "/t/c/d": "2", "/u/x": "1"},
	}, {
		name: "the union, whichever comes first",
		ops:  []*Op{union("/t/c", `{"d":"2"}`), union("/t", `{"c":{"e":"1"}}`)},
		want: map[string]string{"/t/c/e": "1", "/t/c/d": "2", "/u/x": "1"},
	}, {
		name: "after replaces, before updates",
		ops: []*Op{update(t, "/t/a", "after"), union("/t", `{"a":"union","b":"union"}`), replace(t, "/u", "/u/y", "before"),
			del(t, "/t/b")},
		want: map[string]string{"/t/a": "after", "/t/b": "union", "/u/y": "before"},
	}, {
		name: "several paths",
		ops:  []*Op{union("/t/a", `"x"`), union("/u", `{"z":"3"}`)},
		want: map[string]string{"/t/a": "x", "/t/b": "2", "/t/c/e": "0", "/u/z": "3"},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			term := synced(t, j)
			applyChange(t, j, term, update(t, "/t/a", "1", "/t/b", "2", "/t/c/e", "0", "/u/x", "1"))
			before := liveValues(t, j)
			diff, err := j.DryRun(context.Background(), tt.ops, nil)
			if err != nil {
				t.Fatal(err)
			}
			i := applyChange(t, j, term, tt.ops...)
			if got := liveValues(t, j); !maps.Equal(got, tt.want) {
				t.Fatalf("after the union_replace: %v, want %v", got, tt.want)
			}
			if len(diff) == 0 {
				t.Error("the dry run saw no change")
			}
			rollback(t, j, term, i)
			if got := liveValues(t, j); !maps.Equal(got, before) {
				t.Fatalf("rolled back: %v, want %v", got, before)
			}
		})
	}
}

// TestWildcardDelete: a delete with wildcards deletes what the committed
// values hold at every path it matches (gNMI 3.4.6), and its rollback
// brings all of it back.
func TestWildcardDelete(t *testing.T) {
	for _, tt := range []struct {
		path string
		want map[string]string
	}{
		{"/l/e[k=*]/v", map[string]string{"/l/e[k=2]/w": "w2", "/m/x": "x"}},
		{"/l/e[k=2]/*", map[string]string{"/l/e[k=1]/v": "v1", "/m/x": "x"}},
		{"/l/e/v", map[string]string{"/l/e[k=1]/v": "v1", "/l/e[k=2]/v": "v2", "/l/e[k=2]/w": "w2", "/m/x": "x"}}, // no keys: the list itself, which holds nothing at /l/e/v
		{"/*/e[k=1]", map[string]string{"/l/e[k=2]/v": "v2", "/l/e[k=2]/w": "w2", "/m/x": "x"}},
		{"/l/e[k=9]/v", map[string]string{"/l/e[k=1]/v": "v1", "/l/e[k=2]/v": "v2", "/l/e[k=2]/w": "w2", "/m/x": "x"}},
	} {
		t.Run(tt.path, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			term := synced(t, j)
			applyChange(t, j, term, update(t, "/l/e[k=1]/v", "v1", "/l/e[k=2]/v", "v2", "/l/e[k=2]/w", "w2", "/m/x", "x"))
			before := liveValues(t, j)
			i := applyChange(t, j, term, del(t, tt.path))
			got := liveValues(t, j)
			for p := range got {
				if strings.HasSuffix(p, "]") { // markers of entries: not the point here
					delete(got, p)
				}
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("after deleting %s: %v, want %v", tt.path, got, tt.want)
			}
			rollback(t, j, term, i)
			if got := liveValues(t, j); !maps.Equal(got, before) {
				t.Fatalf("rolled back: %v, want %v", got, before)
			}
			checkInvariants(t, j)
		})
	}
}
