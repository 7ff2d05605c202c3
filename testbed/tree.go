package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/util"
	"github.com/openconfig/ygot/ygot"
	"github.com/openconfig/ygot/ytypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// This file holds the schema-aware operations on a configuration tree. A Set
// works on copies of what it touches and installs them only on success,
// which is what makes it atomic: a new root, or, when it writes only
// entries of top-level lists, new versions of those entries put into the
// running tree in place (under Device.tree).

// pathString renders p for messages; it never fails.
func pathString(p *gpb.Path) string {
	s, err := ygot.PathToString(p)
	if err != nil || s == "" {
		return "/"
	}
	if o := p.GetOrigin(); o != "" {
		return o + ":" + s
	}
	return s
}

// joinPath returns prefix+p as one path, after checking both are well formed.
func joinPath(prefix, p *gpb.Path) (*gpb.Path, error) {
	if err := checkPath(prefix); err != nil {
		return nil, fmt.Errorf("prefix: %w", err)
	}
	if err := checkPath(p); err != nil {
		return nil, err
	}
	if t := p.GetTarget(); t != "" {
		return nil, fmt.Errorf("path has target %q: gNMI allows a target only in the prefix (specification 2.2.2.1)", t)
	}
	origin := prefix.GetOrigin()
	if o := p.GetOrigin(); o != "" {
		if origin != "" && origin != o {
			return nil, fmt.Errorf("origin %q conflicts with prefix origin %q", o, origin)
		}
		origin = o
	}
	if origin != "" && origin != "openconfig" {
		return nil, fmt.Errorf("unsupported origin %q (this device serves only the openconfig origin)", origin)
	}
	elems := make([]*gpb.PathElem, 0, len(prefix.GetElem())+len(p.GetElem()))
	elems = append(elems, prefix.GetElem()...)
	elems = append(elems, p.GetElem()...)
	return &gpb.Path{Elem: elems}, nil
}

func checkPath(p *gpb.Path) error {
	// Clients such as gnmi_cli fill both elem and the deprecated element;
	// elem wins, element alone is refused.
	//lint:ignore SA1019 refusing a path given only as the deprecated field is the point.
	if len(p.GetElement()) > 0 && len(p.GetElem()) == 0 {
		return errors.New("path uses only the deprecated 'element' field; send 'elem'")
	}
	for _, e := range p.GetElem() {
		if e.GetName() == "" {
			return errors.New("path has an element with an empty name")
		}
		for k := range e.GetKey() {
			if k == "" {
				return fmt.Errorf("element %q has a key with an empty name", e.GetName())
			}
		}
	}
	return nil
}

func hasElem(p *gpb.Path, name string) bool {
	for _, e := range p.GetElem() {
		if e.GetName() == name {
			return true
		}
	}
	return false
}

// schemaCode classifies an error from ytypes: a path that is not in the
// schema is NotFound, anything else (wrong type, bad value) InvalidArgument.
func schemaCode(err error) codes.Code {
	if st, ok := status.FromError(err); ok && st.Code() == codes.NotFound {
		return codes.NotFound
	}
	if strings.Contains(err.Error(), "no match found") {
		return codes.NotFound
	}
	return codes.InvalidArgument
}

// errMsg is err's message without a gRPC status wrapper.
func errMsg(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

// pathError builds the status of a failed operation on p.
func pathError(code codes.Code, p *gpb.Path, format string, args ...any) error {
	return status.Errorf(code, "%s: %s", pathString(p), fmt.Sprintf(format, args...))
}

// normalizeValue turns a JSON value into JSON_IETF (ytypes reads RFC 7951,
// which accepts unprefixed member names) and rejects encodings that have no
// meaning for a configuration value.
func normalizeValue(v *gpb.TypedValue) (*gpb.TypedValue, error) {
	switch x := v.GetValue().(type) {
	case nil:
		return nil, errors.New("update has no value")
	case *gpb.TypedValue_JsonVal:
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: x.JsonVal}}, nil
	case *gpb.TypedValue_AsciiVal, *gpb.TypedValue_BytesVal, *gpb.TypedValue_ProtoBytes, *gpb.TypedValue_AnyVal:
		return nil, fmt.Errorf("value encoding %T is not supported; send a scalar or JSON_IETF value", x)
	}
	return v, nil
}

// setOp is one step of a SetRequest, with its full path: it clears what
// is at the path (delete, replace), writes its value there (replace,
// update), or both. A union_replace is two steps, run apart (see
// Set): the clear of its path, and later the write of its value.
type setOp struct {
	op    gpb.UpdateResult_Operation
	path  *gpb.Path // as the client sent it (relative to the prefix)
	full  *gpb.Path
	val   *gpb.TypedValue
	clear bool // remove what is at full first
	write bool // then write val there
}

// change is what a Set does to the running configuration once it is
// validated: a new root (next), or new versions of entries of top-level
// lists (in scratch, a root holding only those entries) to put into the
// running root in place. touched (nil: anything) bounds what changed.
type change struct {
	next    ygot.ValidatedGoStruct
	scratch ygot.GoStruct
	touched *touched
	// fast, for a change made by the fast path (fastset.go), knows what
	// it wrote: the change notification comes from it, not from a diff.
	fast *fastChange
}

