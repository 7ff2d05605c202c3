package journal

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// FuzzPathKeyRoundTrip checks PathKey's guarantees on two paths decoded from the
// fuzzer's bytes (gnmi.Path in wire format): the key decodes back to the
// path (target dropped, list keys sorted), so distinct paths have distinct
// keys; IsUnder agrees with a definition by elements; a parent's key sorts
// before its descendants'; and ValidatePath accepts only paths that render.
func FuzzPathKeyRoundTrip(f *testing.F) {
	for _, pair := range [][2]string{
		{"/interfaces/interface[name=eth0]/config/mtu", "/interfaces/interface[name=eth0]"},
		{"/interfaces/interface[name=eth0]/config", "/interfaces/interface"},
		{"/a/bc", "/a/b"},
		{"/a/b[k=v]", "/a/b[k=v2]"},
		{"/a/b[x=1][y=2]/c", "/a/b[x=1]"},
		{"openconfig:/system", "/system"},
		{"openconfig:/system/config/hostname", "/system"},
		{"/system/config/hostname", "openconfig:/system"},
		{"cli:/system", "/system"},
		{"/", "/a"},
		{"/a[k=\x01\x04]", "/a[k=\x02]"},
		{"/a/*/c", "/a/.../c"},
	} {
		f.Add(marshalPath(f, pair[0]), marshalPath(f, pair[1]))
	}
	f.Add(marshalMsg(f, &gnmi.Path{Origin: "o\x00", Target: "dev", Elem: []*gnmi.PathElem{{Name: ""}, {Name: "\x03", Key: map[string]string{"": "\x01"}}}}),
		//lint:ignore SA1019 the deprecated field is set on purpose: PathKey ignores it
		marshalMsg(f, &gnmi.Path{Elem: []*gnmi.PathElem{{Name: "a"}}, Element: []string{"a"}}))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		p, q := &gnmi.Path{}, &gnmi.Path{}
		if proto.Unmarshal(a, p) != nil || proto.Unmarshal(b, q) != nil {
			return
		}
		key := PathKey(p)
		if n := pathKeySize(p); n != len(key) || cap(key) != len(key) {
			t.Fatalf("PathKey(%v) takes %d bytes (capacity %d), pathKeySize says %d", p, len(key), cap(key), n)
		}
		decoded, err := decodePathKey(key)
		if err != nil {
			t.Fatalf("PathKey(%v) = %q does not decode: %v", p, key, err)
		}
		if !proto.Equal(decoded, keyedPath(p)) {
			t.Fatalf("PathKey(%v) = %q decodes to %v", p, key, decoded)
		}
		if same, equal := bytes.Equal(key, PathKey(q)), proto.Equal(keyedPath(p), keyedPath(q)); same != equal {
			t.Fatalf("PathKey(%v) == PathKey(%v): %v, paths equal: %v", p, q, same, equal)
		}
		for _, pair := range [][2]*gnmi.Path{{p, q}, {q, p}} {
			checkUnder(t, pair[0], pair[1])
		}
		for n := range p.GetElem() {
			parent := &gnmi.Path{Origin: p.GetOrigin(), Elem: p.GetElem()[:n]}
			checkUnder(t, p, parent)
			list := &gnmi.Path{Origin: p.GetOrigin(), Elem: append(p.GetElem()[:n:n], &gnmi.PathElem{Name: p.GetElem()[n].GetName()})}
			checkUnder(t, p, list)
		}
		if _, renderErr := ygot.PathToStrings(p); ValidatePath(p) == nil && renderErr != nil {
			t.Fatalf("ValidatePath accepts %v, which does not render as a path string: %v", p, renderErr)
		}
	})
}

// checkUnder checks IsUnder(child, parent) against underByElems, and that
// a proper ancestor's key sorts before the child's.
func checkUnder(t *testing.T, child, parent *gnmi.Path) {
	t.Helper()
	got, want := IsUnder(child, parent), underByElems(child, parent)
	if got != want {
		t.Fatalf("IsUnder(%v, %v) = %v, want %v", child, parent, got, want)
	}
	if got && bytes.Compare(PathKey(parent), PathKey(child)) > 0 {
		t.Fatalf("PathKey(%v) sorts after PathKey(%v), which is under it", parent, child)
	}
}

// underByElems reports whether child is parent or under it, element by
// element: same origin, parent's elements a prefix of child's, except that
// parent's last element, when it has no keys, covers every entry of the
// list it names.
func underByElems(child, parent *gnmi.Path) bool {
	ce, pe := child.GetElem(), parent.GetElem()
	if !gnmipath.SameOrigin(child, parent) || len(pe) > len(ce) {
		return false
	}
	for n, e := range pe {
		if e.GetName() != ce[n].GetName() {
			return false
		}
		if n == len(pe)-1 && len(e.GetKey()) == 0 {
			return true
		}
		if !maps.Equal(e.GetKey(), ce[n].GetKey()) {
			return false
		}
	}
	return true
}

// keyedPath is what PathKey encodes of p: its origin ("" for
// "openconfig") and elements (no target, no deprecated element field, no
// unknown fields).
func keyedPath(p *gnmi.Path) *gnmi.Path {
	out := &gnmi.Path{Origin: gnmipath.Origin(p)}
	for _, e := range p.GetElem() {
		out.Elem = append(out.Elem, &gnmi.PathElem{Name: e.GetName(), Key: e.GetKey()})
	}
	return out
}

// decodePathKey inverts PathKey, checking the encoding on the way: an
// origin, then per element its name and its list keys in ascending order
// of name, each byte below escapeLimit escaped.
func decodePathKey(key []byte) (*gnmi.Path, error) {
	var tokens []string // the origin, then one per separator
	var seps []byte
	var tok []byte
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == escapeByte:
			if i+1 == len(key) || key[i+1] < escapeShift || key[i+1] >= escapeShift+escapeLimit {
				return nil, fmt.Errorf("bad escape at byte %d", i)
			}
			i++
			tok = append(tok, key[i]-escapeShift)
		case c == sepElem || c == sepKey || c == sepKeyValue:
			tokens, seps, tok = append(tokens, string(tok)), append(seps, c), nil
		case c < escapeLimit:
			return nil, fmt.Errorf("unescaped byte %#x at byte %d", c, i)
		default:
			tok = append(tok, c)
		}
	}
	tokens = append(tokens, string(tok))
	p := &gnmi.Path{Origin: tokens[0]}
	var elem *gnmi.PathElem
	lastKey := ""
	for n := 0; n < len(seps); n++ {
		switch seps[n] {
		case sepElem:
			elem = &gnmi.PathElem{Name: tokens[n+1]}
			p.Elem = append(p.Elem, elem)
		case sepKey:
			if elem == nil || n+1 == len(seps) || seps[n+1] != sepKeyValue {
				return nil, errors.New("a list key outside an element or without a value")
			}
			name := tokens[n+1]
			if elem.Key == nil {
				elem.Key = map[string]string{}
			} else if name <= lastKey {
				return nil, fmt.Errorf("list key %q after %q", name, lastKey)
			}
			elem.Key[name], lastKey = tokens[n+2], name
			n++
		default:
			return nil, errors.New("a key value without a key name")
		}
	}
	return p, nil
}

// marshalPath is the wire form of a path in mustPath's notation, for seeds.
func marshalPath(tb testing.TB, s string) []byte {
	tb.Helper()
	return marshalMsg(tb, mustPath(tb, s))
}

func marshalMsg(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
