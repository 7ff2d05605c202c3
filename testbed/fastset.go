package testbed

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ygot/util"
	"github.com/openconfig/ygot/ygot"
	"github.com/openconfig/ygot/ytypes"
)

// This file is the device's fast path for the most common Set: scalar
// values written to leaves of entries of top-level single-key lists (what
// a re-push, a preload or a one-leaf Set sends). ytypes' SetNode, GetNode
// and Validate find a struct field by computing the schema of every field
// before it (for annotation fields that means walking every child of the
// schema node), on every call: about 0.6 ms per new list entry, which made
// a Set of 100,000 new leaves take a minute and a half. Here the route
// from a list entry's struct to a leaf field is resolved once per
// (struct type, path) with the same rules and cached, the value is
// converted and checked against the leaf's YANG type, and only what the
// Set wrote is validated (the leaves, and the key of each new entry),
// with ytypes.Validate and the schema ytypes would use: ygot validates a
// struct field by field, with no constraints between fields, so that is
// the validation of the whole entry, whose other fields were valid before.
//
// The fast path never decides alone that a Set is wrong: any operation of
// another shape, any value that is not of the leaf's type, any failed
// check sends the whole Set down the general path (applyEntryOps,
// applyOps), which applies it with ytypes and answers with its error. It
// also builds the change notification itself (what ygot.Diff of the
// touched entries would give, per leaf, without flattening them).

// fastSet holds the resolved routes for one schema and root type.
type fastSet struct {
	schema   *yang.Entry
	rootType reflect.Type // the root struct (not a pointer)
	// lists are the root's single-key list fields, by field index.
	lists map[int]*listPlan
}

// listPlan is a top-level single-key list: its field in the root and how
// its entries are made and keyed.
type listPlan struct {
	field     int
	parts     []string    // the field's path (e.g. interfaces, interface)
	schema    *yang.Entry // the list's schema
	entryType reflect.Type
	keyName   string
	keyField  int
	keyPtr    bool // the key field is *K (else K, as for enumerated keys)
	keySchema *yang.Entry
	keyFree   bool       // any key value passes validation (see unrestricted)
	keyPaths  [][]string // the key field's paths in the entry
	// leaves caches, per relative path ("config/description"), the route
	// to a leaf (*leafPlan), or nil where the path is not one the fast
	// path takes.
	leaves sync.Map
}

// leafPlan is the route from a list entry to one scalar leaf field.
type leafPlan struct {
	fields []int          // field indexes from the entry struct down to the leaf
	types  []reflect.Type // the struct pointer types along the way (types[0] the entry's)
	schema *yang.Entry
	kind   yang.TypeKind
	typ    reflect.Type // the leaf field's Go type: *string, *bool, *uint16, ...
	paths  [][]string   // the leaf's paths relative to the entry (each alternative)
	key    bool         // the leaf is the entry's key field
	free   bool         // any value of the field's type passes validation (see unrestricted)
}

func newFastSet(schema *yang.Entry, root ygot.GoStruct) *fastSet {
	f := &fastSet{schema: schema, rootType: reflect.TypeOf(root).Elem(), lists: map[int]*listPlan{}}
	for i := 0; i < f.rootType.NumField(); i++ {
		if lp := newListPlan(schema, f.rootType.Field(i), i); lp != nil {
			f.lists[i] = lp
		}
	}
	return f
}