// install makes the change to root and returns the running root: next, or
// root with the touched entries replaced (or deleted) in place.
func (c *change) install(root ygot.ValidatedGoStruct) ygot.ValidatedGoStruct {
	if c.next != nil {
		return c.next
	}
	live, scratch := reflect.ValueOf(root).Elem(), reflect.ValueOf(c.scratch).Elem()
	for field, keys := range c.touched.entries {
		m := live.Field(field)
		if m.IsNil() {
			m.Set(reflect.MakeMap(m.Type()))
		}
		for _, k := range keys {
			// A key the Set deleted is absent from scratch: the zero Value
			// deletes it here too.
			m.SetMapIndex(k, scratch.Field(field).MapIndex(k))
		}
	}
	return root
}

// applyOps applies ops in order to copies of what they touch in root and
// validates the result. On any error root is untouched and the error is a
// status naming the path. inPlace allows a change to be installed in place;
// fast (nil: none) is the fast path for Sets of scalar leaves in list
// entries, tried first.
func applyOps(schema *yang.Entry, newRoot func() ygot.ValidatedGoStruct, root ygot.ValidatedGoStruct, ops []setOp, inPlace bool, fast *fastSet) (*change, error) {
	if refs, ok := entryRefs(root, ops); ok && inPlace {
		if ch, ok := fast.apply(root, ops, refs); ok {
			return ch, nil
		}
		return applyEntryOps(schema, newRoot, root, ops, refs)
	}
	work, t, err := copyForOps(root, ops)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "copying the configuration: %v", err)
	}
	if work, err = runOps(schema, newRoot, work, ops); err != nil {
		return nil, err
	}
	return &change{next: work, touched: t}, nil
}

// runOps applies ops in order to work (which it may replace, for the root)
// and validates what they wrote.
func runOps(schema *yang.Entry, newRoot func() ygot.ValidatedGoStruct, work ygot.ValidatedGoStruct, ops []setOp) (ygot.ValidatedGoStruct, error) {
	work, err := writeOps(schema, newRoot, work, ops)
	if err != nil {
		return nil, err
	}
	if err := validateChanged(schema, work, ops); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "the resulting configuration fails schema validation: %s", errMsg(err))
	}
	return work, nil
}

// writeOps applies ops in order to work (which it may replace, for the
// root), without validating the result.
func writeOps(schema *yang.Entry, newRoot func() ygot.ValidatedGoStruct, work ygot.ValidatedGoStruct, ops []setOp) (ygot.ValidatedGoStruct, error) {
	for _, o := range ops {
		if hasElem(o.full, "state") {
			return nil, pathError(codes.InvalidArgument, o.full, "%s of a read-only (state) path", opName(o.op))
		}
		isRoot := len(o.full.GetElem()) == 0
		if o.clear {
			if isRoot {
				work = newRoot()
			} else if err := deleteMatching(schema, work, o.full); err != nil {
				return nil, pathError(schemaCode(err), o.full, "%s: %s", opName(o.op), errMsg(err))
			}
		}
		if !o.write {
			continue
		}
		val, err := normalizeValue(o.val)
		if err != nil {
			return nil, pathError(codes.InvalidArgument, o.full, "%s: %v", opName(o.op), err)
		}
		if isRoot && val.GetJsonIetfVal() == nil {
			return nil, pathError(codes.InvalidArgument, o.full, "%s of the root needs a JSON_IETF value", opName(o.op))
		}
		if err := setNode(schema, work, o.full, val); err != nil {
			return nil, pathError(schemaCode(err), o.full, "%s: %s", opName(o.op), errMsg(err))
		}
	}
	return work, nil
}

// entryRef names one entry of a top-level single-key list: the root
// struct's field and the map key.
type entryRef struct {
	field int
	key   reflect.Value
}

// entryRefs returns, for each op, the top-level list entry its path goes
// through, if every op's does (and no other top-level field matches it).
func entryRefs(root ygot.ValidatedGoStruct, ops []setOp) ([]entryRef, bool) {
	fields := rootFieldsOf(reflect.ValueOf(root).Elem().Type())
	refs := make([]entryRef, len(ops))
	for n, o := range ops {
		elems := o.full.GetElem()
		found := false
		for _, f := range fields {
			parts, matches := f.matches(elems)
			if !matches {
				continue
			}
			if found || f.typ.Kind() != reflect.Map || len(elems) < len(parts) {
				return nil, false
			}
			key, ok := scalarMapKey(f.typ.Key(), elems[len(parts)-1].GetKey())
			if !ok {
				return nil, false
			}
			refs[n], found = entryRef{field: f.index, key: key}, true
		}
		if !found {
			return nil, false
		}
	}
	return refs, true
}

// rootField is a data field of the root struct with its path tag split
// into alternatives and elements.
type rootField struct {
	index int
	typ   reflect.Type
	alts  [][]string
}

// matches reports whether the field's path tag and elems agree on their
// common leading element names; parts is the matching alternative split
// into elements.
func (f *rootField) matches(elems []*gpb.PathElem) ([]string, bool) {
	for _, parts := range f.alts {
		if leadingNamesAgree(parts, elems) {
			return parts, true
		}
	}
	return nil, false
}

// reachedBy reports whether one of paths (full paths; none: any) may
// reach data in the field: the root, or a path through the field, its
// elements named or wildcards (* or ...).
func (f *rootField) reachedBy(paths []*gpb.Path) bool {
	if len(paths) == 0 {
		return true
	}
	for _, p := range paths {
		for _, alt := range f.alts {
			if subReaches(p.GetElem(), alt, nil, true) {
				return true
			}
		}
	}
	return false
}

