package testbed

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/openconfig/goyang/pkg/yang"
)

// parseModule parses YANG source holding module name (and nothing it
// imports) and returns the module's entry, whose Dir holds its top-level
// data nodes.
func parseModule(t *testing.T, name, src string) *yang.Entry {
	t.Helper()
	ms := yang.NewModules()
	if err := ms.Parse(src, name+".yang"); err != nil {
		t.Fatalf("parsing %s: %v", name, err)
	}
	return processModule(t, ms, name)
}

func processModule(t *testing.T, ms *yang.Modules, name string) *yang.Entry {
	t.Helper()
	if errs := ms.Process(); len(errs) > 0 {
		t.Fatalf("processing %s: %v", name, errs)
	}
	mod, ok := ms.Modules[name]
	if !ok {
		t.Fatalf("module %s not found after parsing", name)
	}
	e := yang.ToEntry(mod)
	if len(e.Errors) > 0 {
		t.Fatalf("module %s: %v", name, e.Errors)
	}
	return e
}

// nodeKind names the kind of schema node e is.
func nodeKind(e *yang.Entry) string {
	switch {
	case e.IsChoice():
		return "choice"
	case e.IsCase():
		return "case"
	case e.Kind == yang.AnyDataEntry:
		return "anydata"
	case e.Kind == yang.AnyXMLEntry:
		return "anyxml"
	case e.IsList():
		return "list"
	case e.IsContainer():
		return "container"
	case e.IsLeafList():
		return "leaf-list"
	case e.IsLeaf():
		return "leaf"
	}
	return fmt.Sprintf("kind %v", e.Kind)
}

// exportedType is the type a leaf of type t must have in the written YANG:
// its builtin base type, or string.
func exportedType(t *yang.YangType) (yang.TypeKind, int) {
	if t == nil {
		return yang.Ystring, 0
	}
	switch t.Kind {
	case yang.Ystring, yang.Ybool, yang.Yempty, yang.Ybinary,
		yang.Yint8, yang.Yint16, yang.Yint32, yang.Yint64,
		yang.Yuint8, yang.Yuint16, yang.Yuint32, yang.Yuint64:
		return t.Kind, 0
	case yang.Ydecimal64:
		return yang.Ydecimal64, t.FractionDigits
	}
	return yang.Ystring, 0
}