// newListPlan returns the plan of root field sf if it is a single-key list
// whose key field holds the map key's type, else nil.
func newListPlan(schema *yang.Entry, sf reflect.StructField, index int) *listPlan {
	tag, ok := sf.Tag.Lookup("path")
	if !ok || util.IsYgotAnnotation(sf) || strings.Contains(tag, "|") || sf.Type.Kind() != reflect.Map {
		return nil
	}
	et := sf.Type.Elem()
	if et.Kind() != reflect.Pointer || et.Elem().Kind() != reflect.Struct {
		return nil
	}
	ls, err := util.ChildSchema(schema, sf)
	if err != nil || ls == nil || !ls.IsList() || ls.Key == "" || strings.ContainsAny(ls.Key, " \t\n") {
		return nil
	}
	lp := &listPlan{field: index, parts: strings.Split(tag, "/"), schema: ls, entryType: et, keyName: ls.Key, keyField: -1}
	kt := sf.Type.Key()
	st := et.Elem()
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		if util.IsYgotAnnotation(f) {
			continue
		}
		paths, err := util.SchemaPaths(f)
		if err != nil {
			return nil
		}
		for _, p := range paths {
			if len(p) == 1 && p[0] == ls.Key {
				lp.keyField, lp.keyPaths = i, paths
			}
		}
		if lp.keyField == i {
			switch {
			case f.Type.Kind() == reflect.Pointer && f.Type.Elem() == kt:
				lp.keyPtr = true
			case f.Type == kt:
			default:
				return nil
			}
			ks, err := util.ChildSchema(ls, f)
			if err != nil || ks == nil {
				return nil
			}
			lp.keySchema, lp.keyFree = ks, unrestricted(ks, f.Type)
			break
		}
	}
	if lp.keyField < 0 {
		return nil
	}
	return lp
}

// leaf returns the route to the leaf at rel below an entry, nil if the
// fast path does not take it.
func (lp *listPlan) leaf(rel []*gpb.PathElem) *leafPlan {
	var sb strings.Builder
	for i, e := range rel {
		if i > 0 {
			sb.WriteByte('/')
		}
		sb.WriteString(e.GetName())
	}
	k := sb.String()
	if v, ok := lp.leaves.Load(k); ok {
		return v.(*leafPlan)
	}
	names := make([]string, len(rel))
	for i, e := range rel {
		names[i] = e.GetName()
	}
	p := lp.resolve(names)
	lp.leaves.Store(k, p)
	return p
}

// resolve finds the leaf at names below an entry as ytypes does: in each
// struct, the first field (in declaration order) one of whose paths is a
// prefix of what is left; it must be a scalar leaf of a type the fast path
// converts, reached through containers only.
func (lp *listPlan) resolve(names []string) *leafPlan {
	if len(names) == 0 {
		return nil
	}
	for _, n := range names {
		if n == "" || strings.HasPrefix(n, "@") || n == "state" {
			return nil
		}
	}
	plan := &leafPlan{}
	schema, st := lp.schema, lp.entryType
	var prefix []string // the path so far below the entry
	for len(names) > 0 {
		plan.types = append(plan.types, st)
		fi, match, ok := firstMatch(st.Elem(), names)
		if !ok {
			return nil
		}
		sf := st.Elem().Field(fi)
		cs, err := util.ChildSchema(schema, sf)
		if err != nil || cs == nil {
			return nil
		}
		plan.fields = append(plan.fields, fi)
		names = names[len(match):]
		if len(names) > 0 {
			// A container on the way.
			if sf.Type.Kind() != reflect.Pointer || sf.Type.Elem().Kind() != reflect.Struct || !cs.IsContainer() {
				return nil
			}
			if _, ok := reflect.New(sf.Type.Elem()).Interface().(ygot.GoStruct); !ok {
				return nil
			}
			paths, err := util.SchemaPaths(sf)
			if err != nil || len(paths) != 1 {
				return nil
			}
			prefix = append(prefix, paths[0]...)
			schema, st = cs, sf.Type
			continue
		}
		if !cs.IsLeaf() || cs.Type == nil {
			return nil
		}
		// A leafref has the type of the leaf it refers to (ytypes
		// resolves it so to read and validate a value).
		rs, err := util.ResolveIfLeafRef(cs)
		if err != nil || rs == nil || rs.Type == nil || !fastKind(rs.Type.Kind, sf.Type) {
			return nil
		}
		paths, err := util.SchemaPaths(sf)
		if err != nil {
			return nil
		}
		for _, p := range paths {
			plan.paths = append(plan.paths, append(append([]string{}, prefix...), p...))
		}
		plan.schema, plan.kind, plan.typ = cs, rs.Type.Kind, sf.Type
		plan.key = len(plan.fields) == 1 && plan.fields[0] == lp.keyField
		plan.free = unrestricted(cs, sf.Type)
	}
	return plan
}

