package leaves

import (
	"slices"
	"strings"
	"testing"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// listString renders a list as "origin:/a/b[k1,k2]" for comparisons.
func listString(l List) string {
	names := make([]string, len(l.Path.GetElem()))
	for n, e := range l.Path.GetElem() {
		names[n] = e.GetName()
		if len(e.GetKey()) > 0 {
			names[n] += "{keyed}" // a list's path never names an entry
		}
	}
	s := "/" + strings.Join(names, "/") + "[" + strings.Join(l.Keys, ",") + "]"
	if l.Path.GetOrigin() != "" {
		s = l.Path.GetOrigin() + ":" + s
	}
	return s
}

func listStrings(ls []List) []string {
	out := make([]string, len(ls))
	for n, l := range ls {
		out[n] = listString(l)
	}
	slices.Sort(out)
	return out
}

// TestLearnOpenConfig: the keys of the lists in a device's JSON answer that
// follow OpenConfig's convention (an entry's direct leaves are its keys,
// mirrored in its config container) are learned; any other list is not.
func TestLearnOpenConfig(t *testing.T) {
	tests := []struct {
		name  string
		at    string // the path read ("" for the root)
		data  string
		known []string // lists known beforehand (keyed paths to Learn)
		want  []string // the lists learned (listString), sorted
	}{
		{
			name: "interfaces",
			at:   "/interfaces",
			data: `{"interface":[
				{"name":"eth0","config":{"name":"eth0","mtu":1500},"state":{"name":"eth0"}},
				{"name":"eth1","config":{"name":"eth1","description":"up"}}]}`,
			want: []string{"/interfaces/interface[name]"},
		},
		{
			name: "interfaces read at the root, module-prefixed members",
			at:   "",
			data: `{"openconfig-interfaces:interfaces":{"openconfig-interfaces:interface":[
				{"openconfig-interfaces:name":"eth0","openconfig-interfaces:config":{"openconfig-interfaces:name":"eth0","mtu":9000}}]}}`,
			want: []string{"/interfaces/interface[name]"},
		},
		{
			name: "config member prefixed, key mirror unprefixed",
			at:   "/interfaces",
			data: `{"openconfig-interfaces:interface":[{"name":"eth0","openconfig-interfaces:config":{"name":"eth0"}}]}`,
			want: []string{"/interfaces/interface[name]"},
		},
		{
			name: "key mirror prefixed in config only",
			at:   "/interfaces",
			data: `{"interface":[{"name":"eth0","config":{"openconfig-interfaces:name":"eth0"}}]}`,
			want: []string{"/interfaces/interface[name]"},
		},
		{
			name: "the answer is the list itself",
			at:   "/interfaces/interface",
			data: `[{"name":"eth0","config":{"name":"eth0"}}]`,
			want: []string{"/interfaces/interface[name]"},
		},
		{
			name: "nested lists, numeric key",
			at:   "/interfaces",
			data: `{"interface":[{"name":"eth0","config":{"name":"eth0"},
				"subinterfaces":{"subinterface":[
					{"index":0,"config":{"index":0,"description":"a"}},
					{"index":1,"config":{"index":1}}]}}]}`,
			want: []string{"/interfaces/interface/subinterfaces/subinterface[index]", "/interfaces/interface[name]"},
		},
		{
			name: "nested list read at a list entry",
			at:   "/interfaces/interface[name=eth0]",
			data: `{"name":"eth0","config":{"name":"eth0"},
				"subinterfaces":{"subinterface":[{"index":7,"config":{"index":7}}]}}`,
			want: []string{"/interfaces/interface/subinterfaces/subinterface[index]"},
		},
		{
			name: "multi-key protocol list under network-instance",
			at:   "/network-instances",
			data: `{"network-instance":[{"name":"default","config":{"name":"default"},
				"protocols":{"protocol":[
					{"identifier":"BGP","name":"bgp","config":{"identifier":"BGP","name":"bgp","enabled":true}},
					{"identifier":"STATIC","name":"static","config":{"identifier":"STATIC","name":"static"}}]}}]}`,
			want: []string{"/network-instances/network-instance/protocols/protocol[identifier,name]", "/network-instances/network-instance[name]"},
		},
		{
			name: "boolean key",
			at:   "/a",
			data: `{"l":[{"flag":true,"config":{"flag":true}},{"flag":false,"config":{"flag":false}}]}`,
			want: []string{"/a/l[flag]"},
		},
		{
			name: "origin kept",
			at:   "vendor:/interfaces",
			data: `{"interface":[{"name":"eth0","config":{"name":"eth0"}}]}`,
			want: []string{"vendor:/interfaces/interface[name]"},
		},
		{
			name: "a direct leaf not mirrored in config",
			at:   "/interfaces",
			data: `{"interface":[{"name":"eth0","type":"ethernet","config":{"name":"eth0"}}]}`,
		},
		{
			name: "a direct leaf mirrored with another value",
			at:   "/interfaces",
			data: `{"interface":[{"name":"eth0","config":{"name":"eth1"}}]}`,
		},
		{
			name: "a numeric key mirrored as a string",
			at:   "/a",
			data: `{"l":[{"index":0,"config":{"index":"0"}}]}`,
		},
		{
			name: "entries with different direct leaves",
			at:   "/a",
			data: `{"l":[{"x":"1","config":{"x":"1","y":"2"}},{"y":"2","config":{"x":"1","y":"2"}}]}`,
		},
		{
			name: "entries with more and fewer direct leaves",
			at:   "/a",
			data: `{"l":[{"x":"1","config":{"x":"1","y":"2"}},{"x":"1","y":"2","config":{"x":"1","y":"2"}}]}`,
		},
		{
			name: "no config container",
			at:   "/a",
			data: `{"l":[{"name":"x","state":{"name":"x"}}]}`,
		},
		{
			name: "no direct leaf",
			at:   "/a",
			data: `{"l":[{"config":{"name":"x"}}]}`,
		},
		{
			name: "an empty list",
			at:   "/a",
			data: `{"l":[]}`,
		},
		{
			name: "a leaf-list",
			at:   "/a",
			data: `{"ll":["x","y"],"n":[1,2]}`,
		},
		{
			name: "not JSON",
			at:   "/a",
			data: `eth0 mtu 1500`,
		},
		{
			name: "a JSON scalar",
			at:   "/a",
			data: `"x"`,
		},
		{
			name:  "a list already known",
			at:    "/interfaces",
			data:  `{"interface":[{"name":"eth0","config":{"name":"eth0"}}]}`,
			known: []string{"/interfaces/interface[name=x]"},
		},
		{
			name:  "only the lists not known",
			at:    "/interfaces",
			data:  `{"interface":[{"name":"eth0","config":{"name":"eth0"},"subinterfaces":{"subinterface":[{"index":0,"config":{"index":0}}]}}]}`,
			known: []string{"/interfaces/interface[name=x]"},
			want:  []string{"/interfaces/interface/subinterfaces/subinterface[index]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := NewKeys()
			for _, p := range tt.known {
				k.Learn(mustPath(t, p))
			}
			at := &gpb.Path{}
			if tt.at != "" {
				at = mustPath(t, tt.at)
			}
			got := listStrings(k.LearnOpenConfig(at, []byte(tt.data)))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("LearnOpenConfig(%s) = %v, want %v", tt.at, got, tt.want)
			}
			// What was learned is known: a second answer teaches nothing.
			if again := k.LearnOpenConfig(at, []byte(tt.data)); len(again) != 0 {
				t.Errorf("learned again: %v", listStrings(again))
			}
			// Keys holds exactly what it knew and what it learned.
			var all []string
			for _, p := range tt.known {
				all = append(all, listStrings(ListsOf(mustPath(t, p)))...)
			}
			all = append(all, tt.want...)
			slices.Sort(all)
			if have := listStrings(k.Lists()); !slices.Equal(have, all) {
				t.Errorf("Lists() = %v, want %v", have, all)
			}
		})
	}
}

