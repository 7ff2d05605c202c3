package leaves

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/value"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// Errors Decompose wraps; use errors.Is.
var (
	// ErrInvalid: the value is malformed or contradicts its path (a list
	// entry without its keys, a key leaf that differs from the path's key,
	// two cases of one choice). A device would refuse it too.
	ErrInvalid = errors.New("invalid value")
	// ErrNeedSchema: the value can be recorded exactly only with the
	// device's YANG (the --yang option): a JSON list whose keys are
	// unknown, an empty JSON array or object whose kind is unknown.
	ErrNeedSchema = errors.New("needs the device's YANG schema")
)

// Error is a value Decompose refuses, with the path it is about.
type Error struct {
	Path   *gpb.Path
	Reason string
	kind   error
}

func (e *Error) Error() string { return pathString(e.Path) + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) or ErrNeedSchema hold.
func (e *Error) Unwrap() error { return e.kind }

func invalid(p *gpb.Path, format string, args ...any) error {
	return &Error{Path: p, Reason: fmt.Sprintf(format, args...), kind: ErrInvalid}
}

func needSchema(p *gpb.Path, format string, args ...any) error {
	return &Error{Path: p, Reason: fmt.Sprintf(format, args...) +
		"; the sidecar records every Set leaf by leaf and cannot do so exactly here: start it with --yang (the device's YANG modules)",
		kind: ErrNeedSchema}
}

// Writes is what one Update or Replace writes, leaf by leaf.
type Writes struct {
	// Deletes are subtrees the write removes besides what it names: the
	// other cases of a choice one of whose cases it writes. Deleting a
	// missing path is no change.
	Deletes []*gpb.Path
	// Units are the leaf-level values, in the order they take effect: a
	// marker before the units under it. Every unit's path has no module
	// prefixes.
	Units []*gpb.Update
}

// Decomposer breaks Set values into units (see the package doc). It is
// safe for concurrent use.
type Decomposer struct {
	schema *Schema
	keys   *Keys
}

// NewDecomposer returns a decomposer using schema (nil: none) and the list
// keys learned in keys (nil: none).
func NewDecomposer(schema *Schema, keys *Keys) *Decomposer {
	return &Decomposer{schema: schema, keys: keys}
}

// Schema returns the decomposer's schema (nil: none).
func (d *Decomposer) Schema() *Schema { return d.schema }

// Decompose returns the units an Update or Replace of v at p writes (for a
// Replace, after the subtree at p is deleted). p is a full path (prefix
// joined). Neither p nor v is modified, and the result shares neither.
func (d *Decomposer) Decompose(p *gpb.Path, v *gpb.TypedValue) (*Writes, error) {
	w := &walk{d: d, origin: p.GetOrigin(), out: &Writes{}}
	elems := canonical(p.GetElem())
	n := d.schema.rootNode()
	// The nodes above the value: markers for list entries and presence
	// containers, choices for the cases the path goes through.
	for k, e := range elems {
		parent := elems[:k]
		var via []choiceCase
		n, via = n.child(e.GetName())
		w.cases(parent, via)
		if k == len(elems)-1 {
			break
		}
		if len(e.GetKey()) > 0 || n.isPresence() {
			w.marker(elems[:k+1])
		}
	}
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_JsonVal:
		w.enc = encJSON
		return w.json(elems, n, x.JsonVal)
	case *gpb.TypedValue_JsonIetfVal:
		w.enc = encIETF
		return w.json(elems, n, x.JsonIetfVal)
	case nil:
		return nil, invalid(p, "no value")
	}
	w.enc = encIETF
	if len(elems) > 0 && len(elems[len(elems)-1].GetKey()) > 0 || n.isPresence() {
		// A scalar at a list entry or presence container: the device
		// decides; the entry exists if it takes it.
		w.marker(elems)
	}
	if key, ok := w.keyLeaf(elems, n); ok {
		got, err := scalarString(v)
		if err != nil || !sameKey(got, key) {
			return nil, invalid(p, "the key leaf holds %s but the path's key is %q", showScalar(v), key)
		}
		return w.out, nil
	}
	w.unit(elems, v)
	return w.out, nil
}