// firstMatch returns the first non-annotation field of struct type st
// with a path that is a prefix of names (as ytypes' retrieveNodeContainer
// picks it), and that path.
func firstMatch(st reflect.Type, names []string) (int, []string, bool) {
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		if util.IsYgotAnnotation(f) {
			continue
		}
		paths, err := util.SchemaPaths(f)
		if err != nil {
			return 0, nil, false
		}
		for _, p := range paths {
			if len(p) == 0 || len(p) > len(names) {
				continue
			}
			match := true
			for j := range p {
				if p[j] != names[j] {
					match = false
					break
				}
			}
			if match {
				return i, p, true
			}
		}
	}
	return 0, nil, false
}

// unrestricted reports whether ytypes.Validate passes every value of
// field type t (a pointer) for leaf schema: a string without length or
// pattern restrictions, or a boolean (after resolving a leafref), whose
// schema ytypes accepts (checked once, with a zero value).
func unrestricted(schema *yang.Entry, t reflect.Type) bool {
	rs, err := util.ResolveIfLeafRef(schema)
	if err != nil || rs == nil || rs.Type == nil || t.Kind() != reflect.Pointer {
		return false
	}
	switch y := rs.Type; y.Kind {
	case yang.Ystring:
		if len(y.Length) > 0 || len(y.Pattern) > 0 || len(y.POSIXPattern) > 0 || t.Elem().Kind() != reflect.String {
			return false
		}
	case yang.Ybool:
		if t.Elem().Kind() != reflect.Bool {
			return false
		}
	default:
		return false
	}
	return ytypes.Validate(schema, reflect.New(t.Elem()).Interface()) == nil
}

// fastKind reports whether a leaf of YANG kind k held in a field of type
// t is one the fast path converts: a string, boolean or integer, in a
// pointer to the plain Go type.
func fastKind(k yang.TypeKind, t reflect.Type) bool {
	if t.Kind() != reflect.Pointer || t.Elem().PkgPath() != "" {
		return false
	}
	want, ok := fastKinds[k]
	return ok && t.Elem().Kind() == want
}

// fastKinds maps the YANG kinds the fast path converts to the Go kind ygot
// generates for them.
var fastKinds = map[yang.TypeKind]reflect.Kind{
	yang.Ystring: reflect.String,
	yang.Ybool:   reflect.Bool,
	yang.Yint8:   reflect.Int8,
	yang.Yint16:  reflect.Int16,
	yang.Yint32:  reflect.Int32,
	yang.Yint64:  reflect.Int64,
	yang.Yuint8:  reflect.Uint8,
	yang.Yuint16: reflect.Uint16,
	yang.Yuint32: reflect.Uint32,
	yang.Yuint64: reflect.Uint64,
}

// value converts v to a new value of the leaf's field type, if v is of the
// leaf's kind (the encoding ytypes expects for it) and fits.
func (p *leafPlan) value(v *gpb.TypedValue) (reflect.Value, bool) {
	nv := reflect.New(p.typ.Elem())
	e := nv.Elem()
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		if p.kind != yang.Ystring {
			return reflect.Value{}, false
		}
		e.SetString(x.StringVal)
	case *gpb.TypedValue_BoolVal:
		if p.kind != yang.Ybool {
			return reflect.Value{}, false
		}
		e.SetBool(x.BoolVal)
	case *gpb.TypedValue_IntVal:
		// fastKind holds for every plan: the Go kind is an intN exactly
		// when the YANG kind is.
		if !e.CanInt() || e.OverflowInt(x.IntVal) {
			return reflect.Value{}, false
		}
		e.SetInt(x.IntVal)
	case *gpb.TypedValue_UintVal:
		if !e.CanUint() || e.OverflowUint(x.UintVal) {
			return reflect.Value{}, false
		}
		e.SetUint(x.UintVal)
	default:
		return reflect.Value{}, false
	}
	return nv, true
}