// TestLearnOpenConfigNil: a nil Keys learns nothing and does not panic.
func TestLearnOpenConfigNil(t *testing.T) {
	var k *Keys
	if got := k.LearnOpenConfig(mustPath(t, "/interfaces"), []byte(`{"interface":[{"name":"eth0","config":{"name":"eth0"}}]}`)); got != nil {
		t.Fatalf("nil Keys learned %v", got)
	}
}

// TestLearnOpenConfigDecomposes: once learned, the device's JSON
// decomposes leaf by leaf with the entries' keys, without a schema.
func TestLearnOpenConfigDecomposes(t *testing.T) {
	k := NewKeys()
	at := mustPath(t, "/interfaces")
	data := `{"interface":[{"name":"eth0","config":{"name":"eth0","mtu":1500}}]}`
	if _, err := NewDecomposer(nil, k).Decompose(at, ietf(data)); err == nil {
		t.Fatal("decomposed a list whose keys are not known")
	}
	k.LearnOpenConfig(at, []byte(data))
	w, err := NewDecomposer(nil, k).Decompose(at, ietf(data))
	if err != nil {
		t.Fatalf("Decompose after learning: %v", err)
	}
	units, _ := render(w)
	want := "/interfaces/interface[name=eth0]/config/mtu"
	if !slices.ContainsFunc(units, func(u string) bool { return strings.HasPrefix(u, want+" = ") }) {
		t.Fatalf("units %v, want one at %s", units, want)
	}
}
