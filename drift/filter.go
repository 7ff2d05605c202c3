package drift

import (
	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Note is one change a device notified (Subscribe ON_CHANGE): a value at a
// leaf, or a deletion.
type Note struct {
	Path *gpb.Path
	// Value is the leaf's new value; nil for a deletion.
	Value *gpb.TypedValue
}

// Lookup is what Explained reads of the journal's applied configuration.
type Lookup struct {
	// At are the applied values (tombstones included) at the note's path,
	// then at each of NotePaths' other paths, in NotePaths' order; nil
	// where the journal holds none.
	At []*journal.PathValue
	// LiveUnder reports whether the journal holds a live (not deleted)
	// value at or under a path.
	LiveUnder func(*gpb.Path) (bool, error)
}

// NotePaths returns the paths whose applied values Explained needs for a
// note at p: p, then every path p lies under (coveringPaths).
func NotePaths(p *gpb.Path) []*gpb.Path {
	return append([]*gpb.Path{p}, coveringPaths(p)...)
}

// Explained reports whether the journal's applied values explain a note,
// so that it cannot be drift and needs no Get: state data; a deletion of
// a path where the journal holds nothing live; a value equal to the
// journal's at that path; the key leaf of an entry the journal holds; a
// YANG default; a value no journal tombstone deletes (the device's own).
// Anything else (a JSON value, a value the journal deletes or holds
// otherwise) is left to Compare. An error of lookup.LiveUnder counts as
// not explained.
func Explained(n Note, lookup Lookup, schema *leaves.Schema) bool {
	p := n.Path
	if leaves.IsState(p, schema) {
		return true
	}
	if n.Value == nil {
		live, err := lookup.LiveUnder(p)
		return err == nil && !live
	}
	if raw, _ := jsonText(n.Value); raw != nil && isOpaque(n.Value) {
		return false // a subtree as one JSON value: compare it
	}
	paths := NotePaths(p)
	at := make(map[string]*journal.PathValue, len(paths))
	covers := map[string]*journal.PathValue{}
	for i, pv := range lookup.At {
		if pv == nil || i >= len(paths) {
			continue
		}
		k := key(paths[i])
		at[k] = pv
		if i > 0 && (pv.GetDeleted() || isOpaque(pv.GetValue())) {
			covers[k] = pv
		}
	}
	if here := at[key(p)]; here != nil && !here.GetDeleted() && !isOpaque(here.GetValue()) && !leaves.IsMarker(here.GetValue()) {
		return sameValue(n.Value, here.GetValue())
	}
	if entry, ok := keyOf(p, n.Value); ok {
		if live, err := lookup.LiveUnder(entry); err == nil && live {
			return true
		}
	}
	if schema.IsDefault(p, n.Value) {
		return true
	}
	return deciding(p, at, covers) == nil
}