// fastEntry is one list entry a fast Set writes: a copy of the running
// entry (or a new one) that replaces it on install.
type fastEntry struct {
	list *listPlan
	key  reflect.Value // the map key
	val  reflect.Value // the entry written (a pointer)
	live reflect.Value // the running entry; invalid for a new one
	// written lists each leaf written, once, in order.
	written []*leafPlan
}

// fastChange is what a fast Set wrote, for the change notification.
type fastChange struct {
	entries []*fastEntry
}

// apply tries the fast path for ops, which all go through entries of
// top-level lists (refs). ok is false if the Set is not one it takes or
// fails a check; the caller then takes the general path.
func (f *fastSet) apply(root ygot.ValidatedGoStruct, ops []setOp, refs []entryRef) (*change, bool) {
	if f == nil || reflect.TypeOf(root).Elem() != f.rootType {
		return nil, false
	}
	type step struct {
		entry *fastEntry
		plan  *leafPlan
		val   reflect.Value
	}
	steps := make([]step, len(ops))
	type entryID struct {
		field int
		key   any
	}
	byID := map[entryID]*fastEntry{}
	var entries []*fastEntry
	src := reflect.ValueOf(root).Elem()
	var last struct { // the previous operation's route: Sets repeat paths
		list *listPlan
		rel  []*gpb.PathElem
		plan *leafPlan
	}
	// Check every operation before writing anything.
	for n, o := range ops {
		if !o.write || !(o.op == gpb.UpdateResult_UPDATE || o.op == gpb.UpdateResult_REPLACE) {
			return nil, false
		}
		lp := f.lists[refs[n].field]
		if lp == nil {
			return nil, false
		}
		elems := o.full.GetElem()
		if len(elems) <= len(lp.parts) {
			return nil, false
		}
		// entryRefs matched the names of elems to lp.parts (the field's
		// path tag, which has no alternatives): only where the keys are is
		// left to check.
		for i := range lp.parts {
			if (i < len(lp.parts)-1) != (len(elems[i].GetKey()) == 0) {
				return nil, false
			}
		}
		if keys := elems[len(lp.parts)-1].GetKey(); len(keys) != 1 || keys[lp.keyName] == "" {
			return nil, false
		}
		rel := elems[len(lp.parts):]
		for _, e := range rel {
			if len(e.GetKey()) > 0 {
				return nil, false
			}
		}
		plan := last.plan
		if last.list != lp || !sameNames(last.rel, rel) {
			plan = lp.leaf(rel)
			last.list, last.rel, last.plan = lp, rel, plan
		}
		if plan == nil {
			return nil, false
		}
		v, ok := plan.value(o.val)
		if !ok {
			return nil, false
		}
		if plan.key && v.Elem().Interface() != refs[n].key.Interface() {
			return nil, false // the general path says what is wrong
		}
		id := entryID{lp.field, refs[n].key.Interface()}
		e := byID[id]
		if e == nil {
			e = &fastEntry{list: lp, key: refs[n].key}
			if m := src.Field(lp.field); !m.IsNil() {
				e.live = m.MapIndex(e.key)
			}
			byID[id] = e
			entries = append(entries, e)
		}
		steps[n] = step{entry: e, plan: plan, val: v}
	}
	// Copy or create the entries, then write.
	for _, e := range entries {
		if e.live.IsValid() {
			cp, err := ygot.DeepCopy(e.live.Interface().(ygot.GoStruct))
			if err != nil {
				return nil, false
			}
			e.val = reflect.ValueOf(cp)
			continue
		}
		e.val = reflect.New(e.list.entryType.Elem())
		kf := e.val.Elem().Field(e.list.keyField)
		if e.list.keyPtr {
			kp := reflect.New(e.key.Type())
			kp.Elem().Set(e.key)
			kf.Set(kp)
		} else {
			kf.Set(e.key)
		}
	}
	for _, s := range steps {
		s.entry.set(s.plan, s.val)
		if !slices.Contains(s.entry.written, s.plan) {
			s.entry.written = append(s.entry.written, s.plan)
		}
	}
	// Validate what was written: each leaf, and the key of a new entry.
	for _, e := range entries {
		if !e.live.IsValid() && !e.list.keyFree {
			if errs := ytypes.Validate(e.list.keySchema, e.val.Elem().Field(e.list.keyField).Interface()); errs != nil {
				return nil, false
			}
		}
		for _, p := range e.written {
			if p.key || p.free {
				continue // the key is valid (checked above for a new entry)
			}
			if errs := ytypes.Validate(p.schema, e.field(e.val, p).Interface()); errs != nil {
				return nil, false
			}
		}
	}
	scratchPtr := reflect.New(f.rootType)
	scratch := scratchPtr.Elem()
	t := &touched{whole: map[int]bool{}, entries: map[int][]reflect.Value{}}
	for _, e := range entries {
		m := scratch.Field(e.list.field)
		if m.IsNil() {
			m.Set(reflect.MakeMap(m.Type()))
		}
		m.SetMapIndex(e.key, e.val)
		t.entries[e.list.field] = append(t.entries[e.list.field], e.key)
	}
	return &change{scratch: scratchPtr.Interface().(ygot.GoStruct), touched: t, fast: &fastChange{entries: entries}}, true
}

