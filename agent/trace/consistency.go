package trace

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// CheckApplied compares the applied values a trace implies (Report.Applied)
// with the journal's (Journal.Applied) and returns a Consistency violation
// for every path where they differ, in path order. A tombstone and no value
// at all count as the same: retention drops old tombstones without a trace
// line.
func CheckApplied(model map[string]Value, journalApplied []*journal.PathValue) []Violation {
	actual := make(map[string]*journal.PathValue, len(journalApplied))
	for _, pv := range journalApplied {
		actual[gnmipath.String(pv.GetPath())] = pv
	}
	paths := slices.AppendSeq(slices.Collect(maps.Keys(model)), maps.Keys(actual))
	slices.Sort(paths)
	var out []Violation
	for _, path := range slices.Compact(paths) {
		want, ok := model[path]
		if msg := diffApplied(want, ok, actual[path]); msg != "" {
			out = append(out, consistency("applied value at %s: %s", path, msg))
		}
	}
	return out
}

// diffApplied describes how the journal's applied value got differs from
// the trace's want (absent if !ok), or returns "" if they agree.
func diffApplied(want Value, ok bool, got *journal.PathValue) string {
	switch wantNone, gotNone := !ok || want.Deleted, got == nil || got.GetDeleted(); {
	case wantNone && gotNone:
		if ok && got != nil && want.Index != got.GetIndex() {
			return fmt.Sprintf("the trace deleted it in proposal %d, the journal in proposal %d", want.Index, got.GetIndex())
		}
		return ""
	case wantNone:
		return fmt.Sprintf("the trace implies none, the journal holds %s from proposal %d", show(got.GetValue()), got.GetIndex())
	}
	v, err := decodeValue(want)
	if err != nil {
		return err.Error()
	}
	switch {
	case got == nil || got.GetDeleted():
		return fmt.Sprintf("the trace implies %s from proposal %d, the journal holds none", show(v), want.Index)
	case !proto.Equal(v, got.GetValue()):
		return fmt.Sprintf("the trace implies %s, the journal holds %s", show(v), show(got.GetValue()))
	case want.Index != got.GetIndex():
		return fmt.Sprintf("the trace implies the value from proposal %d, the journal holds it from proposal %d",
			want.Index, got.GetIndex())
	}
	return ""
}

// AppliedValues returns Applied as journal values in path order, for
// CheckDevice when the journal cannot be read (a sidecar in another process
// holds its lock).
func (r *Report) AppliedValues() ([]*journal.PathValue, error) {
	out := make([]*journal.PathValue, 0, len(r.Applied))
	for _, path := range slices.Sorted(maps.Keys(r.Applied)) {
		v := r.Applied[path]
		p, err := parsePath(path)
		if err != nil {
			return nil, fmt.Errorf("trace: applied value at %q: %w", path, err)
		}
		pv := &journal.PathValue{Path: p, Index: v.Index, Deleted: v.Deleted}
		if !v.Deleted {
			if pv.Value, err = decodeValue(v); err != nil {
				return nil, fmt.Errorf("trace: %w", err)
			}
		}
		out = append(out, pv)
	}
	return out, nil
}

// CheckDevice checks that a device holds the applied values, and only them.
// device maps a path string (as ygot.PathToString renders it) to a scalar
// leaf, as testbed.Device.ConfigLeaves returns them. It returns a
// Consistency violation for
//
//   - every applied leaf value (a scalar TypedValue, or a leaf's or
//     leaf-list's JSON text) missing from the device or different there
//     (compared by meaning: uint 1500 and JSON 1500 are the same);
//   - every applied list entry (a marker, {} at a keyed path) of which the
//     device holds nothing;
//   - every device leaf at or under an applied tombstone, unless a value
//     written with the tombstone or after it accounts for the leaf;
//   - every other device leaf that neither an applied value at its path nor
//     an opaque value above it (a JSON object other than a marker, as
//     format-1 journals kept) accounts for.
//
// List key leaves ("…/interface[name=eth0]/name" and
// "…/interface[name=eth0]/config/name" = "eth0") are always allowed: the
// device creates them with the list entry. Origin "openconfig" is the
// device's default origin. Violations about applied values come first, in
// their order, then those about device leaves, in path order. The cost is
// linear in the number of values and leaves (about 1 s for 100,000 leaves).
//
// Paths the journal records out of sync (outOfSync, see journal.OutOfSync)
// are left out, at and under each record's path: the device refused them
// and the sidecar says so.
func CheckDevice(applied []*journal.PathValue, device map[string]*gnmi.TypedValue, outOfSync ...*journal.OutOfSync) []Violation {
	out, _ := checkDevice(applied, device, outOfSync, false)
	return out
}