// rootFieldsCache holds rootFieldsOf's answer per root type.
var rootFieldsCache sync.Map // reflect.Type → []rootField

// rootFieldsOf returns the data fields (with a path tag, no annotations)
// of root struct type rt, in declaration order.
func rootFieldsOf(rt reflect.Type) []rootField {
	if v, ok := rootFieldsCache.Load(rt); ok {
		return v.([]rootField)
	}
	var out []rootField
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		tag, ok := f.Tag.Lookup("path")
		if !ok || f.Tag.Get("ygotAnnotation") != "" {
			continue
		}
		rf := rootField{index: i, typ: f.Type}
		for _, alt := range strings.Split(tag, "|") {
			rf.alts = append(rf.alts, strings.Split(alt, "/"))
		}
		out = append(out, rf)
	}
	rootFieldsCache.Store(rt, out)
	return out
}

// applyEntryOps is applyOps for ops that all go through entries of
// top-level lists (refs): they run against copies of only those entries,
// each op and each entry's validation on a root holding just its entry
// (ygot looks list entries up by scanning the map), so the Set costs what
// it touches, not the size of the lists.
func applyEntryOps(schema *yang.Entry, newRoot func() ygot.ValidatedGoStruct, root ygot.ValidatedGoStruct, ops []setOp, refs []entryRef) (*change, error) {
	src := reflect.ValueOf(root).Elem()
	scratchPtr := reflect.New(src.Type())
	scratch := scratchPtr.Elem()
	t := &touched{whole: map[int]bool{}, entries: map[int][]reflect.Value{}}
	seen := map[int]map[any]bool{}
	for _, r := range refs {
		if seen[r.field] == nil {
			seen[r.field] = map[any]bool{}
			scratch.Field(r.field).Set(reflect.MakeMap(src.Field(r.field).Type()))
		}
		if seen[r.field][r.key.Interface()] {
			continue
		}
		seen[r.field][r.key.Interface()] = true
		t.entries[r.field] = append(t.entries[r.field], r.key)
		if e := src.Field(r.field).MapIndex(r.key); e.IsValid() {
			cp, err := ygot.DeepCopy(e.Interface().(ygot.GoStruct))
			if err != nil {
				return nil, status.Errorf(codes.Internal, "copying the configuration: %v", err)
			}
			scratch.Field(r.field).SetMapIndex(r.key, reflect.ValueOf(cp))
		}
	}
	// alone is a root holding only entry r of scratch; back puts what it
	// holds for r into scratch.
	alone := func(r entryRef) ygot.ValidatedGoStruct {
		v := reflect.New(src.Type())
		m := reflect.MakeMap(src.Field(r.field).Type())
		if e := scratch.Field(r.field).MapIndex(r.key); e.IsValid() {
			m.SetMapIndex(r.key, e)
		}
		v.Elem().Field(r.field).Set(m)
		return v.Interface().(ygot.ValidatedGoStruct)
	}
	back := func(r entryRef, v ygot.ValidatedGoStruct) {
		scratch.Field(r.field).SetMapIndex(r.key, reflect.ValueOf(v).Elem().Field(r.field).MapIndex(r.key))
	}
	type entryID struct {
		field int
		key   any
	}
	var order []entryRef // each touched entry once, in op order
	byEntry := map[entryID][]setOp{}
	for n, o := range ops {
		r := refs[n]
		v, err := writeOps(schema, newRoot, alone(r), []setOp{o})
		if err != nil {
			return nil, err
		}
		back(r, v)
		id := entryID{r.field, r.key.Interface()}
		if _, ok := byEntry[id]; !ok {
			order = append(order, r)
		}
		byEntry[id] = append(byEntry[id], o)
	}
	for _, r := range order {
		if err := validateChanged(schema, alone(r), byEntry[entryID{r.field, r.key.Interface()}]); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "the resulting configuration fails schema validation: %s", errMsg(err))
		}
	}
	return &change{scratch: scratchPtr.Interface().(ygot.GoStruct), touched: t}, nil
}

// validateChanged validates what ops wrote: for a path through a list entry,
// the outermost such entry (its subtree and its key), otherwise every
// top-level subtree. This keeps a Set's cost independent of the size of the
// rest of the configuration.
func validateChanged(schema *yang.Entry, root ygot.GoStruct, ops []setOp) error {
	whole := false
	for _, o := range ops {
		if !o.write {
			continue
		}
		idx := -1
		for i, e := range o.full.GetElem() {
			if len(e.GetKey()) > 0 {
				idx = i
				break
			}
		}
		if idx < 0 {
			whole = true
			continue
		}
		entry := &gpb.Path{Elem: o.full.GetElem()[:idx+1]}
		nodes, err := ytypes.GetNode(schema, root, entry)
		if err != nil {
			return fmt.Errorf("%s: %s", pathString(entry), errMsg(err))
		}
		if len(present(nodes)) == 0 {
			// A later operation of the Set removed the entry (a replace
			// or delete above it): nothing of it is left to validate.
			continue
		}
		for _, n := range present(nodes) {
			if errs := ytypes.Validate(n.Schema, n.Data); errs != nil {
				return fmt.Errorf("%s: %w", pathString(entry), errs)
			}
		}
		if err := checkEntryKeys(schema, root, entry); err != nil {
			return err
		}
	}
	if whole {
		return validateTree(schema, root)
	}
	return nil
}

