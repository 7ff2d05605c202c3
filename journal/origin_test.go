package journal

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

func TestPathKeyDefaultOrigin(t *testing.T) {
	key := func(s string) []byte { return PathKey(mustPath(t, s)) }
	for _, pair := range [][2]string{
		{"/system/config/hostname", "openconfig:/system/config/hostname"},
		{"/", "openconfig:/"},
		{"/interfaces/interface[name=eth0]", "openconfig:/interfaces/interface[name=eth0]"},
	} {
		if !bytes.Equal(key(pair[0]), key(pair[1])) {
			t.Errorf("PathKey(%s) != PathKey(%s)", pair[0], pair[1])
		}
		if !IsUnder(mustPath(t, pair[0]), mustPath(t, pair[1])) || !IsUnder(mustPath(t, pair[1]), mustPath(t, pair[0])) {
			t.Errorf("%s and %s are not under each other", pair[0], pair[1])
		}
	}
	for _, pair := range [][2]string{
		{"/system", "cli:/system"},
		{"openconfig:/system", "cli:/system"},
		{"/system", "gnmi-sidecar:/system"},
		{"/system", "openconfigx:/system"},
	} {
		if bytes.Equal(key(pair[0]), key(pair[1])) {
			t.Errorf("PathKey(%s) == PathKey(%s)", pair[0], pair[1])
		}
		if IsUnder(mustPath(t, pair[0]+"/config"), mustPath(t, pair[1])) {
			t.Errorf("%s/config is under %s", pair[0], pair[1])
		}
	}
	if !IsUnder(mustPath(t, "/system/config/hostname"), mustPath(t, "openconfig:/system")) ||
		!IsUnder(mustPath(t, "openconfig:/interfaces/interface[name=eth0]/config"), mustPath(t, "/interfaces/interface")) {
		t.Error("a path is not under its ancestor spelled with the other origin")
	}
}