// excused reports whether p is at or under the path of an out-of-sync
// record.
func excused(p *gnmi.Path, outOfSync []*journal.OutOfSync) bool {
	for _, rec := range outOfSync {
		if journal.IsUnder(p, rec.GetValue().GetPath()) {
			return true
		}
	}
	return false
}

// deviceStats counts the applied values CheckDevice compared with the
// device leaf by leaf, and the opaque ones and markers of containers it
// could not.
type deviceStats struct {
	compared, opaque int
}

// checkDevice is CheckDevice; with ownsUnjournaled, device leaves no
// applied value names are let through (VerifyOptions.DeviceOwnsUnjournaled).
func checkDevice(applied []*journal.PathValue, device map[string]*gnmi.TypedValue, outOfSync []*journal.OutOfSync, ownsUnjournaled bool) ([]Violation, deviceStats) {
	held, out := parseLeaves(device)
	if len(outOfSync) > 0 {
		applied = slices.DeleteFunc(slices.Clone(applied), func(pv *journal.PathValue) bool { return excused(pv.GetPath(), outOfSync) })
		held = slices.DeleteFunc(held, func(l deviceLeaf) bool { return excused(l.path, outOfSync) })
	}
	onDevice := make(map[string]deviceLeaf, len(held))
	for _, l := range held {
		onDevice[l.key] = l
	}
	var stats deviceStats
	var underDevice map[string]bool // path keys at or above a device leaf, once needed
	for _, pv := range applied {
		switch {
		case pv.GetDeleted():
		case leaves.IsMarker(pv.GetValue()):
			if !isEntry(pv.GetPath()) {
				stats.opaque++ // an empty container has no leaf to see
				continue
			}
			stats.compared++
			if underDevice == nil {
				underDevice = coveredBy(held)
			}
			if !underDevice[string(journal.PathKey(pv.GetPath()))] {
				out = append(out, consistency("%s: the device has no such list entry, the applied values create it (proposal %d)",
					gnmipath.String(pv.GetPath()), pv.GetIndex()))
			}
		case isOpaque(pv.GetValue()):
			stats.opaque++
		default:
			stats.compared++
			if msg := diffDevice(pv, onDevice[string(journal.PathKey(pv.GetPath()))]); msg != "" {
				out = append(out, consistency("%s", msg))
			}
		}
	}
	index := indexApplied(applied)
	for _, l := range held {
		if msg := index.unaccounted(l, ownsUnjournaled); msg != "" {
			out = append(out, consistency("%s", msg))
		}
	}
	return out, stats
}

// deviceLeaf is one leaf of the device's configuration.
type deviceLeaf struct {
	name  string // the path string the device gave
	path  *gnmi.Path
	key   string // journal.PathKey(path)
	value *gnmi.TypedValue
}

// parseLeaves returns the device's leaves in path order, and a violation
// for each path that does not parse.
func parseLeaves(device map[string]*gnmi.TypedValue) ([]deviceLeaf, []Violation) {
	var leaves []deviceLeaf
	var bad []Violation
	for _, name := range slices.Sorted(maps.Keys(device)) {
		p, err := parsePath(name)
		if err != nil {
			bad = append(bad, consistency("device leaf %q: %v", name, err))
			continue
		}
		leaves = append(leaves, deviceLeaf{name: name, path: p, key: string(journal.PathKey(p)), value: device[name]})
	}
	return leaves, bad
}

// diffDevice describes how the device differs from the applied scalar pv
// (l is the device leaf at its path, zero if none), or returns "".
func diffDevice(pv *journal.PathValue, l deviceLeaf) string {
	path := gnmipath.String(pv.GetPath())
	switch {
	case l.path == nil:
		return fmt.Sprintf("%s: the device has no value, the applied value is %s from proposal %d",
			path, show(pv.GetValue()), pv.GetIndex())
	case !leaves.Equal(l.value, pv.GetValue()):
		return fmt.Sprintf("%s: the device has %s, the applied value is %s from proposal %d",
			path, show(l.value), show(pv.GetValue()), pv.GetIndex())
	}
	return ""
}