// checkEntryKeys checks that the key leaves of the list entry at entry hold
// the key values of its path.
func checkEntryKeys(schema *yang.Entry, root ygot.GoStruct, entry *gpb.Path) error {
	last := entry.GetElem()[len(entry.GetElem())-1]
	for k, want := range last.GetKey() {
		keyPath := &gpb.Path{Elem: append(append([]*gpb.PathElem{}, entry.GetElem()...), &gpb.PathElem{Name: k})}
		nodes, err := ytypes.GetNode(schema, root, keyPath)
		if err != nil {
			return fmt.Errorf("%s: %s", pathString(keyPath), errMsg(err))
		}
		nodes = present(nodes)
		if len(nodes) != 1 {
			return fmt.Errorf("%s: key leaf is missing", pathString(keyPath))
		}
		v := reflect.ValueOf(nodes[0].Data)
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		got, err := ygot.KeyValueAsString(v.Interface())
		if err != nil {
			return fmt.Errorf("%s: %w", pathString(keyPath), err)
		}
		if got != want {
			return fmt.Errorf("%s: key leaf holds %q but the list key is %q", pathString(keyPath), got, want)
		}
	}
	return nil
}

// validateTree validates each top-level subtree of root against the schema:
// types, ranges, patterns, list keys, mandatory leaves. It leaves out
// leafref integrity: ygot checks leafrefs only when validating from the
// root, by walking the whole schema, which costs over 100 ms per Set.
func validateTree(schema *yang.Entry, root ygot.GoStruct) error {
	v := reflect.ValueOf(root).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if _, ok := f.Tag.Lookup("path"); !ok || f.Tag.Get("ygotAnnotation") != "" {
			continue
		}
		fv := v.Field(i).Interface()
		if util.IsValueNil(fv) {
			continue
		}
		cs, err := util.ChildSchema(schema, f)
		if err != nil {
			return err
		}
		if cs == nil {
			return fmt.Errorf("no schema for field %s", f.Name)
		}
		if errs := ytypes.Validate(cs, fv); errs != nil {
			return errs
		}
	}
	return nil
}

// copyForOps returns a copy of root that ops can modify without touching
// root: the root struct is copied shallowly and only the subtrees the ops
// reach are deep-copied. For a path through an entry of a top-level list,
// that is the list's map (shallowly) and the one entry, so a Set costs the
// same whatever the size of the rest of the configuration. A path at the
// root falls back to a full deep copy.
func copyForOps(root ygot.ValidatedGoStruct, ops []setOp) (ygot.ValidatedGoStruct, *touched, error) {
	for _, o := range ops {
		if len(o.full.GetElem()) == 0 {
			cp, err := ygot.DeepCopy(root)
			if err != nil {
				return nil, nil, err
			}
			return cp.(ygot.ValidatedGoStruct), nil, nil
		}
	}
	t := &touched{whole: map[int]bool{}, entries: map[int][]reflect.Value{}}
	src := reflect.ValueOf(root).Elem()
	dstPtr := reflect.New(src.Type())
	dst := dstPtr.Elem()
	dst.Set(src)

	deep := map[int]bool{}      // fields copied whole
	mapCopied := map[int]bool{} // list fields whose map was copied shallowly
	entryCopied := map[int]map[any]bool{}
	fields := rootFieldsOf(dst.Type())
	for _, o := range ops {
		elems := o.full.GetElem()
		for _, f := range fields {
			i := f.index
			if deep[i] {
				continue
			}
			parts, matches := f.matches(elems)
			if !matches {
				continue
			}
			fv := dst.Field(i)
			if fv.IsNil() {
				t.whole[i] = true // SetNode creates it in the copy
				continue
			}
			listEntry := fv.Kind() == reflect.Map && len(elems) >= len(parts) && len(elems[len(parts)-1].GetKey()) > 0
			if !listEntry {
				cp, err := deepCopyValue(fv)
				if err != nil {
					return nil, nil, err
				}
				fv.Set(cp)
				deep[i] = true
				t.whole[i] = true
				continue
			}
			if !mapCopied[i] {
				m := reflect.MakeMapWithSize(fv.Type(), fv.Len())
				iter := fv.MapRange()
				for iter.Next() {
					m.SetMapIndex(iter.Key(), iter.Value())
				}
				fv.Set(m)
				mapCopied[i] = true
				entryCopied[i] = map[any]bool{}
			}
			keys := elems[len(parts)-1].GetKey()
			if k, ok := scalarMapKey(fv.Type().Key(), keys); ok {
				if entryCopied[i][k.Interface()] {
					continue
				}
				if e := fv.MapIndex(k); e.IsValid() {
					cp, err := ygot.DeepCopy(e.Interface().(ygot.GoStruct))
					if err != nil {
						return nil, nil, err
					}
					fv.SetMapIndex(k, reflect.ValueOf(cp))
				}
				entryCopied[i][k.Interface()] = true
				t.entries[i] = append(t.entries[i], k)
				continue
			}
			t.whole[i] = true // new entries of multi-key lists are not tracked
			// Multi-key list: find the entry by its key leaves' string forms.
			iter := fv.MapRange()
			for iter.Next() {
				if entryCopied[i][iter.Key().Interface()] || !entryMatches(iter.Value(), elems[len(parts)-1].GetKey()) {
					continue
				}
				cp, err := ygot.DeepCopy(iter.Value().Interface().(ygot.GoStruct))
				if err != nil {
					return nil, nil, err
				}
				fv.SetMapIndex(iter.Key(), reflect.ValueOf(cp))
				entryCopied[i][iter.Key().Interface()] = true
			}
		}
	}
	return dstPtr.Interface().(ygot.ValidatedGoStruct), t, nil
}