// A leaf written without origin and with origin openconfig is one leaf:
// one committed and applied record (the later write's path), one value in
// a re-push, one entry per history delta, and a rollback puts back what
// the other spelling wrote.
func TestOriginOneLeaf(t *testing.T) {
	const host = "/system/config/hostname"
	tests := []struct {
		name string
		ops  [][]*Op // one proposal each, applied in order
		want []string
		// after rolling back every proposal but the first, newest first
		back []string
	}{
		{
			name: "none then openconfig",
			ops:  [][]*Op{{update(t, host, "a")}, {update(t, "openconfig:"+host, "b")}},
			want: []string{"openconfig:" + host + "=b@2"},
			back: []string{host + "=a@1"},
		},
		{
			name: "openconfig then none",
			ops:  [][]*Op{{update(t, "openconfig:"+host, "a")}, {update(t, host, "b")}},
			want: []string{host + "=b@2"},
			back: []string{"openconfig:" + host + "=a@1"},
		},
		{
			name: "alternating",
			ops: [][]*Op{{update(t, "openconfig:"+host, "a")}, {update(t, host, "b")},
				{update(t, "openconfig:"+host, "c")}},
			want: []string{"openconfig:" + host + "=c@3"},
			back: []string{"openconfig:" + host + "=a@1"},
		},
		{
			name: "delete with the other spelling",
			ops:  [][]*Op{{update(t, host, "a")}, {del(t, "openconfig:/system")}},
			want: []string{"openconfig:/system=deleted@2", host + "=deleted@2"},
			back: []string{"openconfig:/system=deleted@0", host + "=a@1"},
		},
		{
			name: "replace with the other spelling",
			ops: [][]*Op{{update(t, "openconfig:"+host, "a"), update(t, "openconfig:/system/config/domain-name", "d")},
				{replace(t, "/system/config", "/system/config/hostname", "b")}},
			want: []string{"/system/config=deleted@2", "openconfig:/system/config/domain-name=deleted@2", host + "=b@2"},
			back: []string{"/system/config=deleted@0", "openconfig:/system/config/domain-name=d@1", "openconfig:" + host + "=a@1"},
		},
		{
			name: "both in one Set",
			ops:  [][]*Op{{update(t, host, "a")}, {update(t, host, "b", "openconfig:"+host, "c")}},
			want: []string{"openconfig:" + host + "=c@2"},
			back: []string{host + "=a@1"},
		},
		{
			name: "another origin stays apart",
			ops:  [][]*Op{{update(t, host, "a")}, {update(t, "cli:"+host, "b")}},
			want: []string{host + "=a@1", "cli:" + host + "=b@2"},
			back: []string{host + "=a@1", "cli:" + host + "=deleted@0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clock := &fakeClock{}
			j := openTest(t, "", Options{NoSync: true, Clock: clock.now})
			term := synced(t, j)
			for n, ops := range tt.ops {
				clock.sec.Store(int64(10 * (n + 1)))
				applyChange(t, j, term, ops...)
			}
			sortedWant := slices.Clone(tt.want)
			slices.SortFunc(sortedWant, func(a, b string) int { return bytes.Compare(renderedKey(t, a), renderedKey(t, b)) })
			if got := committedList(t, j, nil); !slices.Equal(got, sortedWant) {
				t.Fatalf("committed:\n got %v\nwant %v", got, sortedWant)
			}
			if got := appliedList(t, j); !slices.Equal(got, sortedWant) {
				t.Fatalf("applied:\n got %v\nwant %v", got, sortedWant)
			}
			pushed := appliedReplayList(t, j)
			if !sameSet(pushed, tt.want) {
				t.Errorf("re-push sends %v, want each of %v once", pushed, tt.want)
			}
			// The subtree read with either spelling holds the leaf.
			for _, root := range []string{"/system", "openconfig:/system"} {
				if got := committedList(t, j, mustPath(t, root)); len(got) == 0 {
					t.Errorf("committed under %s: nothing", root)
				}
			}
			// A point in time before the last proposal shows the value
			// the first one left, whichever spelling is asked.
			at, err := committedAtList(t, j, 15, mustPath(t, "openconfig:/system"))
			if err != nil {
				t.Fatal(err)
			}
			before, err := committedAtList(t, j, 15, mustPath(t, "/system"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(at, before) || len(at) == 0 {
				t.Errorf("committed at 15 under openconfig:/system %v, under /system %v", at, before)
			}
			// One entry per leaf in each history delta.
			if err := j.History(ctx, fakeTime(0), fakeTime(0).AddDate(1, 0, 0), func(d *HistoryDelta) error {
				seen := map[string]bool{}
				for _, e := range d.GetEntries() {
					k := string(PathKey(entryValue(e).GetPath()))
					if seen[k] {
						t.Errorf("history delta of proposal %d has two entries for %s", d.GetProposal(), gnmipath.String(entryValue(e).GetPath()))
					}
					seen[k] = true
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, j)
			for i := uint64(len(tt.ops)); i > 1; i-- {
				clock.sec.Add(10)
				rollback(t, j, term, i)
			}
			if got := committedList(t, j, nil); !sameSet(got, tt.back) {
				t.Errorf("committed after the rollbacks:\n got %v\nwant %v", got, tt.back)
			}
			checkInvariants(t, j)
		})
	}
}

// renderedKey is the path key of a rendered value ("path=value@index").
func renderedKey(t *testing.T, s string) []byte {
	path, _, _ := bytes.Cut([]byte(s), []byte("="))
	return PathKey(mustPath(t, string(path)))
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// Out-of-sync records, learned list keys and wildcard deletes take both
// spellings as one.
func TestOriginOneLeafRecords(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "", Options{NoSync: true})
	term := synced(t, j)
	i := applyChange(t, j, term, update(t, "openconfig:/interfaces/interface[name=eth0]/config/mtu", "1500"),
		update(t, "openconfig:/interfaces/interface[name=eth1]/config/mtu", "9000"))
	// A wildcard delete spelled without origin matches what was written
	// with origin openconfig.
	applyChange(t, j, term, del(t, "/interfaces/interface[name=*]/config/mtu"))
	for _, s := range committedList(t, j, nil) {
		if !bytes.Contains([]byte(s), []byte("=deleted@2")) && bytes.Contains([]byte(s), []byte("/mtu=")) {
			t.Errorf("the wildcard delete left %s", s)
		}
	}
	// A dry run of the other spelling compares with the leaf's value.
	applyChange(t, j, term, update(t, "/system/config/hostname", "h"))
	for _, tc := range []struct {
		value string
		diffs int
	}{{"h", 0}, {"h2", 1}} {
		diffs, err := j.DryRun(ctx, []*Op{update(t, "openconfig:/system/config/hostname", tc.value)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(diffs) != tc.diffs || tc.diffs == 1 && diffs[0].Before.GetValue().GetStringVal() != "h" {
			t.Errorf("dry run of openconfig:/system/config/hostname=%s: %+v, want %d diffs from h", tc.value, diffs, tc.diffs)
		}
	}
	// List keys learned from one spelling serve the other.
	if _, err := j.ProposeChange(ctx, []*Op{{Kind: OpUpdate, Path: mustPath(t, "/interfaces"), Values: []*Leaf{{
		Path: mustPath(t, "/interfaces"), Value: jsonVal(`{"interface":[{"name":"eth2","config":{"mtu":1}}]}`)}}}}); err != nil {
		t.Errorf("a JSON list without origin, keys learned with origin openconfig: %v", err)
	}
	// Out of sync: one record per leaf.
	pv := func(origin string) *PathValue {
		p := mustPath(t, "/interfaces/interface[name=eth0]/config/mtu")
		p.Origin = origin
		return &PathValue{Path: p, Index: i, Value: strVal("1500")}
	}
	if _, err := j.MarkOutOfSync(ctx, []*PathValue{pv(""), pv("openconfig")}, CauseRepush, 0, 3, "refused"); err != nil {
		t.Fatal(err)
	}
	recs, err := j.OutOfSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := j.Configuration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || c.GetOutOfSync() != 1 {
		t.Errorf("%d out-of-sync records (configuration counts %d), want 1", len(recs), c.GetOutOfSync())
	}
	if got := SelectOutOfSync(recs, []*gnmi.Path{mustPath(t, "openconfig:/interfaces")}); len(got) != 1 {
		t.Errorf("SelectOutOfSync under openconfig:/interfaces: %d records, want 1", len(got))
	}
}
