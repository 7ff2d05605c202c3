package leaves

// Checking what a Set writes against the device's YANG: what a dry run
// refuses as the device would. Only what the schema certainly forbids is
// refused (a node it does not have, a value of the wrong type, an integer
// out of range, an enumeration name it does not define); what it cannot
// judge (leafrefs, identities, patterns, opaque values) passes.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/goyang/pkg/yang"
)

// ErrNotInSchema: a Set's path names a node the device's schema does not
// have (a device answers NOT_FOUND).
var ErrNotInSchema = errors.New("not in the device's schema")

// CheckPath refuses, with an *Error wrapping ErrNotInSchema, a path whose
// nodes the schema does not have (a Set's delete, replace or update
// path). A nil schema, or a path of an origin other than the schema's
// (none, or openconfig), passes.
func (s *Schema) CheckPath(p *gpb.Path) error {
	if !s.checks(p) {
		return nil
	}
	n := s.rootNode()
	for k, e := range p.GetElem() {
		if n.isLeaf() || n.isLeafList() {
			return &Error{Path: p, kind: ErrNotInSchema,
				Reason: fmt.Sprintf("%s is a leaf in the device's YANG: it has no child %q", elemsString(p.GetElem()[:k]), e.GetName())}
		}
		child, _ := n.child(Name(e.GetName()))
		if !child.known() {
			return &Error{Path: p, kind: ErrNotInSchema, Reason: fmt.Sprintf("the device's YANG has no node %q %s", e.GetName(), under(p.GetElem()[:k]))}
		}
		if err := checkKeys(p, e, child); err != nil {
			return err
		}
		n = child
	}
	return nil
}

// CheckWrite refuses, with an *Error wrapping ErrInvalid, a unit (path and
// value, as the journal records it) written by a Set's operation at opPath
// that the schema forbids: a node it does not have under opPath (the
// value named a member the schema lacks), state data, or a value its
// type does not admit. A path the schema does not have at or above opPath
// is refused as CheckPath refuses it. A nil schema passes everything.
func (s *Schema) CheckWrite(opPath, p *gpb.Path, v *gpb.TypedValue) error {
	if !s.checks(p) {
		return nil
	}
	n := s.rootNode()
	elems := p.GetElem()
	for k, e := range elems {
		if n.isLeaf() || n.isLeafList() {
			return &Error{Path: p, kind: ErrInvalid,
				Reason: fmt.Sprintf("%s is a leaf in the device's YANG: it has no child %q", elemsString(elems[:k]), e.GetName())}
		}
		child, _ := n.child(Name(e.GetName()))
		if !child.known() {
			if k < len(opPath.GetElem()) {
				return s.CheckPath(opPath)
			}
			return &Error{Path: p, kind: ErrInvalid, Reason: fmt.Sprintf("the value has a member %q that the device's YANG does not have %s", e.GetName(), under(elems[:k]))}
		}
		if err := checkKeys(p, e, child); err != nil {
			return err
		}
		n = child
	}
	if n.e == nil || n.e == s.root {
		return nil
	}
	if n.e.ReadOnly() {
		return &Error{Path: p, kind: ErrInvalid, Reason: "state data (config false in the device's YANG): it cannot be set"}
	}
	if IsMarker(v) {
		if n.isLeaf() || n.isLeafList() {
			return &Error{Path: p, kind: ErrInvalid, Reason: fmt.Sprintf("a leaf of type %s in the device's YANG, not a container or list: {} is not a value of it", typeName(n.e.Type))}
		}
		return nil
	}
	if !n.isLeaf() && !n.isLeafList() {
		return nil // a container or list written whole (an opaque value): not judged
	}
	if reason := checkValue(n.e.Type, v, n.isLeafList()); reason != "" {
		return &Error{Path: p, kind: ErrInvalid, Reason: reason}
	}
	return nil
}

// checks reports whether s judges paths like p: a schema is set and p is of
// its origin.
func (s *Schema) checks(p *gpb.Path) bool {
	return s != nil && gnmipath.Origin(p) == ""
}