// touched records which parts of the root a Set may have changed: whole
// top-level fields, and single entries of top-level lists. nil means
// anything.
type touched struct {
	whole   map[int]bool
	entries map[int][]reflect.Value
}

// restrict returns a root holding only the touched parts of root, so a
// diff between two restricted roots costs what the Set touched.
func (t *touched) restrict(root ygot.GoStruct) ygot.GoStruct {
	if t == nil {
		return root
	}
	src := reflect.ValueOf(root).Elem()
	dstPtr := reflect.New(src.Type())
	dst := dstPtr.Elem()
	for i := range t.whole {
		dst.Field(i).Set(src.Field(i))
	}
	for i, keys := range t.entries {
		if t.whole[i] || src.Field(i).IsNil() {
			continue
		}
		m := reflect.MakeMap(src.Field(i).Type())
		for _, k := range keys {
			if v := src.Field(i).MapIndex(k); v.IsValid() {
				m.SetMapIndex(k, v)
			}
		}
		dst.Field(i).Set(m)
	}
	return dstPtr.Interface().(ygot.GoStruct)
}

// leadingNamesAgree reports whether parts and elems have the same element
// names as far as the shorter of them goes.
func leadingNamesAgree(parts []string, elems []*gpb.PathElem) bool {
	for j := range min(len(parts), len(elems)) {
		if parts[j] != elems[j].GetName() {
			return false
		}
	}
	return true
}

// scalarMapKey converts the single key value of a path element to the map
// key type of a single-key list (string or integer keys).
func scalarMapKey(t reflect.Type, keys map[string]string) (reflect.Value, bool) {
	if len(keys) != 1 {
		return reflect.Value{}, false
	}
	var v string
	for _, x := range keys {
		v = x
	}
	if v == "*" {
		return reflect.Value{}, false
	}
	k := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		k.SetString(v)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(v, 10, t.Bits())
		if err != nil {
			return reflect.Value{}, false
		}
		k.SetUint(n)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(v, 10, t.Bits())
		if err != nil {
			return reflect.Value{}, false
		}
		k.SetInt(n)
	default:
		return reflect.Value{}, false
	}
	return k, true
}

// entryMatches reports whether a list entry's key fields hold keys (as
// strings); a wildcard or unreadable key matches, which only copies more.
func entryMatches(entry reflect.Value, keys map[string]string) bool {
	gs, ok := entry.Interface().(ygot.GoStruct)
	if !ok {
		return true
	}
	have, err := ygot.PathKeyFromStruct(reflect.ValueOf(gs))
	if err != nil {
		return true
	}
	for k, v := range keys {
		if hv, ok := have[k]; ok && v != "*" && hv != v {
			return false
		}
	}
	return true
}

// deepCopyValue deep-copies a struct pointer or a map of struct pointers.
func deepCopyValue(v reflect.Value) (reflect.Value, error) {
	switch v.Kind() {
	case reflect.Pointer:
		if gs, ok := v.Interface().(ygot.GoStruct); ok {
			cp, err := ygot.DeepCopy(gs)
			if err != nil {
				return reflect.Value{}, err
			}
			return reflect.ValueOf(cp), nil
		}
		cp := reflect.New(v.Elem().Type())
		cp.Elem().Set(v.Elem())
		return cp, nil
	case reflect.Map:
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		iter := v.MapRange()
		for iter.Next() {
			e, err := deepCopyValue(iter.Value())
			if err != nil {
				return reflect.Value{}, err
			}
			m.SetMapIndex(iter.Key(), e)
		}
		return m, nil
	}
	return v, nil // scalars and enums are copied by value
}

func opName(op gpb.UpdateResult_Operation) string { return strings.ToLower(op.String()) }

// leaf is one value of the tree at its full path.
type leaf struct {
	path *gpb.Path
	val  *gpb.TypedValue
}

// leavesOf flattens root (or a subtree at prefix) into scalar leaves with
// full paths.
func leavesOf(s ygot.GoStruct, prefix *gpb.Path, ts int64) ([]leaf, error) {
	ns, err := ygot.TogNMINotifications(s, ts, ygot.GNMINotificationsConfig{UsePathElem: true, PathElemPrefix: prefix.GetElem()})
	if err != nil {
		return nil, err
	}
	var out []leaf
	for _, n := range ns {
		for _, u := range n.GetUpdate() {
			elems := make([]*gpb.PathElem, 0, len(n.GetPrefix().GetElem())+len(u.GetPath().GetElem()))
			elems = append(elems, n.GetPrefix().GetElem()...)
			elems = append(elems, u.GetPath().GetElem()...)
			out = append(out, leaf{path: &gpb.Path{Elem: elems}, val: u.GetVal()})
		}
	}
	return out, nil
}

