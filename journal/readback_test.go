package journal

import (
	"context"
	"testing"
)

// TestDeviceHolds: a Set in doubt is applied exactly when the device
// holds what its changes write, in order.
func TestDeviceHolds(t *testing.T) {
	for _, tt := range []struct {
		name    string
		changes [][]*Op
		device  []string // path=value pairs the device holds
		want    bool
	}{
		{"a leaf written", [][]*Op{{update(t, "/a/b", "1")}}, []string{"/a/b", "1"}, true},
		{"a leaf not written", [][]*Op{{update(t, "/a/b", "1")}}, []string{"/a/b", "0"}, false},
		{"a leaf missing", [][]*Op{{update(t, "/a/b", "1")}}, nil, false},
		{"one of two leaves: not applied (a Set is atomic)", [][]*Op{{update(t, "/a/b", "1"), update(t, "/x/y", "2")}},
			[]string{"/a/b", "1"}, false},
		{"a delete done", [][]*Op{{del(t, "/a")}}, []string{"/x/y", "2"}, true},
		{"a delete not done", [][]*Op{{del(t, "/a")}}, []string{"/a/b", "1"}, false},
		{"a JSON container", [][]*Op{{update(t, "/a", `{"b":"1","c":"2"}`)}}, []string{"/a/b", "1", "/a/c", "2"}, true},
		{"a JSON container, a value differs", [][]*Op{{update(t, "/a", `{"b":"1","c":"2"}`)}}, []string{"/a/b", "1", "/a/c", "3"}, false},
		{"a replace, the device adds its own", [][]*Op{{replace(t, "/a", "/a/b", "1")}}, []string{"/a/b", "1", "/a/derived", "x"}, true},
		{"two changes: the later value counts", [][]*Op{{update(t, "/a/b", "1")}, {update(t, "/a/b", "2")}},
			[]string{"/a/b", "2"}, true},
		{"two changes: the earlier value is not enough", [][]*Op{{update(t, "/a/b", "1")}, {update(t, "/a/b", "2")}},
			[]string{"/a/b", "1"}, false},
		{"a value then its delete", [][]*Op{{update(t, "/a/b", "1")}, {del(t, "/a")}}, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			ctx := context.Background()
			var values []*PathValue
			for _, ops := range tt.changes {
				p, err := j.ProposeChange(ctx, ops)
				if err != nil {
					t.Fatal(err)
				}
				c, _, err := j.CommitChange(ctx, p.GetIndex())
				if err != nil {
					t.Fatal(err)
				}
				values = append(values, c.GetChange().GetValues()...)
			}
			got, err := j.DeviceHolds(deviceUpdates(t, tt.device...), values)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("DeviceHolds = %v, want %v", got, tt.want)
			}
		})
	}
}