// encoding is the JSON flavour of the client's value; units and markers
// are written in it.
type encoding int

const (
	encIETF encoding = iota
	encJSON
)

type walk struct {
	d      *Decomposer
	origin string
	enc    encoding
	out    *Writes
	// marked holds the markers already written, to write each once; past
	// a few (a JSON value's list entries), markers indexes them by path.
	marked  [][]*gpb.PathElem
	markers map[string]bool
}

func (w *walk) path(elems []*gpb.PathElem) *gpb.Path {
	return &gpb.Path{Origin: w.origin, Elem: slices.Clone(elems)}
}

func (w *walk) typed(b []byte) *gpb.TypedValue {
	if w.enc == encJSON {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: b}}
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}
}

func (w *walk) unit(elems []*gpb.PathElem, v *gpb.TypedValue) {
	w.out.Units = append(w.out.Units, &gpb.Update{Path: w.path(elems), Val: v})
}

// marker writes the marker {} of the list entry or container at elems,
// once.
func (w *walk) marker(elems []*gpb.PathElem) {
	if w.markers == nil && len(w.marked) < fewMarkers {
		// Most values mark only the entries above them: no map, no string.
		if slices.ContainsFunc(w.marked, func(m []*gpb.PathElem) bool { return sameElems(m, elems) }) {
			return
		}
		w.marked = append(w.marked, elems)
	} else {
		if w.markers == nil {
			w.markers = make(map[string]bool, 2*fewMarkers)
			for _, m := range w.marked {
				w.markers[elemsString(m)] = true
			}
		}
		id := elemsString(elems)
		if w.markers[id] {
			return
		}
		w.markers[id] = true
	}
	w.unit(elems, w.typed([]byte("{}")))
}

// fewMarkers is how many markers a walk compares one by one before it
// indexes them.
const fewMarkers = 8

// sameElems reports whether a and b name the same node: the same names,
// each with the same keys.
func sameElems(a, b []*gpb.PathElem) bool {
	return slices.EqualFunc(a, b, func(x, y *gpb.PathElem) bool {
		return x.GetName() == y.GetName() && maps.Equal(x.GetKey(), y.GetKey())
	})
}

// cases records, for a node reached under parent through the choices and
// cases via, the deletes of every other case of those choices.
func (w *walk) cases(parent []*gpb.PathElem, via []choiceCase) {
	for _, cc := range via {
		for _, name := range otherCases(cc.choice, cc.kase) {
			w.out.Deletes = append(w.out.Deletes, w.path(append(slices.Clip(parent), &gpb.PathElem{Name: name})))
		}
	}
}

// keyLeaf reports whether the node at elems is a key leaf of the list
// entry above it, and the key's value in the path.
func (w *walk) keyLeaf(elems []*gpb.PathElem, n node) (string, bool) {
	if len(elems) < 2 {
		return "", false
	}
	name := elems[len(elems)-1].GetName()
	key, ok := elems[len(elems)-2].GetKey()[name]
	if !ok || len(elems[len(elems)-1].GetKey()) > 0 {
		return "", false
	}
	if n.known() && !n.isLeaf() {
		return "", false
	}
	return key, true
}

// json decomposes a JSON value at elems (schema node n).
func (w *walk) json(elems []*gpb.PathElem, n node, b []byte) (*Writes, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalid(w.path(elems), "value is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, invalid(w.path(elems), "value is not valid JSON: text after the value")
	}
	if key, ok := w.keyLeaf(elems, n); ok {
		got, err := jsonKey(v)
		if err != nil || !sameKey(got, key) {
			return nil, invalid(w.path(elems), "the key leaf holds %s but the path's key is %q", showJSON(v), key)
		}
		return w.out, nil
	}
	var err error
	if a, isArray := v.([]any); isArray && !n.isLeafList() && !n.isLeaf() {
		last := len(elems) - 1
		if last < 0 || len(elems[last].GetKey()) > 0 {
			return nil, invalid(w.path(elems), "a JSON array must be the value of a list or a leaf-list, not of a list entry or the root")
		}
		err = w.array(elems[:last], elems[last].GetName(), n, a)
	} else {
		err = w.value(elems, n, v)
	}
	if err != nil {
		return nil, err
	}
	return w.out, nil
}