// resolveGet renders the data at full as updates (paths relative to the
// request prefix, which has prefixLen elements).
//
// Three kinds of path resolve: nodes of the compressed structs (leaves,
// list entries, containers that have a struct); state paths of leaves that
// the schema only has under config (config mirrored into state, as a real
// device reports it); and containers compressed away by the schema
// (/interfaces, …/config), served from their nearest ancestor.
func resolveGet(schema *yang.Entry, root ygot.GoStruct, full *gpb.Path, prefixLen int, enc gpb.Encoding, dt gpb.GetRequest_DataType) ([]*gpb.Update, error) {
	rel := func(p *gpb.Path) *gpb.Path { return &gpb.Path{Elem: p.GetElem()[prefixLen:]} }
	nodes, err := ytypes.GetNode(schema, root, full, &ytypes.GetHandleWildcards{})
	if err != nil && schemaCode(err) == codes.NotFound {
		if alt := configPathForState(full); alt != nil {
			if altNodes, altErr := ytypes.GetNode(schema, root, alt, &ytypes.GetHandleWildcards{}); altErr == nil && len(present(altNodes)) == 1 && !isStruct(altNodes[0].Data) {
				return encodeNode(altNodes[0].Data, rel(full), full, enc, dt)
			}
		}
		if ups, ok, cerr := getCompressed(schema, root, full, prefixLen, enc, dt); ok || cerr != nil {
			return ups, cerr
		}
	}
	if err != nil {
		if strings.Contains(err.Error(), "no match found") {
			return nil, pathError(codes.NotFound, full, "not in the device's schema (%s)", errMsg(err))
		}
		if schemaCode(err) == codes.NotFound {
			return nil, pathError(codes.NotFound, full, "no data at this path")
		}
		return nil, pathError(codes.InvalidArgument, full, "%s", errMsg(err))
	}
	found := present(nodes)
	if len(found) == 0 {
		return nil, pathError(codes.NotFound, full, "no data at this path")
	}
	// A wildcard's matches come in map order: answer in path order, the
	// same for every Get.
	slices.SortStableFunc(found, func(a, b *ytypes.TreeNode) int {
		return strings.Compare(pathString(a.Path), pathString(b.Path))
	})
	var out []*gpb.Update
	for _, n := range found {
		nodeFull := full
		if n.Path != nil && len(n.Path.GetElem()) == len(full.GetElem()) {
			nodeFull = n.Path // concrete keys for a wildcard request
		}
		ups, err := encodeNode(n.Data, rel(nodeFull), nodeFull, enc, dt)
		if err != nil {
			return nil, err
		}
		out = append(out, ups...)
	}
	return out, nil
}

func present(nodes []*ytypes.TreeNode) []*ytypes.TreeNode {
	var out []*ytypes.TreeNode
	for _, n := range nodes {
		if n.Data != nil && !reflectNil(n.Data) {
			out = append(out, n)
		}
	}
	return out
}

func isStruct(v any) bool {
	_, ok := v.(ygot.GoStruct)
	return ok
}

// compressedSplit yields, nearest first, each ancestor of full together with
// the key-less trailing elements below it, which a compressed schema may
// have folded into its struct tags.
func compressedSplit(full *gpb.Path, yield func(anc *gpb.Path, rest []*gpb.PathElem) bool) {
	elems := full.GetElem()
	for k := 1; k <= len(elems); k++ {
		if len(elems[len(elems)-k].GetKey()) > 0 {
			return
		}
		if !yield(&gpb.Path{Elem: elems[:len(elems)-k]}, elems[len(elems)-k:]) {
			return
		}
	}
}

// getCompressed serves a Get of a container the schema compressed away.
// ok is false when no ancestor resolves.
func getCompressed(schema *yang.Entry, root ygot.GoStruct, full *gpb.Path, prefixLen int, enc gpb.Encoding, dt gpb.GetRequest_DataType) (ups []*gpb.Update, ok bool, err error) {
	compressedSplit(full, func(anc *gpb.Path, rest []*gpb.PathElem) bool {
		var nodes []*ytypes.TreeNode
		if len(anc.GetElem()) == 0 {
			nodes = []*ytypes.TreeNode{{Data: root}}
		} else {
			var gerr error
			nodes, gerr = ytypes.GetNode(schema, root, anc)
			if gerr != nil {
				return schemaCode(gerr) == codes.NotFound // try the next ancestor
			}
		}
		ok = true
		nodes = present(nodes)
		if len(nodes) != 1 || !isStruct(nodes[0].Data) {
			err = pathError(codes.NotFound, full, "no data at this path")
			return false
		}
		ups, err = encodeBelow(nodes[0].Data.(ygot.GoStruct), anc, rest, full, prefixLen, enc, dt)
		return false
	})
	return ups, ok, err
}

// encodeBelow renders the part of s (at anc) below the elements rest.
func encodeBelow(s ygot.GoStruct, anc *gpb.Path, rest []*gpb.PathElem, full *gpb.Path, prefixLen int, enc gpb.Encoding, dt gpb.GetRequest_DataType) ([]*gpb.Update, error) {
	rel := &gpb.Path{Elem: full.GetElem()[prefixLen:]}
	if dt == gpb.GetRequest_ALL && hasElem(&gpb.Path{Elem: rest}, "state") {
		dt = gpb.GetRequest_STATE // a state container shows config mirrored into it
	}
	if enc == gpb.Encoding_PROTO {
		leaves, err := leavesOf(s, anc, 0)
		if err != nil {
			return nil, pathError(codes.Internal, full, "encoding subtree: %v", err)
		}
		var out []*gpb.Update
		for _, l := range leaves {
			p, ok := leafPathFor(l.path, dt)
			if !ok || !pathMatches(full, p) {
				continue
			}
			out = append(out, &gpb.Update{Path: &gpb.Path{Elem: p.GetElem()[prefixLen:]}, Val: l.val})
		}
		if len(out) == 0 {
			return nil, pathError(codes.NotFound, full, "no %v data at this path", dt)
		}
		return out, nil
	}
	m, err := structJSON(s, enc)
	if err != nil {
		return nil, pathError(codes.Internal, full, "encoding subtree: %v", err)
	}
	var v any = filterJSON(m, dt)
	for _, e := range rest {
		obj, isObj := v.(map[string]any)
		if !isObj {
			return nil, pathError(codes.NotFound, full, "no %v data at this path", dt)
		}
		v = nil
		for k, child := range obj {
			if localName(k) == e.GetName() {
				v = child
				break
			}
		}
		if v == nil {
			return nil, pathError(codes.NotFound, full, "no %v data at this path", dt)
		}
	}
	tv, err := jsonTypedValue(v, enc)
	if err != nil {
		return nil, pathError(codes.Internal, full, "encoding subtree: %v", err)
	}
	return []*gpb.Update{{Path: rel, Val: tv}}, nil
}