// checkKeys refuses keys on a node that is not a list, and key names the
// list does not have.
func checkKeys(p *gpb.Path, e *gpb.PathElem, n node) error {
	if len(e.GetKey()) == 0 {
		return nil
	}
	if !n.isList() {
		return &Error{Path: p, kind: ErrInvalid, Reason: fmt.Sprintf("%q is not a list in the device's YANG: it takes no keys", e.GetName())}
	}
	keys := n.keys()
	for name := range e.GetKey() {
		if !slices.Contains(keys, Name(name)) {
			return &Error{Path: p, kind: ErrInvalid, Reason: fmt.Sprintf("list %q has no key %q in the device's YANG (its keys: %s)", e.GetName(), name, strings.Join(keys, ", "))}
		}
	}
	return nil
}

func under(elems []*gpb.PathElem) string {
	if len(elems) == 0 {
		return "at the top level"
	}
	return "under " + elemsString(elems)
}

// checkValue returns why v is not a value of a leaf (or, leafList, a
// leaf-list) of type t, "" if it is or cannot be told.
func checkValue(t *yang.YangType, v *gpb.TypedValue, leafList bool) string {
	if t == nil {
		return ""
	}
	if b := jsonBytes(v); b != nil {
		var x any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&x); err != nil {
			return "" // not JSON: refused elsewhere
		}
		ietf := v.GetJsonIetfVal() != nil
		if a, ok := x.([]any); ok && leafList {
			for _, el := range a {
				if r := checkJSON(t, el, ietf); r != "" {
					return r
				}
			}
			return ""
		}
		return checkJSON(t, x, ietf)
	}
	if ll := v.GetLeaflistVal(); ll != nil && leafList {
		for _, el := range ll.GetElement() {
			if r := checkValue(t, el, false); r != "" {
				return r
			}
		}
		return ""
	}
	return checkScalar(t, v)
}

// checkJSON judges x, a decoded JSON value of a leaf of type t (ietf: in
// JSON_IETF, RFC 7951, which writes 64-bit numbers as strings).
func checkJSON(t *yang.YangType, x any, ietf bool) string {
	switch t.Kind {
	case yang.Yunion:
		return firstAccepting(t, func(m *yang.YangType) string { return checkJSON(m, x, ietf) })
	case yang.Yint8, yang.Yint16, yang.Yint32, yang.Yint64, yang.Yuint8, yang.Yuint16, yang.Yuint32, yang.Yuint64:
		var text string
		switch y := x.(type) {
		case json.Number:
			text = string(y)
		case string:
			// RFC 7951 writes 64-bit integers as strings; JSON (not IETF)
			// is not as strict everywhere.
			if ietf && !is64(t.Kind) {
				return fmt.Sprintf("a %s in the device's YANG: %s is a string, not a number", typeName(t), showJSON(x))
			}
			text = y
		default:
			return fmt.Sprintf("a %s in the device's YANG: %s is not a number", typeName(t), showJSON(x))
		}
		return checkInt(t, text)
	case yang.Ydecimal64:
		switch y := x.(type) {
		case json.Number:
			return ""
		case string:
			if _, err := yang.ParseDecimal(y, uint8(max(t.FractionDigits, 1))); err != nil {
				return fmt.Sprintf("a %s in the device's YANG: %s is not a decimal number", typeName(t), showJSON(x))
			}
			return ""
		}
		return fmt.Sprintf("a %s in the device's YANG: %s is not a number", typeName(t), showJSON(x))
	case yang.Ybool:
		if _, ok := x.(bool); !ok {
			return fmt.Sprintf("a boolean in the device's YANG: %s is not true or false", showJSON(x))
		}
	case yang.Ystring, yang.Ybinary, yang.Ybits, yang.Yidentityref:
		if _, ok := x.(string); !ok {
			return fmt.Sprintf("a %s in the device's YANG: %s is not a string", typeName(t), showJSON(x))
		}
	case yang.Yenum:
		s, ok := x.(string)
		if !ok {
			return fmt.Sprintf("an enumeration in the device's YANG: %s is not one of its names", showJSON(x))
		}
		return checkEnum(t, s)
	}
	return ""
}

