package drift

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Kind is how the device differs from the journal at a path.
type Kind int

// The kinds of drift.
const (
	// Changed: the device holds another value than the journal's.
	Changed Kind = iota + 1
	// Missing: the device holds nothing where the journal holds a leaf,
	// a leaf-list, a list entry or a presence container.
	Missing
	// Recreated: the device holds a leaf or a list entry where the
	// journal holds a delete (someone re-created what a Set deleted).
	Recreated
)

func (k Kind) String() string {
	switch k {
	case Changed:
		return "changed"
	case Missing:
		return "missing"
	case Recreated:
		return "recreated"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Diff is one path where the device's configuration differs from the
// journal's applied configuration.
type Diff struct {
	// Path is where: a leaf or leaf-list, or a list entry (or presence
	// container) as a whole.
	Path *gpb.Path
	Kind Kind
	// Journal is the journal's applied value at Path: a leaf's value, or
	// the marker {} of a list entry or presence container it holds; nil
	// when the journal deletes Path.
	Journal *gpb.TypedValue
	// Device is the device's value at Path: a leaf's value, or {} for a
	// list entry it holds; nil when it holds nothing there.
	Device *gpb.TypedValue
	// Index is the proposal that wrote the journal's value, or its delete.
	Index uint64
}

// Input is what Compare compares.
type Input struct {
	// Scope is the subtree compared (nil: everything given).
	Scope *gpb.Path
	// Applied are the journal's applied values at and under Scope, and
	// those at paths above it (a tombstone there deletes the scope),
	// tombstones included (journal.Applied, journal.AppliedAt).
	Applied []*journal.PathValue
	// Device is the device's answer to a Get of Scope's configuration
	// (type CONFIG), in any encoding.
	Device []*gpb.Notification
	// OutOfSync are the journal's out-of-sync records: paths at or under
	// them are already reported, not drift.
	OutOfSync []*journal.OutOfSync
	// Decomposer breaks the device's values into the journal's units;
	// its schema (--yang), if any, tells presence containers, state
	// data and YANG defaults.
	Decomposer *leaves.Decomposer
}

// Compare returns, in path order, where the device differs from the
// journal within in.Scope (docs/drift.md "What is drift"):
//
//   - a leaf or leaf-list the journal holds that the device lacks, or
//     holds with another value (by meaning: uint 1500 is JSON 1500; a
//     leaf-list's elements in any order): Changed or Missing;
//   - a list entry (or, with a schema, presence container) the journal
//     holds of which the device holds nothing: Missing;
//   - a device leaf at or under a journal tombstone that no value written
//     with the tombstone or after it accounts for: Recreated, reported at
//     the topmost list entry on its path the journal does not hold (one
//     Diff for a re-created entry), else at the leaf. Not drift: a list
//     key leaf of an entry the journal holds, and, with a schema, a leaf
//     holding its YANG default.
//
// Everything else the device holds is its own (defaults, derived values,
// configuration no Set wrote, state data): not drift. Paths at or under an
// out-of-sync record are left out. Opaque journal values (ASCII, bytes,
// protobuf, a JSON object other than a marker) are compared only with a
// device value at exactly their path.
func Compare(in Input) []Diff {
	schema := in.Decomposer.Schema()
	excluded := func(p *gpb.Path) bool {
		for _, rec := range in.OutOfSync {
			if under(p, rec.GetValue().GetPath()) {
				return true
			}
		}
		return false
	}
	inScope := func(p *gpb.Path) bool { return in.Scope == nil || under(p, in.Scope) }

	// The journal's side.
	at := make(map[string]*journal.PathValue, len(in.Applied))
	covers := map[string]*journal.PathValue{} // tombstones and opaque values
	live := map[string]bool{}                 // keys at or above a live value
	for _, pv := range in.Applied {
		k := key(pv.GetPath())
		at[k] = pv
		if pv.GetDeleted() || isOpaque(pv.GetValue()) {
			covers[k] = pv
		}
		if !pv.GetDeleted() {
			live[k] = true
			for _, c := range coveringPaths(pv.GetPath()) {
				live[key(c)] = true
			}
		}
	}

	// The device's side.
	origin := in.Scope.GetOrigin()
	all := deviceUnits(in.Device, origin, in.Decomposer)
	kept := make([]bool, len(all))
	var under, underKept map[string]bool // keys above a unit, a kept one
	for n, u := range all {
		kept[n] = inScope(u.path) && !excluded(u.path) && !leaves.IsState(u.path, schema)
		if u.marker {
			continue
		}
		if under == nil {
			under, underKept = map[string]bool{}, map[string]bool{}
		}
		for _, c := range coveringPaths(u.path) {
			under[key(c)] = true
			underKept[key(c)] = underKept[key(c)] || kept[n]
		}
	}
	var units []unit
	for n, u := range all {
		// A marker the decomposer implied only from leaves left out
		// (state data under a list entry) does not make the entry the
		// device's configuration; one with nothing under it (an entry
		// holding its keys only) does.
		if kept[n] && (!u.marker || !under[u.key] || underKept[u.key]) {
			units = append(units, u)
		}
	}
	onDevice := make(map[string]unit, len(units))
	held := map[string]bool{} // keys at or above a device unit
	for _, u := range units {
		onDevice[u.key] = u
		held[u.key] = true
		for _, c := range coveringPaths(u.path) {
			held[key(c)] = true
		}
	}

	found := map[string]Diff{}
	add := func(d Diff) {
		k := key(d.Path)
		if _, dup := found[k]; !dup {
			found[k] = d
		}
	}
	compared := func(pv *journal.PathValue) bool {
		return !pv.GetDeleted() && inScope(pv.GetPath()) && !excluded(pv.GetPath())
	}
	// Entries (and presence containers) the device lost: one Diff each,
	// none for what the journal holds under them.
	lost := map[string]bool{}
	for _, pv := range in.Applied {
		p, v := pv.GetPath(), pv.GetValue()
		if k := key(p); compared(pv) && leaves.IsMarker(v) && (isEntry(p) || schema.Node(p).Presence) && !held[k] {
			lost[k] = true
			add(Diff{Path: p, Kind: Missing, Journal: v, Index: pv.GetIndex()})
		}
	}
	underLost := func(p *gpb.Path) bool {
		if len(lost) == 0 {
			return false
		}
		for _, c := range coveringPaths(p) {
			if lost[key(c)] {
				return true
			}
		}
		return false
	}
	for _, pv := range in.Applied {
		p, v := pv.GetPath(), pv.GetValue()
		if !compared(pv) || underLost(p) {
			continue
		}
		k := key(p)
		switch {
		case leaves.IsMarker(v):
		case isOpaque(v):
			if u, ok := onDevice[k]; ok && u.direct && !sameValue(u.val, v) {
				add(Diff{Path: p, Kind: Changed, Journal: v, Device: u.val, Index: pv.GetIndex()})
			}
		default:
			u, ok := onDevice[k]
			switch {
			case !ok:
				add(Diff{Path: p, Kind: Missing, Journal: v, Index: pv.GetIndex()})
			case !sameValue(u.val, v):
				add(Diff{Path: p, Kind: Changed, Journal: v, Device: u.val, Index: pv.GetIndex()})
			}
		}
	}
	for _, u := range units {
		if u.marker && !isEntry(u.path) {
			continue // a container: its leaves, if any, speak for it
		}
		tomb := deciding(u.path, at, covers)
		if tomb == nil {
			continue
		}
		if entry, ok := keyOf(u.path, u.val); ok && live[key(entry)] {
			continue // the key of an entry the journal holds
		}
		if !u.marker && schema.IsDefault(u.path, u.val) {
			continue
		}
		if e := recreatedEntry(u.path, at, covers, live); e != nil {
			add(Diff{Path: e, Kind: Recreated, Device: markerValue(), Index: tomb.GetIndex()})
			continue
		}
		add(Diff{Path: u.path, Kind: Recreated, Device: u.val, Index: tomb.GetIndex()})
	}
	out := make([]Diff, 0, len(found))
	for _, k := range slices.Sorted(maps.Keys(found)) {
		out = append(out, found[k])
	}
	return out
}

// deciding returns the journal's tombstone that deletes the device leaf at
// p, or nil when none does: of the applied value at p, the opaque values
// above it and the tombstones at or above it, the newest decides, a value
// winning a tie (a Set applies its deletes first).
func deciding(p *gpb.Path, at, covers map[string]*journal.PathValue) *journal.PathValue {
	var put, tomb *journal.PathValue
	consider := func(pv *journal.PathValue) {
		switch {
		case pv == nil:
		case pv.GetDeleted():
			tomb = newer(tomb, pv)
		default:
			put = newer(put, pv)
		}
	}
	consider(at[key(p)])
	if len(covers) > 0 {
		for _, c := range coveringPaths(p) {
			consider(covers[key(c)])
		}
	}
	if tomb == nil || (put != nil && put.GetIndex() >= tomb.GetIndex()) {
		return nil
	}
	return tomb
}

// newer returns whichever of a (possibly nil) and b was written last.
func newer(a, b *journal.PathValue) *journal.PathValue {
	if a == nil || b.GetIndex() > a.GetIndex() {
		return b
	}
	return a
}

// recreatedEntry returns the topmost list entry on p (p itself included)
// that the journal deletes (a tombstone at or above it decides) and holds
// nothing live at or under: the entry someone re-created. Nil if there is
// none.
func recreatedEntry(p *gpb.Path, at, covers map[string]*journal.PathValue, live map[string]bool) *gpb.Path {
	elems := p.GetElem()
	for n := 1; n <= len(elems); n++ {
		if len(elems[n-1].GetKey()) == 0 {
			continue
		}
		e := &gpb.Path{Origin: p.GetOrigin(), Elem: elems[:n]}
		if !live[key(e)] && deciding(e, at, covers) != nil {
			return e
		}
	}
	return nil
}

// unit is one of the device's values, as the journal records values: a
// leaf, a leaf-list, a marker {} of a list entry or container, or a value
// the journal could not break down (an opaque one).
type unit struct {
	path   *gpb.Path
	key    string
	val    *gpb.TypedValue
	marker bool
	// direct: the device answered with this value at exactly this path
	// (not as part of a value above it).
	direct bool
}

// deviceUnits decomposes the updates of a device's Get answer into units,
// in path order. Paths without an origin get origin. What the decomposer
// refuses as a whole (a JSON list whose keys the journal does not know,
// say) is broken down member by member; a part that still cannot be is
// kept whole at its path.
func deviceUnits(ns []*gpb.Notification, origin string, dec *leaves.Decomposer) []unit {
	byKey := map[string]unit{}
	for _, n := range ns {
		for _, u := range n.GetUpdate() {
			p := gnmipath.Join(n.GetPrefix(), u.GetPath())
			if p.Origin == "" {
				p.Origin = origin
			}
			addUnits(byKey, dec, p, u.GetVal())
		}
	}
	out := make([]unit, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out
}

func addUnits(out map[string]unit, dec *leaves.Decomposer, p *gpb.Path, v *gpb.TypedValue) {
	w, err := dec.Decompose(p, v)
	if err == nil {
		for _, u := range w.Units {
			k := key(u.GetPath())
			if old, ok := out[k]; ok && !old.marker && leaves.IsMarker(u.GetVal()) {
				continue // a marker adds nothing to a value there
			}
			out[k] = unit{path: u.GetPath(), key: k, val: u.GetVal(), marker: leaves.IsMarker(u.GetVal()), direct: k == key(p)}
		}
		return
	}
	raw, ietf := jsonText(v)
	if raw == nil {
		return // a scalar the decomposer refuses: a key leaf that contradicts its path
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) == nil {
		for name, m := range members {
			child := &gpb.Path{Origin: p.GetOrigin(), Elem: gnmipath.Concat(p.GetElem(), []*gpb.PathElem{{Name: leaves.Name(name)}})}
			addUnits(out, dec, child, jsonValue(m, ietf))
		}
		return
	}
	if t := bytes.TrimSpace(raw); !bytes.Equal(t, []byte("[]")) && !bytes.Equal(t, []byte("null")) {
		k := key(p)
		out[k] = unit{path: p, key: k, val: v, direct: true}
	}
}

// jsonText returns the JSON of a JSON or JSON_IETF value and whether it is
// JSON_IETF; nil for other values.
func jsonText(v *gpb.TypedValue) ([]byte, bool) {
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_JsonIetfVal:
		return x.JsonIetfVal, true
	case *gpb.TypedValue_JsonVal:
		return x.JsonVal, false
	}
	return nil, false
}

func jsonValue(b []byte, ietf bool) *gpb.TypedValue {
	if ietf {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: b}}
}

// markerValue is the marker {} of a list entry.
func markerValue() *gpb.TypedValue {
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte("{}")}}
}