func structJSON(s ygot.GoStruct, enc gpb.Encoding) (map[string]any, error) {
	if enc == gpb.Encoding_JSON_IETF {
		return ygot.ConstructIETFJSON(s, &ygot.RFC7951JSONConfig{AppendModuleName: true})
	}
	return ygot.ConstructInternalJSON(s)
}

func jsonTypedValue(v any, enc gpb.Encoding) (*gpb.TypedValue, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if enc == gpb.Encoding_JSON {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: b}}, nil
	}
	return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}, nil
}

// leafPathFor is where a leaf appears for data type dt: STATE and
// OPERATIONAL report config leaves under state (mirrored); CONFIG has no
// state leaves (ok false).
func leafPathFor(p *gpb.Path, dt gpb.GetRequest_DataType) (*gpb.Path, bool) {
	if (dt == gpb.GetRequest_STATE || dt == gpb.GetRequest_OPERATIONAL) && hasElem(p, "config") {
		return statePathForConfig(p), true
	}
	return p, dataTypeWants(p, dt)
}

// setNode is ytypes.SetNode that also accepts JSON values at containers the
// compressed schema folded away: the value is wrapped in those containers
// and set at the nearest ancestor that has a struct.
func setNode(schema *yang.Entry, root ygot.GoStruct, full *gpb.Path, val *gpb.TypedValue) error {
	err := ytypes.SetNode(schema, root, full, val, &ytypes.InitMissingElements{})
	if err == nil || schemaCode(err) != codes.NotFound || val.GetJsonIetfVal() == nil {
		return err
	}
	var inner any
	if jerr := json.Unmarshal(val.GetJsonIetfVal(), &inner); jerr != nil {
		return status.Errorf(codes.InvalidArgument, "value is not valid JSON: %v", jerr)
	}
	if _, isObj := inner.(map[string]any); !isObj {
		return err
	}
	result := err
	compressedSplit(full, func(anc *gpb.Path, rest []*gpb.PathElem) bool {
		wrapped := inner
		for i := len(rest) - 1; i >= 0; i-- {
			wrapped = map[string]any{rest[i].GetName(): wrapped}
		}
		b, jerr := json.Marshal(wrapped)
		if jerr != nil {
			result = jerr
			return false
		}
		tv := &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}
		aerr := ytypes.SetNode(schema, root, anc, tv, &ytypes.InitMissingElements{})
		if aerr != nil && schemaCode(aerr) == codes.NotFound && len(anc.GetElem()) > 0 {
			return true
		}
		result = aerr
		return false
	})
	return result
}

// wildcards reports whether p has wildcard element names ("*", "...")
// and wildcard key values ("*").
func wildcards(p *gpb.Path) (names, keys bool) {
	for _, e := range p.GetElem() {
		if e.GetName() == "*" || e.GetName() == "..." {
			names = true
		}
		for _, v := range e.GetKey() {
			if v == "*" {
				keys = true
			}
		}
	}
	return names, keys
}

// deleteMatching is deleteNode of full, whose key values may be wildcards
// (gNMI 3.4.6: a delete expands them): every existing node full matches is
// deleted; none is fine.
func deleteMatching(schema *yang.Entry, root ygot.GoStruct, full *gpb.Path) error {
	if _, keys := wildcards(full); !keys {
		return deleteNode(schema, root, full)
	}
	nodes, err := ytypes.GetNode(schema, root, full, &ytypes.GetHandleWildcards{})
	if err != nil {
		if schemaCode(err) == codes.NotFound && !strings.Contains(err.Error(), "no match found") {
			return nil // nothing matches: deleting what is not there succeeds
		}
		return err
	}
	for _, n := range present(nodes) {
		if err := deleteNode(schema, root, n.Path); err != nil {
			return err
		}
	}
	return nil
}

// deleteNode is ytypes.DeleteNode that also deletes containers the
// compressed schema folded away, by clearing the fields of the nearest
// ancestor struct whose paths lie below them (list keys excepted).
func deleteNode(schema *yang.Entry, root ygot.GoStruct, full *gpb.Path) error {
	err := ytypes.DeleteNode(schema, root, full)
	if err == nil || schemaCode(err) != codes.NotFound {
		return err
	}
	result := err
	compressedSplit(full, func(anc *gpb.Path, rest []*gpb.PathElem) bool {
		var target any = root
		if len(anc.GetElem()) > 0 {
			nodes, gerr := ytypes.GetNode(schema, root, anc)
			if gerr != nil {
				return schemaCode(gerr) == codes.NotFound
			}
			nodes = present(nodes)
			if len(nodes) == 0 {
				result = nil // nothing there: deleting a missing path succeeds
				return false
			}
			target = nodes[0].Data
		}
		if clearFieldsBelow(target, rest) {
			result = nil
		}
		return false
	})
	return result
}