// appliedIndex holds applied values by device path key.
type appliedIndex struct {
	at map[string]*journal.PathValue
	// covers holds those that speak for a whole subtree: tombstones and
	// opaque values.
	covers map[string]*journal.PathValue
}

func indexApplied(applied []*journal.PathValue) appliedIndex {
	ix := appliedIndex{at: make(map[string]*journal.PathValue, len(applied)), covers: make(map[string]*journal.PathValue)}
	for _, pv := range applied {
		key := string(journal.PathKey(pv.GetPath()))
		ix.at[key] = pv
		if pv.GetDeleted() || isOpaque(pv.GetValue()) {
			ix.covers[key] = pv
		}
	}
	return ix
}

// unaccounted explains why the device should not hold leaf l, or returns ""
// if the applied values account for it. Of the value at l's path, the
// opaque values above it and the tombstones at or above it, the newest
// decides; a value wins a tie because a Set applies its deletes first. A
// leaf none of them names is accounted for only when ownsUnjournaled.
func (ix appliedIndex) unaccounted(l deviceLeaf, ownsUnjournaled bool) string {
	if isListKey(l.path, l.value) {
		return ""
	}
	var put, tombstone *journal.PathValue
	consider := func(pv *journal.PathValue) {
		switch {
		case pv == nil:
		case pv.GetDeleted():
			tombstone = newer(tombstone, pv)
		default:
			put = newer(put, pv)
		}
	}
	consider(ix.at[l.key])
	if len(ix.covers) > 0 {
		for _, p := range coveringPaths(l.path) {
			consider(ix.covers[string(journal.PathKey(p))])
		}
	}
	switch {
	case tombstone != nil && (put == nil || put.GetIndex() < tombstone.GetIndex()):
		return fmt.Sprintf("%s: the device has %s, but the applied values delete %s (proposal %d)",
			l.name, show(l.value), gnmipath.String(tombstone.GetPath()), tombstone.GetIndex())
	case put == nil && !ownsUnjournaled:
		return fmt.Sprintf("%s: the device has %s, which no applied value accounts for", l.name, show(l.value))
	}
	return ""
}

// newer returns whichever of a (possibly nil) and b was written last.
func newer(a, b *journal.PathValue) *journal.PathValue {
	if a == nil || b.GetIndex() > a.GetIndex() {
		return b
	}
	return a
}

// coveringPaths returns the paths P other than p itself for which
// journal.IsUnder(p, P): every proper prefix of p, the root included, and
// for each list entry on the way (p's last element included) the whole list,
// the element without its keys.
func coveringPaths(p *gnmi.Path) []*gnmi.Path {
	elems := p.GetElem()
	out := make([]*gnmi.Path, 0, 2*len(elems))
	for n := 0; n <= len(elems); n++ {
		if n < len(elems) {
			out = append(out, &gnmi.Path{Origin: p.GetOrigin(), Elem: elems[:n]})
		}
		if n > 0 && len(elems[n-1].GetKey()) > 0 {
			list := append(slices.Clone(elems[:n-1]), &gnmi.PathElem{Name: elems[n-1].GetName()})
			out = append(out, &gnmi.Path{Origin: p.GetOrigin(), Elem: list})
		}
	}
	return out
}

// isListKey reports whether p is a list key leaf holding its key's value:
// its name is a key of its parent element, or of its grandparent through a
// "config" container, and v renders as that key's value.
func isListKey(p *gnmi.Path, v *gnmi.TypedValue) bool {
	elems := p.GetElem()
	n := len(elems)
	if n < 2 {
		return false
	}
	s, ok := scalarString(v)
	if !ok {
		return false
	}
	name := elems[n-1].GetName()
	owners := elems[n-2 : n-1]
	if n >= 3 && elems[n-2].GetName() == "config" {
		owners = elems[n-3 : n-1]
	}
	for _, e := range owners {
		if key, ok := e.GetKey()[name]; ok && key == s {
			return true
		}
	}
	return false
}

