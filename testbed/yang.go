package testbed

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/openconfig/goyang/pkg/yang"
)

// The device's schema as YANG source, for tools that load YANG modules at
// run time (such as the sidecar's --yang option) and must be pointed at the
// simulated device: one self-contained YANG 1.1 module, parsable by goyang
// with no other module, that describes the device's whole uncompressed data
// tree (the paths clients send). It keeps the structure and drops the rest:
//
//   - containers (with presence), lists (with their keys, space-separated,
//     and ordered-by user), leaf-lists, leaves, choice and case, anydata and
//     anyxml;
//   - "config false" once, at the top of each read-only subtree;
//   - leaf types: the builtin base type where it is one of string, boolean,
//     int8…int64, uint8…uint64, decimal64 (with its fraction-digits), empty
//     and binary; "string" for everything else (enumeration, identityref,
//     leafref, union, bits, instance-identifier);
//   - no descriptions, defaults, constraints (must, when, ranges, patterns,
//     mandatory), typedefs, groupings, identities, RPCs or notifications.
//
// Every node is in the one module, so module-qualified JSON_IETF member
// names the device emits ("openconfig-interfaces:interfaces") name other
// modules than this one: consumers match members by local name. Output is
// deterministic: children are sorted by name.

// The module WriteYANG emits.
const (
	YANGModule    = "gnmi-testbed"
	YANGNamespace = "urn:gnmi-sidecar:testbed"
	YANGPrefix    = "tb"
	// YANGFile is the name Device.WriteYANG gives the module's file.
	YANGFile = YANGModule + ".yang"
)

// WriteYANG writes the device's schema to w as the YANG 1.1 module
// YANGModule (see Device.WriteYANG). Every Device serves this schema.
func WriteYANG(w io.Writer) error {
	m, err := newExampleOCModel()
	if err != nil {
		return fmt.Errorf("testbed: loading schema: %w", err)
	}
	return writeYANGModule(w, m.RootSchema(), testbedYANGHeader)
}

// WriteYANG writes the device's schema as YANG source into dir (created if
// missing), as the one module YANGModule in the file YANGFile, and returns
// the paths of the files written. The module describes the device's whole
// data tree: containers (with presence), lists with their keys, leaf-lists,
// leaves, choice/case, and "config false" on read-only subtrees; leaves
// have their builtin type, or string for derived ones (enumeration,
// identityref, leafref, union, ...). goyang parses it with no other module:
//
//	ms := yang.NewModules()
//	err := ms.Read(paths[0]) // then ms.Process(), yang.ToEntry(ms.Modules[testbed.YANGModule])
func (d *Device) WriteYANG(dir string) ([]string, error) {
	var buf bytes.Buffer
	if err := writeYANGModule(&buf, d.model.RootSchema(), testbedYANGHeader); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("testbed: writing YANG: %w", err)
	}
	path := filepath.Join(dir, YANGFile)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("testbed: writing YANG: %w", err)
	}
	return []string{path}, nil
}

// yangHeader is what a module says about itself.
type yangHeader struct {
	name, namespace, prefix, description string
}

var testbedYANGHeader = yangHeader{
	name: YANGModule, namespace: YANGNamespace, prefix: YANGPrefix,
	description: "The data tree of the gnmi-testbed simulated gNMI device " +
		"(ygot's exampleoc OpenConfig schema, uncompressed), structure only: " +
		"leaves of other than builtin types are of type string.",
}

// writeYANGModule writes root's data tree (its children are the module's
// top-level nodes) as one YANG 1.1 module.
func writeYANGModule(w io.Writer, root *yang.Entry, h yangHeader) error {
	for _, id := range []string{h.name, h.prefix} {
		if !isYANGIdentifier(id) {
			return fmt.Errorf("testbed: %q is not a YANG identifier", id)
		}
	}
	bw := bufio.NewWriter(w)
	y := &yangWriter{w: bw}
	y.line(0, "module %s {", h.name)
	y.line(1, "yang-version 1.1;")
	y.line(1, "namespace %s;", yangQuote(h.namespace))
	y.line(1, "prefix %s;", h.prefix)
	if h.description != "" {
		y.line(1, "description %s;", yangQuote(h.description))
	}
	y.children(1, root, "", root.ReadOnly())
	y.line(0, "}")
	if y.err != nil {
		return y.err
	}
	return bw.Flush()
}

type yangWriter struct {
	w   *bufio.Writer
	err error
}

func (y *yangWriter) line(depth int, format string, args ...any) {
	if y.err != nil {
		return
	}
	if _, err := fmt.Fprintf(y.w, "%s%s\n", strings.Repeat("  ", depth), fmt.Sprintf(format, args...)); err != nil {
		y.err = err
	}
}

func (y *yangWriter) fail(path string, format string, args ...any) {
	if y.err == nil {
		y.err = fmt.Errorf("testbed: writing YANG: %s: %s", path, fmt.Sprintf(format, args...))
	}
}