// checkScalar judges a scalar TypedValue of a leaf of type t.
func checkScalar(t *yang.YangType, v *gpb.TypedValue) string {
	if t.Kind == yang.Yunion {
		return firstAccepting(t, func(m *yang.YangType) string { return checkScalar(m, v) })
	}
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_IntVal:
		if isInt(t.Kind) {
			return checkInt(t, fmt.Sprint(x.IntVal))
		}
	case *gpb.TypedValue_UintVal:
		if isInt(t.Kind) {
			return checkInt(t, fmt.Sprint(x.UintVal))
		}
	case *gpb.TypedValue_StringVal:
		switch {
		case isInt(t.Kind):
			if _, err := yang.ParseInt(x.StringVal); err != nil {
				return fmt.Sprintf("a %s in the device's YANG: %q is not a number", typeName(t), x.StringVal)
			}
			return checkInt(t, x.StringVal)
		case t.Kind == yang.Yenum:
			return checkEnum(t, x.StringVal)
		case t.Kind == yang.Ybool:
			if x.StringVal != "true" && x.StringVal != "false" {
				return fmt.Sprintf("a boolean in the device's YANG: %q is not true or false", x.StringVal)
			}
		}
		return ""
	case *gpb.TypedValue_BoolVal:
		if t.Kind != yang.Ybool && (isInt(t.Kind) || t.Kind == yang.Ydecimal64 || t.Kind == yang.Ystring || t.Kind == yang.Yenum) {
			return fmt.Sprintf("a %s in the device's YANG: a boolean is not one", typeName(t))
		}
		return ""
	default:
		return "" // decimals, floats, bytes, ASCII, protobufs: not judged
	}
	if t.Kind == yang.Ybool || t.Kind == yang.Ystring || t.Kind == yang.Yenum {
		return fmt.Sprintf("a %s in the device's YANG: a number is not one", typeName(t))
	}
	return ""
}

// firstAccepting returns "" if a member type of union t accepts (check
// returns ""), else why none does.
func firstAccepting(t *yang.YangType, check func(*yang.YangType) string) string {
	if len(t.Type) == 0 {
		return ""
	}
	var why []string
	for _, m := range t.Type {
		r := check(m)
		if r == "" {
			return ""
		}
		why = append(why, r)
	}
	return "no type of the union accepts it (" + strings.Join(why, "; ") + ")"
}

func checkInt(t *yang.YangType, text string) string {
	n, err := yang.ParseInt(text)
	if err != nil {
		return fmt.Sprintf("a %s in the device's YANG: %s is not an integer", typeName(t), text)
	}
	r := t.Range
	if len(r) == 0 {
		r = defaultRange(t.Kind)
	}
	if len(r) == 0 {
		return ""
	}
	for _, span := range r {
		if !n.Less(span.Min) && !span.Max.Less(n) {
			return ""
		}
	}
	return fmt.Sprintf("a %s in the device's YANG: %s is out of its range %s", typeName(t), text, r)
}

func checkEnum(t *yang.YangType, s string) string {
	if t.Enum == nil || len(t.Enum.NameMap()) == 0 {
		return ""
	}
	if t.Enum.IsDefined(identityName(s)) || t.Enum.IsDefined(s) {
		return ""
	}
	return fmt.Sprintf("an enumeration in the device's YANG: %q is not one of its names (%s)", s, strings.Join(t.Enum.Names(), ", "))
}

func defaultRange(k yang.TypeKind) yang.YangRange {
	switch k {
	case yang.Yint8:
		return yang.Int8Range
	case yang.Yint16:
		return yang.Int16Range
	case yang.Yint32:
		return yang.Int32Range
	case yang.Yint64:
		return yang.Int64Range
	case yang.Yuint8:
		return yang.Uint8Range
	case yang.Yuint16:
		return yang.Uint16Range
	case yang.Yuint32:
		return yang.Uint32Range
	case yang.Yuint64:
		return yang.Uint64Range
	}
	return nil
}

func isInt(k yang.TypeKind) bool { return defaultRange(k) != nil }

func is64(k yang.TypeKind) bool { return k == yang.Yint64 || k == yang.Yuint64 }

// typeName names t for messages: its base kind (uint16, string, ...).
func typeName(t *yang.YangType) string {
	if t == nil {
		return "leaf"
	}
	if t.Kind == yang.Yenum {
		return "enumeration"
	}
	return t.Kind.String()
}
