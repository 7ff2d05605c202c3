package journal

import (
	"context"
	"slices"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

func pathStrings(ps []*gnmi.Path) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, gnmipath.String(p))
	}
	return out
}

// TestAppliedRoots: the subtrees of the applied values, one per origin
// and first element whatever lies under it (list entries, module
// prefixes, tombstones), names that extend another name kept apart, and
// an origin's root standing for the whole origin.
func TestAppliedRoots(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "", Options{})
	roots := func() []string {
		t.Helper()
		rs, err := j.AppliedRoots(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pathStrings(rs)
	}
	if got := roots(); len(got) != 0 {
		t.Fatalf("empty journal: roots %v", got)
	}
	term := synced(t, j)
	applyChange(t, j, term,
		update(t, "/interfaces/interface[name=eth0]/config/description", "a"),
		update(t, "/interfaces/interface[name=eth1]/config/mtu", "1500"),
		update(t, "/interfacesX/a", "x"),
		update(t, "/system/config/hostname", "r1"),
		update(t, "oc:/system/config/hostname", "r2"),
		update(t, "/b[k=1]/c", "keyed"),
	)
	applyChange(t, j, term, del(t, "/routing"))
	want := []string{"/b", "/interfaces", "/interfacesX", "/routing", "/system", "oc:/system"}
	if got := roots(); !slices.Equal(got, want) {
		t.Errorf("roots %v, want %v", got, want)
	}
	applyChange(t, j, term, del(t, "oc:/"))
	want = []string{"/b", "/interfaces", "/interfacesX", "/routing", "/system", "oc:/"}
	if got := roots(); !slices.Equal(got, want) {
		t.Errorf("after a Delete of oc:/: roots %v, want %v", got, want)
	}
}

// TestAppliedPointReads: AppliedAt reads exactly the given paths (a
// tombstone, a value, nothing), AppliedLiveUnder whether anything not
// deleted lies at or under a path.
func TestAppliedPointReads(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "", Options{})
	term := synced(t, j)
	applyChange(t, j, term, update(t, "/a/b", "x"), update(t, "/a/c/d", "y"))
	applyChange(t, j, term, del(t, "/a/c"))
	got, err := j.AppliedAt(ctx, []*gnmi.Path{mustPath(t, "/a/b"), mustPath(t, "/a/c"), mustPath(t, "/a"), mustPath(t, "/a/c/d")})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].GetValue().GetStringVal() != "x" || !got[1].GetDeleted() || got[2] != nil || !got[3].GetDeleted() {
		t.Errorf("AppliedAt: %v", got)
	}
	for path, want := range map[string]bool{"/a": true, "/a/b": true, "/a/c": false, "/a/c/d": false, "/z": false} {
		live, err := j.AppliedLiveUnder(ctx, mustPath(t, path))
		if err != nil || live != want {
			t.Errorf("AppliedLiveUnder(%s) = %v, %v; want %v", path, live, err, want)
		}
	}
}
