package journal

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"
)

// TestReplayOrder: the applied values go out in path order, but for what a
// later delete above it removed (left out) and what is stored under a
// value other than a marker (after it, in index order, tombstones first
// within one index). The agent's TestReplayOrderMatchesIndexOrder checks
// the order against a model of the device over random proposals.
func TestReplayOrder(t *testing.T) {
	for _, tt := range []struct {
		name    string
		applied []string // path=value@index, path=deleted@index, path={}@index (a marker)
		want    []string
	}{{
		name:    "path order: a delete before what was written under it later",
		applied: []string{"/b=2@3", "/a/x=1@2", "/a=deleted@1", "/a/y=deleted@4"},
		want:    []string{"/a=deleted@1", "/a/x=1@2", "/a/y=deleted@4", "/b=2@3"},
	}, {
		name:    "a value, a marker and a delete under a newer delete are left out",
		applied: []string{"/a=deleted@5", "/a/x=1@2", "/a/l[k=1]={}@3", "/a/l[k=1]/v=deleted@4", "/a/y=6@6"},
		want:    []string{"/a=deleted@5", "/a/y=6@6"},
	}, {
		name:    "nested deletes: the newest above counts",
		applied: []string{"/a=deleted@5", "/a/b=deleted@2", "/a/b/c=3@3", "/a/b/d=7@7"},
		want:    []string{"/a=deleted@5", "/a/b/d=7@7"},
	}, {
		name:    "under an opaque value: index order, tombstones first",
		applied: []string{"/o=cfg@3", "/o/x=1@1", "/o/y=deleted@4", "/o/z=9@3", "/o/w=deleted@3", "/p=2@2"},
		want:    []string{"/o/x=1@1", "/o/w=deleted@3", "/o=cfg@3", "/o/z=9@3", "/o/y=deleted@4", "/p=2@2"},
	}, {
		name:    "under a value at a list's path: its entries",
		applied: []string{"/l=entries@4", "/l[k=1]/v=deleted@5", "/l[k=2]/v=2@2"},
		want:    []string{"/l[k=2]/v=2@2", "/l=entries@4", "/l[k=1]/v=deleted@5"},
	}, {
		name:    "an opaque value under a newer delete, with what is under it",
		applied: []string{"/a=deleted@5", "/a/o=cfg@3", "/a/o/x=6@6", "/a/o/y=1@1"},
		want:    []string{"/a=deleted@5", "/a/o/x=6@6"},
	}, {
		name:    "a marker holds nothing: what is under it in path order",
		applied: []string{"/l[k=1]={}@5", "/l[k=1]/v=deleted@2", "/l[k=1]/w=1@1"},
		want:    []string{"/l[k=1]={}@5", "/l[k=1]/v=deleted@2", "/l[k=1]/w=1@1"},
	}, {
		name:    "a sibling whose name starts alike is not under",
		applied: []string{"/a=deleted@3", "/ab=1@1"},
		want:    []string{"/a=deleted@3", "/ab=1@1"},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			var applied []*PathValue
			for _, s := range tt.applied {
				applied = append(applied, parseRendered(t, s))
			}
			order, err := ReplayOrder(applied)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, pv := range order {
				got = append(got, render(pv))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ReplayOrder(%v)\n got %v\nwant %v", tt.applied, got, tt.want)
			}
		})
	}
	if _, err := ReplayOrder([]*PathValue{parseRendered(t, "/a=1@1"), parseRendered(t, "/a=2@2")}); err == nil {
		t.Error("ReplayOrder of two values at one path: no error")
	}
}

// parseRendered is render's inverse: a string value as ASCII (opaque), {}
// as a marker.
func parseRendered(t *testing.T, s string) *PathValue {
	t.Helper()
	at := strings.LastIndexByte(s, '@')
	closed := strings.LastIndexByte(s[:at], ']') + 1 // list keys hold '=' too
	eq := closed + strings.IndexByte(s[closed:], '=')
	index, err := strconv.ParseUint(s[at+1:], 10, 64)
	if err != nil || eq < closed || eq > at {
		t.Fatalf("bad value %q", s)
	}
	pv := &PathValue{Path: mustPath(t, s[:eq]), Index: index}
	switch v := s[eq+1 : at]; v {
	case "deleted":
		pv.Deleted = true
	case "{}":
		pv.Value = jsonVal("{}")
	default:
		pv.Value = &gnmi.TypedValue{Value: &gnmi.TypedValue_AsciiVal{AsciiVal: v}}
	}
	return pv
}