// clearFieldsBelow zeroes the fields of the struct s points to whose every
// path alternative starts with rest, and reports whether rest named any.
func clearFieldsBelow(s any, rest []*gpb.PathElem) bool {
	rv := reflect.ValueOf(s)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return false
	}
	sv := rv.Elem()
	found := false
	for i := 0; i < sv.NumField(); i++ {
		tag, ok := sv.Type().Field(i).Tag.Lookup("path")
		if !ok {
			continue
		}
		all, any := true, false
		for _, alt := range strings.Split(tag, "|") {
			parts := strings.Split(alt, "/")
			if len(parts) <= len(rest) {
				all = false
				continue
			}
			match := true
			for j, e := range rest {
				if parts[j] != e.GetName() {
					match = false
					break
				}
			}
			all = all && match
			any = any || match
		}
		if any {
			found = true
		}
		if all {
			sv.Field(i).Set(reflect.Zero(sv.Field(i).Type()))
		}
	}
	return found
}

// configPathForState returns p with its last "state" element replaced by
// "config", or nil if p has none.
func configPathForState(p *gpb.Path) *gpb.Path {
	for i := len(p.GetElem()) - 1; i >= 0; i-- {
		if p.GetElem()[i].GetName() == "state" {
			alt := proto.Clone(p).(*gpb.Path)
			alt.Elem[i].Name = "config"
			return alt
		}
	}
	return nil
}

// encodeNode renders one resolved node as updates in the requested encoding,
// filtered by data type. path is the update path to report (relative to the
// request prefix); full is the node's absolute path.
func encodeNode(data any, path, full *gpb.Path, enc gpb.Encoding, dt gpb.GetRequest_DataType) ([]*gpb.Update, error) {
	gs, isStruct := data.(ygot.GoStruct)
	if !isStruct {
		if !dataTypeWants(full, dt) {
			return nil, nil
		}
		var tv *gpb.TypedValue
		var err error
		switch enc {
		case gpb.Encoding_PROTO:
			tv, err = ygot.EncodeTypedValue(data, gpb.Encoding_PROTO)
		case gpb.Encoding_JSON_IETF:
			var b []byte
			b, err = ygot.Marshal7951(data, &ygot.RFC7951JSONConfig{AppendModuleName: true})
			tv = &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}
		default: // JSON
			var b []byte
			b, err = ygot.Marshal7951(data)
			tv = &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: b}}
		}
		if err != nil {
			return nil, pathError(codes.Internal, full, "encoding value: %v", err)
		}
		return []*gpb.Update{{Path: path, Val: tv}}, nil
	}

	return encodeBelow(gs, full, nil, full, len(full.GetElem())-len(path.GetElem()), enc, dt)
}

// dataTypeWants reports whether a leaf at p belongs to data type dt.
func dataTypeWants(p *gpb.Path, dt gpb.GetRequest_DataType) bool {
	switch dt {
	case gpb.GetRequest_CONFIG:
		return !hasElem(p, "state")
	case gpb.GetRequest_STATE, gpb.GetRequest_OPERATIONAL:
		return hasElem(p, "state") || !hasElem(p, "config")
	}
	return true
}

// statePathForConfig returns p with its last "config" element replaced by
// "state": config leaves are mirrored into state.
func statePathForConfig(p *gpb.Path) *gpb.Path {
	for i := len(p.GetElem()) - 1; i >= 0; i-- {
		if p.GetElem()[i].GetName() == "config" {
			alt := proto.Clone(p).(*gpb.Path)
			alt.Elem[i].Name = "state"
			return alt
		}
	}
	return p
}

func localName(k string) string {
	if i := strings.IndexByte(k, ':'); i >= 0 {
		return k[i+1:]
	}
	return k
}

// filterJSON keeps the parts of a JSON tree that belong to data type dt:
// CONFIG drops "state" containers; STATE and OPERATIONAL mirror each
// "config" container into its sibling "state" (state values win) and drop
// "config"; ALL keeps everything.
func filterJSON(v map[string]any, dt gpb.GetRequest_DataType) map[string]any {
	if dt == gpb.GetRequest_ALL {
		return v
	}
	out := make(map[string]any, len(v))
	var cfgKey, stateKey string
	for k, child := range v {
		switch localName(k) {
		case "state":
			stateKey = k
			if dt == gpb.GetRequest_CONFIG {
				continue
			}
		case "config":
			cfgKey = k
			if dt != gpb.GetRequest_CONFIG {
				continue
			}
		}
		out[k] = filterJSONValue(child, dt)
	}
	if dt != gpb.GetRequest_CONFIG && cfgKey != "" {
		if stateKey == "" {
			stateKey = cfgKey[:len(cfgKey)-len("config")] + "state" // keeps a module prefix
		}
		merged := map[string]any{}
		if c, ok := v[cfgKey].(map[string]any); ok {
			for k, x := range c {
				merged[k] = x
			}
		}
		if s, ok := out[stateKey].(map[string]any); ok {
			for k, x := range s {
				merged[k] = x
			}
		}
		out[stateKey] = merged
	}
	return out
}

func filterJSONValue(v any, dt gpb.GetRequest_DataType) any {
	switch x := v.(type) {
	case map[string]any:
		return filterJSON(x, dt)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = filterJSONValue(e, dt)
		}
		return out
	}
	return v
}