// sameValue reports whether a device value and a journal value mean the
// same (leaves.Equal), a leaf-list's elements in any order: a leaf-list is
// ordered by the system unless its YANG says otherwise.
func sameValue(a, b *gpb.TypedValue) bool {
	if leaves.Equal(a, b) {
		return true
	}
	ae, aok := listElements(a)
	be, bok := listElements(b)
	if !aok || !bok || len(ae) != len(be) {
		return false
	}
	used := make([]bool, len(be))
next:
	for _, x := range ae {
		for n, y := range be {
			if !used[n] && leaves.Equal(x, y) {
				used[n] = true
				continue next
			}
		}
		return false
	}
	return true
}

// listElements returns the elements of a leaf-list value (a leaflist_val
// or a JSON array).
func listElements(v *gpb.TypedValue) ([]*gpb.TypedValue, bool) {
	if ll := v.GetLeaflistVal(); ll != nil {
		return ll.GetElement(), true
	}
	raw, ietf := jsonText(v)
	var elems []json.RawMessage
	if raw == nil || json.Unmarshal(raw, &elems) != nil {
		return nil, false
	}
	out := make([]*gpb.TypedValue, len(elems))
	for n, e := range elems {
		out[n] = jsonValue(e, ietf)
	}
	return out, true
}

