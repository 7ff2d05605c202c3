package journal

import (
	"context"
	"fmt"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"
)

// TestRepushSkip: a re-push skips exactly the applied values the device
// holds already, and never one under a tombstone it sends.
func TestRepushSkip(t *testing.T) {
	for _, tt := range []struct {
		name   string
		device []string        // path=value pairs the device holds
		want   map[string]bool // applied path → skipped
	}{{
		name:   "the device holds everything",
		device: []string{"/a/b", "1", "/x/y", "2"},
		want:   map[string]bool{"/a/b": true, "/x": true, "/x/y": true, "/c/d": true},
	}, {
		name:   "a value differs",
		device: []string{"/a/b", "9", "/x/y", "2"},
		want:   map[string]bool{"/a/b": false, "/x": true, "/x/y": true, "/c/d": true},
	}, {
		name:   "a value is missing",
		device: []string{"/x/y", "2"},
		want:   map[string]bool{"/a/b": false, "/x": true, "/x/y": true, "/c/d": true},
	}, {
		name:   "something under a tombstone no applied value explains",
		device: []string{"/a/b", "1", "/x/y", "2", "/x/z", "3"},
		want:   map[string]bool{"/a/b": true, "/x": false, "/x/y": false, "/c/d": true},
	}, {
		name:   "something the journal deleted",
		device: []string{"/a/b", "1", "/x/y", "2", "/c/d", "4"},
		want:   map[string]bool{"/a/b": true, "/x": true, "/x/y": true, "/c/d": false},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			ctx := context.Background()
			term := synced(t, j)
			if err := j.RecordReadScopes(ctx, []*gnmi.Path{mustPath(t, "/a"), mustPath(t, "/x"), mustPath(t, "/c")}); err != nil {
				t.Fatal(err)
			}
			applyChange(t, j, term, update(t, "/a/b", "1"), update(t, "/x/y", "0"), update(t, "/c/d", "4"))
			applyChange(t, j, term, del(t, "/x"), del(t, "/c/d"))
			applyChange(t, j, term, update(t, "/x/y", "2"))
			d, err := j.ReadDeviceConfig(ctx, deviceUpdates(t, tt.device...))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			if err := j.ReplayApplied(ctx, func(pv *PathValue) error {
				got[pathString(pv.GetPath())] = d.Skip(pv)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("skipped %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("outside the read scopes", func(t *testing.T) {
		j := openTest(t, "", Options{NoSync: true})
		term := synced(t, j)
		applyChange(t, j, term, update(t, "/a/b", "1"))
		d, err := j.ReadDeviceConfig(context.Background(), deviceUpdates(t, "/a/b", "1"))
		if err != nil {
			t.Fatal(err)
		}
		if d.Skip(&PathValue{Path: mustPath(t, "/a/b"), Index: 1, Value: strVal("1")}) {
			t.Error("skipped a value outside the read scopes")
		}
	})
}