func childNames(e *yang.Entry) []string {
	var out []string
	for n := range e.Dir {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// schemaDiff compares got (parsed back from written YANG) with want (the
// schema it was written from) node by node: the same children, and for each
// node the same kind, list keys, presence, read-only-ness, ordered-by and
// (exported) leaf type. It returns the differences and the number of nodes
// compared.
func schemaDiff(want, got *yang.Entry) (diffs []string, nodes int) {
	var walk func(path string, w, g *yang.Entry)
	walk = func(path string, w, g *yang.Entry) {
		nodes++
		add := func(format string, args ...any) {
			diffs = append(diffs, path+": "+fmt.Sprintf(format, args...))
		}
		if wk, gk := nodeKind(w), nodeKind(g); wk != gk {
			add("kind %s, want %s", gk, wk)
			return
		}
		if wk, gk := strings.Fields(w.Key), strings.Fields(g.Key); !reflect.DeepEqual(wk, gk) {
			add("key %q, want %q", g.Key, w.Key)
		}
		wp, wok := presence(w)
		gp, gok := presence(g)
		if wok != gok || wp != gp {
			add("presence %v %q, want %v %q", gok, gp, wok, wp)
		}
		if w.ReadOnly() != g.ReadOnly() {
			add("read-only %v, want %v", g.ReadOnly(), w.ReadOnly())
		}
		if orderedByUser(w) != orderedByUser(g) {
			add("ordered-by user %v, want %v", orderedByUser(g), orderedByUser(w))
		}
		if w.IsLeaf() || w.IsLeafList() {
			wt, wfd := exportedType(w.Type)
			if g.Type == nil || g.Type.Kind != wt || (wt == yang.Ydecimal64 && g.Type.FractionDigits != wfd) {
				add("type %v, want %v (fraction-digits %d)", g.Type, wt, wfd)
			}
		}
		wn, gn := childNames(w), childNames(g)
		if !reflect.DeepEqual(wn, gn) {
			add("children %v, want %v", gn, wn)
		}
		for _, n := range wn {
			if gc, ok := g.Dir[n]; ok {
				walk(path+"/"+n, w.Dir[n], gc)
			}
		}
	}
	walk("", want, got)
	return diffs, nodes
}

func reportDiffs(t *testing.T, diffs []string) {
	t.Helper()
	const maxShown = 30
	for i, d := range diffs {
		if i == maxShown {
			t.Errorf("... and %d more differences", len(diffs)-maxShown)
			break
		}
		t.Error(d)
	}
}

// find returns the node at a slash-separated schema path below e.
func find(e *yang.Entry, path string) *yang.Entry {
	for _, n := range strings.Split(strings.Trim(path, "/"), "/") {
		if e = e.Dir[n]; e == nil {
			return nil
		}
	}
	return e
}

func TestDeviceWriteYANGRoundTrips(t *testing.T) {
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "yang") // created by WriteYANG
	paths, err := d.WriteYANG(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, YANGFile)}; !reflect.DeepEqual(paths, want) {
		t.Fatalf("WriteYANG wrote %v, want %v", paths, want)
	}
	ms := yang.NewModules()
	if err := ms.Read(paths[0]); err != nil {
		t.Fatalf("goyang cannot read the written module: %v", err)
	}
	got := processModule(t, ms, YANGModule)
	if mod := ms.Modules[YANGModule]; mod.Namespace.Name != YANGNamespace || mod.Prefix.Name != YANGPrefix {
		t.Errorf("module namespace %q prefix %q, want %q %q", mod.Namespace.Name, mod.Prefix.Name, YANGNamespace, YANGPrefix)
	}

	want := d.model.RootSchema()
	diffs, nodes := schemaDiff(want, got)
	reportDiffs(t, diffs)
	// The exampleoc tree has some 9,600 nodes; a walk that stopped early
	// would compare far fewer.
	if nodes < 9000 {
		t.Errorf("compared %d nodes, want the whole tree (over 9000)", nodes)
	}

	// Spot checks of what the comparison relies on, in the parsed module.
	tests := []struct {
		path, kind, key string
		readOnly        bool
		typ             yang.TypeKind
	}{
		{path: "/interfaces", kind: "container"},
		{path: "/interfaces/interface", kind: "list", key: "name"},
		{path: "/interfaces/interface/name", kind: "leaf", typ: yang.Ystring}, // leafref
		{path: "/interfaces/interface/config/mtu", kind: "leaf", typ: yang.Yuint16},
		{path: "/interfaces/interface/config/type", kind: "leaf", typ: yang.Ystring}, // identityref
		{path: "/interfaces/interface/config/enabled", kind: "leaf", typ: yang.Ybool},
		{path: "/interfaces/interface/state", kind: "container", readOnly: true},
		{path: "/interfaces/interface/state/counters/in-octets", kind: "leaf", readOnly: true, typ: yang.Yuint64},
		{path: "/system/config/hostname", kind: "leaf", typ: yang.Ystring},
		{path: "/system/state/boot-time", kind: "leaf", readOnly: true, typ: yang.Yuint64},
		{path: "/acl/acl-sets/acl-set", kind: "list", key: "name type"},
		{path: "/network-instances/network-instance/protocols/protocol", kind: "list", key: "identifier name"},
		{path: "/routing-policy/defined-sets/prefix-sets/prefix-set/prefixes/prefix", kind: "list", key: "ip-prefix masklength-range"},
		{path: "/system/dns/config/search", kind: "leaf-list", typ: yang.Ystring},
		{path: "/network-instances/network-instance/vlans/vlan/members/member", kind: "list", readOnly: true},
	}
	for _, tc := range tests {
		e := find(got, tc.path)
		if e == nil {
			t.Errorf("%s: missing from the written module", tc.path)
			continue
		}
		if nodeKind(e) != tc.kind || e.Key != tc.key || e.ReadOnly() != tc.readOnly {
			t.Errorf("%s: %s key %q read-only %v, want %s key %q read-only %v", tc.path, nodeKind(e), e.Key, e.ReadOnly(), tc.kind, tc.key, tc.readOnly)
		}
		if tc.typ != yang.Ynone && (e.Type == nil || e.Type.Kind != tc.typ) {
			t.Errorf("%s: type %v, want %v", tc.path, e.Type, tc.typ)
		}
	}
}

func TestWriteYANGIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := WriteYANG(&a); err != nil {
		t.Fatal(err)
	}
	if err := WriteYANG(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two WriteYANG calls wrote different modules")
	}
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	paths, err := d.WriteYANG(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, a.Bytes()) {
		t.Error("Device.WriteYANG's file differs from WriteYANG's output")
	}
	// "config false" only at the top of read-only subtrees: far fewer than
	// the read-only nodes (every state container and its leaves).
	if n := strings.Count(a.String(), "config false;"); n == 0 || n > 1000 {
		t.Errorf("%d config false statements, want one per read-only subtree", n)
	}
}

// syntheticYANG exercises what exampleoc lacks (presence containers,
// choice/case) and every construct the writer handles.
const syntheticYANG = `module synth {
  yang-version 1.1;
  namespace "urn:synth";
  prefix s;

  identity base-id;
  typedef port { type uint16 { range "1..65535"; } }
  typedef pct { type decimal64 { fraction-digits 2; } }

  container top {
    presence "Enables the \"top\" feature;\n\tsecond line \\ with a backslash";
    leaf s { type string; }
    leaf b { type boolean; }
    leaf i8 { type int8; } leaf i16 { type int16; } leaf i32 { type int32; } leaf i64 { type int64; }
    leaf u8 { type uint8; } leaf u16 { type uint16; } leaf u32 { type uint32; } leaf u64 { type uint64; }
    leaf d { type decimal64 { fraction-digits 5; } }
    leaf pct { type pct; }
    leaf port { type port; }
    leaf e { type empty; }
    leaf bin { type binary; }
    leaf en { type enumeration { enum up; enum down; } }
    leaf id { type identityref { base base-id; } }
    leaf lr { type leafref { path "../s"; } }
    leaf un { type union { type uint32; type string; } }
    leaf bits { type bits { bit a; bit b; } }
    leaf ro-leaf { type string; config false; }
    leaf-list tags { type string; }
    leaf-list ordered { type uint32; ordered-by user; }
    container inner { presence ""; }
    container plain { leaf x { type string; } }
    anydata blob;
    choice transport {
      case tcp {
        leaf tcp-port { type port; }
        container tcp-opts { presence "tcp options"; leaf nodelay { type boolean; } }
      }
      case udp { leaf udp-port { type port; } }
      leaf shorthand { type string; }
      container shorthand-container { leaf y { type string; } }
    }
  }
  list multi {
    key "a b c";
    ordered-by user;
    leaf a { type string; } leaf b { type uint8; } leaf c { type string; }
    leaf v { type string; }
    container state {
      config false;
      leaf counter { type uint64; }
      list keyless { leaf z { type string; } }
      choice mode {
        case one { leaf one { type string; } }
        case two { container two { leaf t { type string; } } }
      }
    }
  }
  container ro-top {
    config false;
    list entry { key id; leaf id { type uint32; } leaf-list vals { type int64; } }
  }
  choice top-choice {
    config false;
    case only { leaf only-leaf { type string; } }
  }
}
`

func TestWriteYANGRoundTripsSyntheticSchema(t *testing.T) {
	want := parseModule(t, "synth", syntheticYANG)
	var out bytes.Buffer
	if err := writeYANGModule(&out, want, yangHeader{name: "synth-out", namespace: "urn:synth-out", prefix: "so"}); err != nil {
		t.Fatal(err)
	}
	got := parseModule(t, "synth-out", out.String())
	diffs, nodes := schemaDiff(want, got)
	reportDiffs(t, diffs)
	if nodes < 50 {
		t.Errorf("compared %d nodes", nodes)
	}
	if t.Failed() {
		t.Logf("written module:\n%s", out.String())
	}
	// Read-only subtree tops: ro-leaf, multi/state, ro-top, top-choice.
	if n := strings.Count(out.String(), "config false;"); n != 4 {
		t.Errorf("%d config false statements, want 4 (one per read-only subtree):\n%s", n, out.String())
	}
	// The presence text with quotes, a backslash, a newline and a tab
	// survives quoting.
	if p, _ := presence(find(got, "/top")); p != "Enables the \"top\" feature;\n\tsecond line \\ with a backslash" {
		t.Errorf("presence of /top read back as %q", p)
	}
}