// scalarString renders a scalar value as it appears in a path's list key.
func scalarString(v *gnmi.TypedValue) (string, bool) {
	switch x := v.GetValue().(type) {
	case *gnmi.TypedValue_StringVal:
		return x.StringVal, true
	case *gnmi.TypedValue_UintVal:
		return strconv.FormatUint(x.UintVal, 10), true
	case *gnmi.TypedValue_IntVal:
		return strconv.FormatInt(x.IntVal, 10), true
	case *gnmi.TypedValue_BoolVal:
		return strconv.FormatBool(x.BoolVal), true
	case *gnmi.TypedValue_DoubleVal:
		return strconv.FormatFloat(x.DoubleVal, 'g', -1, 64), true
	}
	return "", false
}

// isOpaque reports whether v may hold a subtree the device shows as leaves:
// a JSON object other than a marker (what format-1 journals kept), or an
// ASCII, bytes or protobuf value.
func isOpaque(v *gnmi.TypedValue) bool {
	switch x := v.GetValue().(type) {
	case *gnmi.TypedValue_JsonVal:
		return isObject(x.JsonVal) && !leaves.IsMarker(v)
	case *gnmi.TypedValue_JsonIetfVal:
		return isObject(x.JsonIetfVal) && !leaves.IsMarker(v)
	case *gnmi.TypedValue_AsciiVal, *gnmi.TypedValue_BytesVal, *gnmi.TypedValue_ProtoBytes, *gnmi.TypedValue_AnyVal:
		return true
	}
	return false
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// isEntry reports whether p is a list entry (its last element has keys).
func isEntry(p *gnmi.Path) bool {
	elems := p.GetElem()
	return len(elems) > 0 && len(elems[len(elems)-1].GetKey()) > 0
}

// coveredBy returns the device keys of every path at or above a device
// leaf.
func coveredBy(device []deviceLeaf) map[string]bool {
	out := make(map[string]bool)
	for _, l := range device {
		out[l.key] = true
		for _, p := range coveringPaths(l.path) {
			out[string(journal.PathKey(p))] = true
		}
	}
	return out
}

// parsePath parses a path as gnmipath.String renders it:
// "/a/b[k=v]/c", or "origin:/a/..." with an origin.
func parsePath(s string) (*gnmi.Path, error) {
	origin, rest := "", s
	if !strings.HasPrefix(s, "/") {
		var ok bool
		if origin, rest, ok = strings.Cut(s, ":"); !ok {
			return nil, fmt.Errorf("path %q is not absolute", s)
		}
	}
	p, err := ygot.StringToStructuredPath(rest)
	if err != nil {
		return nil, err
	}
	p.Origin = origin
	return p, nil
}

// decodeValue decodes a trace value's TypedValue.
func decodeValue(v Value) (*gnmi.TypedValue, error) {
	tv := &gnmi.TypedValue{}
	if err := protojson.Unmarshal(v.Value, tv); err != nil {
		return nil, fmt.Errorf("the trace's value at %s does not decode: %w", v.Path, err)
	}
	return tv, nil
}

// show renders a value for a message: a string quoted, other scalars with
// their type (uint 1500), JSON with its encoding.
func show(v *gnmi.TypedValue) string {
	switch x := v.GetValue().(type) {
	case nil:
		return "no value"
	case *gnmi.TypedValue_StringVal:
		return strconv.Quote(x.StringVal)
	case *gnmi.TypedValue_UintVal:
		return "uint " + strconv.FormatUint(x.UintVal, 10)
	case *gnmi.TypedValue_IntVal:
		return "int " + strconv.FormatInt(x.IntVal, 10)
	case *gnmi.TypedValue_BoolVal:
		return "bool " + strconv.FormatBool(x.BoolVal)
	case *gnmi.TypedValue_DoubleVal:
		return "double " + strconv.FormatFloat(x.DoubleVal, 'g', -1, 64)
	case *gnmi.TypedValue_JsonVal:
		return "JSON " + string(x.JsonVal)
	case *gnmi.TypedValue_JsonIetfVal:
		return "JSON_IETF " + string(x.JsonIetfVal)
	}
	return prototext.MarshalOptions{}.Format(v)
}

func consistency(format string, args ...any) Violation {
	return Violation{Property: PropertyConsistency, Message: fmt.Sprintf(format, args...)}
}