// isOpaque reports whether v is a value that may stand for a subtree the
// device shows as leaves: a JSON object other than a marker, or an ASCII,
// bytes or protobuf value.
func isOpaque(v *gpb.TypedValue) bool {
	switch v.GetValue().(type) {
	case *gpb.TypedValue_AsciiVal, *gpb.TypedValue_BytesVal, *gpb.TypedValue_ProtoBytes, *gpb.TypedValue_AnyVal:
		return true
	}
	raw, _ := jsonText(v)
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && !leaves.IsMarker(v)
}

// isEntry reports whether p is a list entry (its last element has keys).
func isEntry(p *gpb.Path) bool {
	elems := p.GetElem()
	return len(elems) > 0 && len(elems[len(elems)-1].GetKey()) > 0
}

// keyOf reports whether p, holding v, is a list key leaf of the entry
// above it ("…/interface[name=eth0]/name", or OpenConfig's copy in the
// entry's config container "…/interface[name=eth0]/config/name") holding
// the key's value, and returns the entry.
func keyOf(p *gpb.Path, v *gpb.TypedValue) (*gpb.Path, bool) {
	elems := p.GetElem()
	n := len(elems)
	if n < 2 {
		return nil, false
	}
	name := leaves.Name(elems[n-1].GetName())
	owner := n - 2
	if n >= 3 && leaves.Name(elems[n-2].GetName()) == "config" && len(elems[n-2].GetKey()) == 0 {
		owner = n - 3
	}
	want, ok := elems[owner].GetKey()[name]
	if !ok {
		return nil, false
	}
	got, ok := scalarText(v)
	if !ok || got != want {
		return nil, false
	}
	return &gpb.Path{Origin: p.GetOrigin(), Elem: elems[:owner+1]}, true
}

