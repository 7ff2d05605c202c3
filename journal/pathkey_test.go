package journal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
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
		{"as deep as allowed", deep(MaxPathElems), ""},
		{"too deep", deep(MaxPathElems + 1), "has 257 elements; the journal takes paths of at most 256"},
		{"as long as allowed", longest(), ""},
		{"too long", &gnmi.Path{Elem: append(longest().GetElem(), elem("x", nil))}, "takes 16386 bytes; the journal takes paths of at most 16384 bytes"},
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

// deep is a path of n elements.
func deep(n int) *gnmi.Path {
	p := &gnmi.Path{}
	for range n {
		p.Elem = append(p.Elem, &gnmi.PathElem{Name: "a"})
	}
	return p
}

// longest is a path whose PathKey takes MaxPathBytes.
func longest() *gnmi.Path {
	// PathKey: 0x01 "a" 0x02 "k" 0x03 value.
	return &gnmi.Path{Elem: []*gnmi.PathElem{{Name: "a", Key: map[string]string{"k": strings.Repeat("v", MaxPathBytes-5)}}}}
}

// The longest path the journal takes is committed, applied and rolled
// back; a longer one is refused before anything is written.
func TestLongestPath(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	term := synced(t, j)
	long := longest()
	if n := len(PathKey(long)); n != MaxPathBytes {
		t.Fatalf("longest() takes %d bytes, want %d", n, MaxPathBytes)
	}
	op := &Op{Kind: OpUpdate, Path: long, Values: []*Leaf{{Path: long, Value: strVal("x")}}}
	i := applyChange(t, j, term, op)
	rollback(t, j, term, i)

	tooLong := &gnmi.Path{Elem: append(long.GetElem(), &gnmi.PathElem{Name: "x"})}
	_, err := j.ProposeChange(t.Context(), []*Op{{Kind: OpUpdate, Path: tooLong, Values: []*Leaf{{Path: tooLong, Value: strVal("x")}}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "at most 16384 bytes") {
		t.Errorf("ProposeChange of a path over MaxPathBytes: %v, want ErrInvalid saying the limit", err)
	}
	c, err := j.Configuration(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.GetLastIndex() != i {
		t.Errorf("last index %d after the refused proposal, want %d", c.GetLastIndex(), i)
	}
	checkInvariants(t, j)
}

// TestOutermost: the subtrees that hold all the paths, none under another.
func TestOutermost(t *testing.T) {
	for _, tt := range []struct {
		in, want []string
	}{
		{nil, nil},
		{[]string{"/a/b"}, []string{"/a/b"}},
		{[]string{"/a/b/c", "/x", "/a/b", "/a/b"}, []string{"/a/b", "/x"}},
		{[]string{"/l[k=1]/v", "/l", "/l[k=2]"}, []string{"/l"}},
		{[]string{"/l[k=1]/v", "/l[k=2]"}, []string{"/l[k=1]/v", "/l[k=2]"}},
	} {
		var in []*gnmi.Path
		for _, s := range tt.in {
			in = append(in, mustPath(t, s))
		}
		var got []string
		for _, p := range Outermost(in) {
			got = append(got, pathString(p))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Outermost(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestListSetTakesEachListOnce: a proposal's paths give each list they go
// through once, whatever entry, module prefix or default origin names it,
// and a list named by other key names, under another origin or at another
// path, as well.
func TestListSetTakesEachListOnce(t *testing.T) {
	s := newListSet()
	for _, p := range []string{
		"/interfaces/interface[name=eth0]/config/mtu",
		"/interfaces/interface[name=eth1]/subinterfaces/subinterface[index=0]",
		"/oc-if:interfaces/oc-if:interface[name=eth2]",
		"openconfig:/interfaces/interface[name=eth3]",
		"/interfaces/interface[name=eth0][unit=1]",
		"cli:/interfaces/interface[name=eth0]",
		"/interfaces/interfaces[name=eth0]",
		"/interfaces/interface[name=a\x00b]",
		"/system/config/hostname",
	} {
		s.add(mustPath(t, p))
	}
	var got []string
	for _, l := range s.lists {
		got = append(got, fmt.Sprintf("%s %v", gnmipath.String(l.Path), l.Keys))
	}
	want := []string{
		"/interfaces/interface [name]",
		"/interfaces/interface/subinterfaces/subinterface [index]",
		"/interfaces/interface [name unit]",
		"cli:/interfaces/interface [name]",
		"/interfaces/interfaces [name]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("lists:\n got %q\nwant %q", got, want)
	}
}

// TestCoveringKeysArePathKeys checks CoveringKeys against its definition:
// the PathKeys of the origin's root, of each element prefix, and of each
// prefix ending in a keyed list element with its keys removed, in that
// order; and that stopping early and keeping a key are safe.
func TestCoveringKeysArePathKeys(t *testing.T) {
	for _, s := range []string{
		"/",
		"openconfig:/system/config/hostname",
		"rfc7951:/ietf-interfaces:interfaces/interface[name=eth0]/enabled",
		"/interfaces/interface[name=eth0]/subinterfaces/subinterface[index=0]/config/description",
		"/a/b[y=2][x=1]/c[k=with\x01escapes\x04]/d",
		"/network-instances/network-instance[name=default]/protocols/protocol[identifier=BGP][name=bgp]/bgp",
	} {
		p := mustPath(t, s)
		var want [][]byte
		prefix := &gnmi.Path{Origin: p.GetOrigin()}
		want = append(want, PathKey(prefix))
		for n, e := range p.GetElem() {
			if len(e.GetKey()) > 0 {
				prefix.Elem = append(slices.Clone(p.GetElem()[:n]), &gnmi.PathElem{Name: e.GetName()})
				want = append(want, PathKey(prefix))
			}
			prefix.Elem = p.GetElem()[:n+1]
			want = append(want, PathKey(prefix))
		}
		var got [][]byte
		for key := range CoveringKeys(p) {
			got = append(got, key) // kept without a copy: the keys must stay as they were
		}
		if !slices.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("CoveringKeys(%s) = %q, want %q", s, got, want)
		}
		if last := got[len(got)-1]; string(last) != string(PathKey(p)) {
			t.Errorf("CoveringKeys(%s) ends with %q, want PathKey %q", s, last, PathKey(p))
		}
		n := 0
		for range CoveringKeys(p) {
			if n++; n == 2 {
				break
			}
		}
		if n != min(2, len(want)) {
			t.Errorf("CoveringKeys(%s) went on after a break: %d keys", s, n)
		}
	}
}
