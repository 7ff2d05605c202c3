package journal

import (
	"strings"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"
)

func TestValidatePath(t *testing.T) {
	elem := func(name string, keys map[string]string) *gnmi.PathElem { return &gnmi.PathElem{Name: name, Key: keys} }
	tests := []struct {
		name string
		p    *gnmi.Path
		want string // substring of the error; "" = valid
	}{
		{"concrete", mustPath(t, "/interfaces/interface[name=eth0]/config/mtu"), ""},
		{"root", &gnmi.Path{}, ""},
		{"origin", mustPath(t, "openconfig:/system"), ""},
		{"nil", nil, "missing path"},
		//lint:ignore SA1019 the test builds a path with the deprecated field on purpose
		{"deprecated element", &gnmi.Path{Element: []string{"a"}}, "deprecated element field"},
		{"unnamed first element", &gnmi.Path{Elem: []*gnmi.PathElem{elem("", nil)}}, "path /... has an element without a name (element 1)"},
		{"unnamed later element", &gnmi.Path{Elem: []*gnmi.PathElem{elem("a", map[string]string{"k": "v"}), elem("", nil)}},
			"path /a[k=v]/... has an element without a name (element 2)"},
		{"wildcard element", mustPath(t, "/a/*/c"), "wildcard"},
		{"any depth", mustPath(t, "/a/.../c"), "wildcard"},
		{"wildcard key", &gnmi.Path{Elem: []*gnmi.PathElem{elem("a", map[string]string{"k": "*"})}}, "wildcard key"},
		{"empty key name", &gnmi.Path{Elem: []*gnmi.PathElem{elem("a", map[string]string{"": "v"})}}, "empty key name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidatePath(tt.p)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidatePath(%v) = %v, want valid", tt.p, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidatePath(%v) = %v, want an error containing %q", tt.p, err, tt.want)
			}
		})
	}
}

func TestPathString(t *testing.T) {
	keyed := func(v string) *gnmi.Path {
		return &gnmi.Path{Elem: []*gnmi.PathElem{{Name: "a"}, {Name: "b", Key: map[string]string{"k": v}}, {Name: "c"}}}
	}
	tests := []struct {
		name string
		p    *gnmi.Path
		want string
	}{
		{"root", &gnmi.Path{}, "/"},
		{"origin", mustPath(t, "openconfig:/system"), "openconfig:/system"},
		{"keys sorted", mustPath(t, "/a[y=2][x=1]/b"), "/a[x=1][y=2]/b"},
		{"slash in a key", keyed("Ethernet1/1"), "/a/b[k=Ethernet1/1]/c"},
		{"double slash in a key", keyed("x//y"), "/a/b[k=x//y]/c"},
		{"dot-dot in a key", keyed("x/../y"), "/a/b[k=x/../y]/c"},
		{"escapes in a key", keyed(`x]\=`), `/a/b[k=x\]\\\=]/c`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PathString(tt.p); got != tt.want {
				t.Errorf("PathString(%v) = %q, want %q", tt.p, got, tt.want)
			}
		})
	}
}