// scalarText renders a scalar value, or a JSON scalar, as it appears in a
// path's list key.
func scalarText(v *gpb.TypedValue) (string, bool) {
	if raw, _ := jsonText(v); raw != nil {
		var x any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&x) != nil {
			return "", false
		}
		switch y := x.(type) {
		case string:
			return y, true
		case json.Number:
			return y.String(), true
		case bool:
			return strconv.FormatBool(y), true
		}
		return "", false
	}
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return x.StringVal, true
	case *gpb.TypedValue_UintVal:
		return strconv.FormatUint(x.UintVal, 10), true
	case *gpb.TypedValue_IntVal:
		return strconv.FormatInt(x.IntVal, 10), true
	case *gpb.TypedValue_BoolVal:
		return strconv.FormatBool(x.BoolVal), true
	}
	return "", false
}

// coveringPaths returns the paths other than p that p lies under
// (journal.IsUnder): every proper prefix of p, the origin's root included,
// and for each list entry on the way (p's last element included) the
// whole list, its element without keys.
func coveringPaths(p *gpb.Path) []*gpb.Path {
	elems := p.GetElem()
	out := make([]*gpb.Path, 0, 2*len(elems)+1)
	for n := 0; n <= len(elems); n++ {
		if n < len(elems) {
			out = append(out, &gpb.Path{Origin: p.GetOrigin(), Elem: elems[:n]})
		}
		if n > 0 && len(elems[n-1].GetKey()) > 0 {
			list := append(slices.Clone(elems[:n-1]), &gpb.PathElem{Name: elems[n-1].GetName()})
			out = append(out, &gpb.Path{Origin: p.GetOrigin(), Elem: list})
		}
	}
	return out
}

// key is p's journal key (journal.PathKey: origin "openconfig" is none).
func key(p *gpb.Path) string { return string(journal.PathKey(p)) }

// under reports whether p is q or lies under it (journal.IsUnder: origin
// "openconfig" is none).
func under(p, q *gpb.Path) bool { return journal.IsUnder(p, q) }
