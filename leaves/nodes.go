package leaves

import (
	"bytes"
	"encoding/json"
	"fmt"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/value"
)

// NodeInfo is what a schema says of one data node: what drift detection
// (package drift) needs to tell the device's own data from configuration
// the journal manages.
type NodeInfo struct {
	// Known: the schema has the node (false without a schema).
	Known bool
	// Leaf, LeafList, List, Presence: its kind (Presence: a presence
	// container).
	Leaf, LeafList, List, Presence bool
	// ReadOnly: the node is state data (config false, or under such a
	// node).
	ReadOnly bool
	// Default is the node's YANG default value(s), as the module writes
	// them (its type's default when the leaf has none); nil for none.
	Default []string
}

// Node returns what s says of the data node at p (its element names; list
// keys and module prefixes do not matter). A nil schema, or a node it does
// not know, gives the zero NodeInfo.
func (s *Schema) Node(p *gpb.Path) NodeInfo {
	n := s.rootNode()
	for _, e := range p.GetElem() {
		if n, _ = n.child(Name(e.GetName())); !n.known() {
			return NodeInfo{}
		}
	}
	if !n.known() || n.e == s.root {
		return NodeInfo{}
	}
	info := NodeInfo{Known: true, Leaf: n.isLeaf(), LeafList: n.isLeafList(), List: n.isList(),
		Presence: n.isPresence(), ReadOnly: n.e.ReadOnly()}
	if info.Leaf || info.LeafList {
		info.Default = n.e.DefaultValues()
	}
	return info
}

// IsDefault reports whether v, a device's value of the leaf at p, is the
// leaf's YANG default (false without a schema, or for a leaf without a
// default): a device that holds a default it derived itself has not had its
// configuration changed. Numbers compare by value, identities with or
// with their module's prefix or name, or without.
func (s *Schema) IsDefault(p *gpb.Path, v *gpb.TypedValue) bool {
	info := s.Node(p)
	if !info.Leaf || len(info.Default) != 1 {
		return false
	}
	def := info.Default[0]
	got, ok := scalarText(v)
	if !ok {
		return false
	}
	if got == def || identityName(got) == identityName(def) {
		return true // identities: the module's prefix or name, or none
	}
	// Numbers written differently (1500, "1500", 1.5e3).
	return Equal(&gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(got)}},
		&gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(def)}})
}

// scalarText renders a scalar value, or the JSON text of a JSON scalar,
// as YANG writes a default: strings unquoted, booleans and numbers as text.
func scalarText(v *gpb.TypedValue) (string, bool) {
	if b := bytes.TrimSpace(jsonBytes(v)); len(b) > 0 {
		var x any
		if err := json.Unmarshal(b, &x); err != nil {
			return "", false
		}
		switch y := x.(type) {
		case string:
			return y, true
		case bool, float64:
			return string(b), true
		}
		return "", false
	}
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return x.StringVal, true
	case *gpb.TypedValue_AsciiVal:
		return x.AsciiVal, true
	case nil:
		return "", false
	}
	s, err := value.ToScalar(v)
	if err != nil {
		return "", false
	}
	switch s.(type) {
	case []any, []byte:
		return "", false
	}
	return fmt.Sprint(s), true
}

// IsState reports whether p is state data: the schema says so (config
// false), or, where it does not know the path (or there is none), one of
// its elements is named "state" (OpenConfig's state containers).
func IsState(p *gpb.Path, schema *Schema) bool {
	if info := schema.Node(p); info.Known {
		return info.ReadOnly
	}
	for _, e := range p.GetElem() {
		if Name(e.GetName()) == "state" {
			return true
		}
	}
	return false
}