// children writes e's children, sorted by name. parentRO is whether the
// statements around them are already read-only.
func (y *yangWriter) children(depth int, e *yang.Entry, path string, parentRO bool) {
	names := make([]string, 0, len(e.Dir))
	for n := range e.Dir {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		y.node(depth, e.Dir[n], path+"/"+n, parentRO)
	}
}

// node writes one schema node.
func (y *yangWriter) node(depth int, e *yang.Entry, path string, parentRO bool) {
	if !isYANGIdentifier(e.Name) {
		y.fail(path, "node name %q is not a YANG identifier", e.Name)
		return
	}
	if e.RPC != nil || e.Kind == yang.NotificationEntry || e.Kind == yang.InputEntry || e.Kind == yang.OutputEntry {
		return // not data
	}
	ro := e.ReadOnly()
	// "config false" goes on the top node of a read-only subtree. A case
	// cannot carry it, so its children do instead.
	markRO := ro && !parentRO && !e.IsCase()
	innerRO := parentRO || markRO
	var kw string
	switch {
	case e.IsChoice():
		kw = "choice"
	case e.IsCase():
		kw = "case"
	case e.Kind == yang.AnyDataEntry:
		kw = "anydata"
	case e.Kind == yang.AnyXMLEntry:
		kw = "anyxml"
	case e.IsList():
		kw = "list"
	case e.IsContainer():
		kw = "container"
	case e.IsLeafList():
		kw = "leaf-list"
	case e.IsLeaf():
		kw = "leaf"
	default:
		y.fail(path, "unsupported schema node kind %v", e.Kind)
		return
	}
	switch kw {
	case "leaf", "leaf-list":
		var stmts []string
		stmts = append(stmts, yangType(e.Type))
		if markRO {
			stmts = append(stmts, "config false;")
		}
		if kw == "leaf-list" && orderedByUser(e) {
			stmts = append(stmts, "ordered-by user;")
		}
		y.line(depth, "%s %s { %s }", kw, e.Name, strings.Join(stmts, " "))
		return
	case "anydata", "anyxml":
		if markRO {
			y.line(depth, "%s %s { config false; }", kw, e.Name)
		} else {
			y.line(depth, "%s %s;", kw, e.Name)
		}
		return
	}
	y.line(depth, "%s %s {", kw, e.Name)
	if kw == "list" {
		if keys := strings.Fields(e.Key); len(keys) > 0 {
			for _, k := range keys {
				if !isYANGIdentifier(k) {
					y.fail(path, "list key %q is not a YANG identifier", k)
					return
				}
			}
			y.line(depth+1, "key %s;", yangQuote(strings.Join(keys, " ")))
		}
		if orderedByUser(e) {
			y.line(depth+1, "ordered-by user;")
		}
	}
	if kw == "container" {
		if text, ok := presence(e); ok {
			y.line(depth+1, "presence %s;", yangQuote(text))
		}
	}
	if markRO {
		y.line(depth+1, "config false;")
	}
	y.children(depth+1, e, path, innerRO)
	y.line(depth, "}")
}

// yangType is the type statement of a leaf or leaf-list of type t.
func yangType(t *yang.YangType) string {
	if t == nil {
		return "type string;"
	}
	switch t.Kind {
	case yang.Ystring:
		return "type string;"
	case yang.Ybool:
		return "type boolean;"
	case yang.Yint8, yang.Yint16, yang.Yint32, yang.Yint64,
		yang.Yuint8, yang.Yuint16, yang.Yuint32, yang.Yuint64:
		return "type " + t.Kind.String() + ";"
	case yang.Yempty:
		return "type empty;"
	case yang.Ybinary:
		return "type binary;"
	case yang.Ydecimal64:
		if t.FractionDigits >= 1 && t.FractionDigits <= 18 {
			return fmt.Sprintf("type decimal64 { fraction-digits %d; }", t.FractionDigits)
		}
	}
	return "type string;"
}

// presence returns the argument of e's presence statement, and whether it
// has one: goyang keeps it in Extra["presence"], as *yang.Value when parsed
// from source, as the decoded JSON object of one when unmarshalled from a
// serialized schema (as ygot's generated SchemaTree is).
func presence(e *yang.Entry) (string, bool) {
	vals := e.Extra["presence"]
	if len(vals) == 0 {
		return "", false
	}
	switch v := vals[0].(type) {
	case *yang.Value:
		if v != nil {
			return v.Name, true
		}
	case map[string]any:
		if s, ok := v["Name"].(string); ok {
			return s, true
		}
	}
	return "", true
}

func orderedByUser(e *yang.Entry) bool {
	la := e.ListAttr
	return la != nil && (la.OrderedByUser || (la.OrderedBy != nil && la.OrderedBy.Name == "user"))
}

// isYANGIdentifier reports whether s is a YANG identifier (RFC 7950 6.2).
func isYANGIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case i > 0 && (r == '-' || r == '.' || (r >= '0' && r <= '9')):
		default:
			return false
		}
	}
	return true
}

// yangQuote renders s as a double-quoted YANG string. Line breaks and tabs
// are escaped, so no line of the string is subject to YANG's indentation
// trimming of multi-line strings.
func yangQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(" ") // YANG has no escape for it
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