// value decomposes the JSON value v at elems (schema node n).
func (w *walk) value(elems []*gpb.PathElem, n node, v any) error {
	obj, isObject := v.(map[string]any)
	if !isObject || n.isLeaf() || n.isLeafList() {
		// A leaf, a leaf-list (arrays reach here only for leaf-lists), or
		// an object the schema calls a leaf (anydata): one unit.
		b, err := marshal(v)
		if err != nil {
			return invalid(w.path(elems), "%v", err)
		}
		w.unit(elems, w.typed(b))
		return nil
	}
	entry := len(elems) > 0 && len(elems[len(elems)-1].GetKey()) > 0
	switch {
	case entry || n.isPresence():
		w.marker(elems)
	case len(obj) == 0 && !n.known() && len(elems) > 0:
		// An empty object without a schema: a presence container, or a
		// container that will be no different. A marker records it either
		// way (see the journal: a marker is written only where nothing is).
		w.marker(elems)
	}
	members, err := normalizeMembers(w.path(elems), obj)
	if err != nil {
		return err
	}
	var picked []choiceCase
	for _, name := range slices.Sorted(maps.Keys(members)) {
		child, via := n.child(name)
		for _, cc := range via {
			for _, p := range picked {
				if p.choice == cc.choice && p.kase != cc.kase {
					return invalid(w.path(elems), "members %q and others are in different cases of choice %q", name, cc.choice.Name)
				}
			}
			if !slices.Contains(picked, cc) {
				picked = append(picked, cc)
			}
		}
		childElems := append(slices.Clip(elems), &gpb.PathElem{Name: name})
		if entry {
			if key, isKey := elems[len(elems)-1].GetKey()[name]; isKey {
				got, err := jsonKey(members[name])
				if err != nil || !sameKey(got, key) {
					return invalid(w.path(childElems), "the key leaf holds %s but the entry's key is %q", showJSON(members[name]), key)
				}
				continue
			}
		}
		if a, isArray := members[name].([]any); isArray && !child.isLeafList() && !child.isLeaf() {
			if err := w.array(elems, name, child, a); err != nil {
				return err
			}
			continue
		}
		if err := w.value(childElems, child, members[name]); err != nil {
			return err
		}
	}
	w.cases(elems, picked)
	return nil
}

// array decomposes the JSON array a, the value of member name under parent:
// a list's entries, or a leaf-list (schema node n is the member's).
func (w *walk) array(parent []*gpb.PathElem, name string, n node, a []any) error {
	elems := append(slices.Clip(parent), &gpb.PathElem{Name: name})
	var keys []string
	switch {
	case n.isList():
		keys = n.keys()
	case n.known():
		return invalid(w.path(elems), "a JSON array, but the schema's node here is neither a list nor a leaf-list")
	default:
		objects, scalars := 0, 0
		for _, e := range a {
			if _, ok := e.(map[string]any); ok {
				objects++
			} else if _, ok := e.([]any); !ok {
				scalars++
			}
		}
		switch {
		case len(a) == 0:
			return needSchema(w.path(elems), "an empty JSON array may be a list or a leaf-list")
		case scalars == len(a):
			return w.value(elems, node{}, a) // a leaf-list, whole
		case objects != len(a):
			return invalid(w.path(elems), "a JSON array mixing objects with other values")
		}
		names := make([]string, len(elems))
		for k, e := range elems {
			names[k] = e.GetName()
		}
		var ok bool
		if keys, ok = w.d.keys.lookup(w.origin, names); !ok {
			return needSchema(w.path(elems), "a JSON list whose key names the sidecar does not know (it learns them from keyed paths, e.g. %s[name=...])", elemsString(elems))
		}
	}
	if len(keys) == 0 {
		return &Error{Path: w.path(elems), kind: ErrNeedSchema,
			Reason: "a JSON list without keys (a keyless YANG list): the sidecar cannot record its entries one by one, so it could not roll it back or re-push it exactly"}
	}
	for k, e := range a {
		obj, ok := e.(map[string]any)
		if !ok {
			return invalid(w.path(elems), "list entry %d is not a JSON object", k+1)
		}
		members, err := normalizeMembers(w.path(elems), obj)
		if err != nil {
			return err
		}
		entryKeys := make(map[string]string, len(keys))
		for _, key := range keys {
			kv, ok := members[key]
			if !ok {
				return invalid(w.path(elems), "list entry %d has no value for its key %q", k+1, key)
			}
			s, err := jsonKey(kv)
			if err != nil {
				return invalid(w.path(elems), "list entry %d: key %q: %v", k+1, key, err)
			}
			entryKeys[key] = s
		}
		entryElems := append(slices.Clip(parent), &gpb.PathElem{Name: name, Key: entryKeys})
		if err := w.value(entryElems, n, members); err != nil {
			return err
		}
	}
	return nil
}

