package journal

import (
	"slices"

	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// DeviceHolds reports whether the device, as read (updates: full paths,
// from a read at or above every path of values), holds what values leave
// when written in order, as the values of a change (Change.values), or of
// consecutive changes, are: at the path each value is written last, its
// value (for the marker of a list entry: the entry); at or under each
// deleted path, nothing but what a value written after the delete holds
// there (a delete with values written under it, a replace, is checked by
// those values: a device adds values of its own to what it is given). A
// wildcard delete cannot be checked and is taken as held.
//
// It tells whether a Set whose answer was lost was applied: a Set is
// atomic, so a device that holds only part of what it writes did not
// apply it (docs/agent.md, "Answers").
func (j *Journal) DeviceHolds(updates []*gnmi.Update, values []*PathValue) (bool, error) {
	units, keys, err := j.deviceUnitValues(updates)
	if err != nil {
		return false, err
	}
	// last: the value written last at each path, by key; deletes: the
	// positions of the deletes, in write order.
	last := make(map[string]int)
	var deletes []int
	for n, pv := range values {
		last[string(PathKey(pv.GetPath()))] = n
		if pv.GetDeleted() {
			deletes = append(deletes, n)
		}
	}
	deletedAfter := func(n int, key []byte) bool {
		for _, d := range deletes {
			if d > n && subtreeOf(values[d].GetPath()).contains(key) {
				return true
			}
		}
		return false
	}
	under := func(sub subtree) []string {
		var out []string
		for n, _ := slices.BinarySearch(keys, string(sub.key)); n < len(keys) && sub.contains([]byte(keys[n])); n++ {
			out = append(out, keys[n])
		}
		return out
	}
	for n, pv := range values {
		key := string(PathKey(pv.GetPath()))
		if last[key] != n || deletedAfter(n, []byte(key)) {
			continue
		}
		switch {
		case pv.GetDeleted() && IsWildcard(pv.GetPath()):
		case pv.GetDeleted():
			sub := subtreeOf(pv.GetPath())
			writtenUnder := false
			for _, later := range values[n+1:] {
				writtenUnder = writtenUnder || !later.GetDeleted() && sub.contains(PathKey(later.GetPath()))
			}
			if !writtenUnder && len(under(sub)) > 0 {
				return false, nil
			}
		case leaves.IsMarker(pv.GetValue()):
			if len(under(subtreeOf(pv.GetPath()))) == 0 {
				return false, nil
			}
		default:
			if v, ok := units[key]; !ok || !leaves.Equal(v, pv.GetValue()) {
				return false, nil
			}
		}
	}
	return true, nil
}