// TestSchemaDiffCatchesDroppedStructure checks that the round-trip tests
// have teeth: each mutation of the written module, as a writer bug would
// make, is reported by schemaDiff.
func TestSchemaDiffCatchesDroppedStructure(t *testing.T) {
	want := parseModule(t, "synth", syntheticYANG)
	var out bytes.Buffer
	if err := writeYANGModule(&out, want, yangHeader{name: "synth-out", namespace: "urn:synth-out", prefix: "so"}); err != nil {
		t.Fatal(err)
	}
	written := out.String()
	tests := []struct {
		name     string
		old, new string
	}{
		{name: "key dropped", old: `key "a b c";`, new: ``},
		{name: "key shortened", old: `key "a b c";`, new: `key "a b";`},
		{name: "key on a single-key list dropped", old: `key "id";`, new: ``},
		{name: "presence dropped", old: `presence "tcp options";`, new: ``},
		{name: "empty presence dropped", old: `presence "";`, new: ``},
		{name: "config false dropped", old: "container ro-top {\n    config false;", new: "container ro-top {"},
		{name: "config false on a leaf dropped", old: `leaf ro-leaf { type string; config false; }`, new: `leaf ro-leaf { type string; }`},
		{name: "ordered-by dropped", old: `leaf-list ordered { type uint32; ordered-by user; }`, new: `leaf-list ordered { type uint32; }`},
		{name: "leaf-list as leaf", old: `leaf-list tags {`, new: `leaf tags {`},
		{name: "case as container", old: `case udp {`, new: `container udp {`},
		{name: "case renamed", old: `case one {`, new: `case uno {`},
		{name: "type changed", old: `leaf u32 { type uint32; }`, new: `leaf u32 { type string; }`},
		{name: "fraction-digits changed", old: `fraction-digits 5;`, new: `fraction-digits 4;`},
		{name: "leaf dropped", old: `leaf v { type string; }`, new: ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(written, tc.old) {
				t.Fatalf("written module lacks %q:\n%s", tc.old, written)
			}
			mutated := strings.Replace(written, tc.old, tc.new, 1)
			got := parseModule(t, "synth-out", mutated)
			if diffs, _ := schemaDiff(want, got); len(diffs) == 0 {
				t.Errorf("schemaDiff found no difference after replacing %q by %q", tc.old, tc.new)
			}
		})
	}
}

func TestWriteYANGRefusesNonIdentifiers(t *testing.T) {
	leaf := func(name string) *yang.Entry {
		return &yang.Entry{Name: name, Kind: yang.LeafEntry, Type: &yang.YangType{Kind: yang.Ystring}}
	}
	tests := []struct {
		name string
		root *yang.Entry
		h    yangHeader
	}{
		{name: "node name", root: &yang.Entry{Name: "r", Kind: yang.DirectoryEntry, Dir: map[string]*yang.Entry{"bad name": leaf("bad name")}}},
		{name: "key", root: &yang.Entry{Name: "r", Kind: yang.DirectoryEntry, Dir: map[string]*yang.Entry{
			"l": {Name: "l", Kind: yang.DirectoryEntry, Key: `k"`, ListAttr: &yang.ListAttr{}, Dir: map[string]*yang.Entry{}}}}},
		{name: "module name", root: &yang.Entry{Name: "r", Kind: yang.DirectoryEntry}, h: yangHeader{name: "1st", prefix: "p"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			if h.name == "" {
				h = yangHeader{name: "m", namespace: "urn:m", prefix: "m"}
			}
			if err := writeYANGModule(&bytes.Buffer{}, tc.root, h); err == nil {
				t.Error("writeYANGModule accepted a name that is not a YANG identifier")
			}
		})
	}
}

func TestYANGQuote(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            `"plain"`,
		`a "b" \c`:         `"a \"b\" \\c"`,
		"line\n\tindented": `"line\n\tindented"`,
	} {
		if got := yangQuote(in); got != want {
			t.Errorf("yangQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
