package leaves

import (
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// TestSchemaNode: what the schema says of a node, with a module prefix or
// list keys on the path, and nothing without a schema or for a node it
// does not know.
func TestSchemaNode(t *testing.T) {
	s, err := LoadYANG([]string{"testdata/node-info.yang"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want NodeInfo
	}{
		{"/box/config/enabled", NodeInfo{Known: true, Leaf: true, Default: []string{"true"}}},
		{"/node-info:box/config/mtu", NodeInfo{Known: true, Leaf: true, Default: []string{"1500"}}},
		{"/box/config/tags", NodeInfo{Known: true, LeafList: true, Default: []string{"a", "b"}}},
		{"/box/config/name", NodeInfo{Known: true, Leaf: true}},
		{"/box/state/uptime", NodeInfo{Known: true, Leaf: true, ReadOnly: true}},
		{"/box/state", NodeInfo{Known: true, ReadOnly: true}},
		{"/box/ntp", NodeInfo{Known: true, Presence: true}},
		{"/box/port[id=1]", NodeInfo{Known: true, List: true}},
		{"/box/nosuch", NodeInfo{}},
		{"/", NodeInfo{}},
	}
	for _, tc := range tests {
		got := s.Node(mustPath(t, tc.path))
		if got.Known != tc.want.Known || got.Leaf != tc.want.Leaf || got.LeafList != tc.want.LeafList || got.List != tc.want.List ||
			got.Presence != tc.want.Presence || got.ReadOnly != tc.want.ReadOnly || len(got.Default) != len(tc.want.Default) {
			t.Errorf("Node(%s) = %+v, want %+v", tc.path, got, tc.want)
			continue
		}
		for n := range got.Default {
			if got.Default[n] != tc.want.Default[n] {
				t.Errorf("Node(%s).Default = %v, want %v", tc.path, got.Default, tc.want.Default)
			}
		}
	}
	var none *Schema
	if got := none.Node(mustPath(t, "/box/config/enabled")); got.Known {
		t.Errorf("a nil schema knows %+v", got)
	}
}

// TestSchemaIsDefault: a device value is its leaf's YANG default by
// meaning, in any encoding; not for another value, a leaf without a
// default, a leaf-list, or without a schema.
func TestSchemaIsDefault(t *testing.T) {
	s, err := LoadYANG([]string{"testdata/node-info.yang"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	str := func(v string) *gpb.TypedValue { return &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: v}} }
	ietf := func(v string) *gpb.TypedValue {
		return &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(v)}}
	}
	tests := []struct {
		path string
		v    *gpb.TypedValue
		want bool
	}{
		{"/box/config/enabled", &gpb.TypedValue{Value: &gpb.TypedValue_BoolVal{BoolVal: true}}, true},
		{"/box/config/enabled", ietf("true"), true},
		{"/box/config/enabled", ietf("false"), false},
		{"/box/config/mtu", &gpb.TypedValue{Value: &gpb.TypedValue_UintVal{UintVal: 1500}}, true},
		{"/box/config/mtu", ietf(`"1500"`), true},
		{"/box/config/mtu", ietf(" 1500 "), true},
		{"/box/config/mtu", ietf("9000"), false},
		{"/box/config/kind", ietf(`"node-info:router"`), true},
		{"/box/config/kind", str("router"), true},
		{"/box/config/name", str(""), false},
		{"/box/config/tags", ietf(`["a","b"]`), false},
	}
	for _, tc := range tests {
		if got := s.IsDefault(mustPath(t, tc.path), tc.v); got != tc.want {
			t.Errorf("IsDefault(%s, %v) = %v, want %v", tc.path, tc.v, got, tc.want)
		}
	}
	var none *Schema
	if none.IsDefault(mustPath(t, "/box/config/enabled"), str("true")) {
		t.Error("a nil schema knows a default")
	}
}
