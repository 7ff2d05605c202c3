package agent

import (
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

func TestInDoubtPathsHold(t *testing.T) {
	// The proposals in doubt wrote /a/b and deleted /c[name=x].
	d := &inDoubtPaths{at: map[string]bool{}, covering: map[string]bool{}}
	for _, v := range []*journal.PathValue{
		value(t, "/a/b", 5, stringVal("new")),
		tombstone(t, "/c[name=x]", 6),
	} {
		d.at[string(journal.PathKey(v.GetPath()))] = true
		for key := range coveringKeys(v.GetPath()) {
			d.covering[string(key)] = true
		}
	}
	for _, tc := range []struct {
		name string
		pv   *journal.PathValue
		want bool
	}{
		{"value at a written path", value(t, "/a/b", 1, stringVal("old")), true},
		{"value below a deleted path", value(t, "/c[name=x]/config/mtu", 1, stringVal("1500")), true},
		{"value below a deleted list entry, keyless form", value(t, "/c/config/mtu", 1, stringVal("1500")), false},
		{"delete at a written path", tombstone(t, "/a/b", 1), true},
		{"delete above a written path", tombstone(t, "/a", 1), true},
		{"delete of the whole list above a deleted entry", tombstone(t, "/c", 1), true},
		{"JSON value above a written path", value(t, "/a", 1, jsonVal(`{"b":"old","c":"kept"}`)), false},
		{"value beside a written path", value(t, "/a/c", 1, stringVal("kept")), false},
		{"value in another list entry", value(t, "/c[name=y]/config/mtu", 1, stringVal("9000")), false},
		{"delete of another list entry", tombstone(t, "/c[name=y]", 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.holds(tc.pv); got != tc.want {
				t.Errorf("holds(%v) = %v, want %v", tc.pv, got, tc.want)
			}
		})
	}
	if (&inDoubtPaths{}).holds(value(t, "/a/b", 1, stringVal("old"))) {
		t.Error("nothing in doubt holds back a value")
	}
}