// normalizeMembers returns obj's members by name without module prefix;
// two members naming the same node is an error.
func normalizeMembers(p *gpb.Path, obj map[string]any) (map[string]any, error) {
	prefixed := false
	for k := range obj {
		if strings.IndexByte(k, ':') >= 0 {
			prefixed = true
			break
		}
	}
	if !prefixed {
		return obj, nil
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		n := Name(k)
		if _, dup := out[n]; dup {
			return nil, invalid(p, "two members name %q", n)
		}
		out[n] = v
	}
	return out, nil
}

// canonical returns elems with module prefixes dropped from names (elems
// itself if none has one).
func canonical(elems []*gpb.PathElem) []*gpb.PathElem {
	for k, e := range elems {
		if strings.IndexByte(e.GetName(), ':') < 0 {
			continue
		}
		out := slices.Clone(elems[:k])
		for _, e := range elems[k:] {
			out = append(out, &gpb.PathElem{Name: Name(e.GetName()), Key: e.GetKey()})
		}
		return out
	}
	return elems
}

// jsonKey renders a JSON key leaf value as a path key: strings as they
// are, numbers as written, booleans as true/false.
func jsonKey(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	}
	return "", fmt.Errorf("a key must be a string, a number or a boolean, not %s", showJSON(v))
}

// sameKey compares a key leaf's value with a path's key, allowing a module
// prefix on one side only (an identityref: "openconfig-policy-types:BGP"
// and "BGP").
func sameKey(a, b string) bool {
	return a == b || identityName(a) == b || a == identityName(b)
}

// identityName drops a module prefix from an identity value; values that
// do not start with a YANG identifier and a colon (an IPv6 address) are
// returned as they are.
func identityName(s string) string {
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return s
	}
	for k, r := range s[:i] {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (k == 0 || !(r >= '0' && r <= '9' || r == '-' || r == '.')) {
			return s
		}
	}
	return s[i+1:]
}

// scalarString renders a scalar TypedValue as a path key would.
func scalarString(v *gpb.TypedValue) (string, error) {
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return x.StringVal, nil
	case *gpb.TypedValue_AsciiVal:
		return x.AsciiVal, nil
	}
	s, err := value.ToScalar(v)
	if err != nil {
		return "", err
	}
	return fmt.Sprint(s), nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func showJSON(v any) string {
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return truncate(string(b), 64)
}

func showScalar(v *gpb.TypedValue) string {
	if s, err := scalarString(v); err == nil {
		return fmt.Sprintf("%q", truncate(s, 64))
	}
	return "a non-scalar value"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// elemsString renders element names and keys as a gNMI path string.
func elemsString(elems []*gpb.PathElem) string {
	return gnmipath.String(&gpb.Path{Elem: elems})
}

// pathString renders p for messages, cut to about 200 bytes.
func pathString(p *gpb.Path) string {
	return truncate(gnmipath.String(p), 200)
}