// sameNames reports whether a and b have the same element names.
func sameNames(a, b []*gpb.PathElem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].GetName() != b[i].GetName() {
			return false
		}
	}
	return true
}

// set writes v into the leaf p of e, creating the containers on the way.
func (e *fastEntry) set(p *leafPlan, v reflect.Value) {
	s := e.val.Elem()
	for i, fi := range p.fields {
		f := s.Field(fi)
		if i == len(p.fields)-1 {
			f.Set(v)
			return
		}
		if f.IsNil() {
			f.Set(reflect.New(f.Type().Elem()))
		}
		s = f.Elem()
	}
}

// field returns leaf p of the entry entry points to; an invalid Value if a
// container on the way is missing.
func (e *fastEntry) field(entry reflect.Value, p *leafPlan) reflect.Value {
	s := entry.Elem()
	for i, fi := range p.fields {
		f := s.Field(fi)
		if i == len(p.fields)-1 {
			return f
		}
		if f.IsNil() {
			return reflect.Value{}
		}
		s = f.Elem()
	}
	return reflect.Value{}
}

// notification is the change a fast Set made, as ygot.Diff of the touched
// entries before and after reports it: an update per path of every leaf
// whose value changed, and of the key leaves of each new entry.
func (c *fastChange) notification() (*gpb.Notification, error) {
	n := &gpb.Notification{}
	add := func(e *fastEntry, keyStr string, paths [][]string, v reflect.Value) error {
		tv, err := ygot.EncodeTypedValue(v.Interface(), gpb.Encoding_PROTO)
		if err != nil {
			return err
		}
		for _, rel := range paths {
			elems := make([]*gpb.PathElem, 0, len(e.list.parts)+len(rel))
			for i, part := range e.list.parts {
				pe := &gpb.PathElem{Name: part}
				if i == len(e.list.parts)-1 {
					pe.Key = map[string]string{e.list.keyName: keyStr}
				}
				elems = append(elems, pe)
			}
			for _, name := range rel {
				elems = append(elems, &gpb.PathElem{Name: name})
			}
			n.Update = append(n.Update, &gpb.Update{Path: &gpb.Path{Elem: elems}, Val: tv})
		}
		return nil
	}
	for _, e := range c.entries {
		keyStr, err := ygot.KeyValueAsString(e.key.Interface())
		if err != nil {
			return nil, err
		}
		if !e.live.IsValid() {
			if err := add(e, keyStr, e.list.keyPaths, e.val.Elem().Field(e.list.keyField)); err != nil {
				return nil, err
			}
		}
		for _, p := range e.written {
			if p.key {
				continue // equal to the key: new with the entry, or unchanged
			}
			after := e.field(e.val, p)
			if e.live.IsValid() {
				if before := e.field(e.live, p); before.IsValid() && !before.IsNil() && reflect.DeepEqual(before.Interface(), after.Interface()) {
					continue
				}
			}
			if err := add(e, keyStr, p.paths, after); err != nil {
				return nil, err
			}
		}
	}
	return n, nil
}
