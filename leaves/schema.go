package leaves

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/goyang/pkg/yangentry"
)

// Schema is the device's data tree as its YANG modules describe it: which
// nodes are lists (and their keys), leaf-lists, presence containers, and
// choices. It is read only after it is built, so it is safe for concurrent
// use.
type Schema struct {
	root *yang.Entry
}

// NewSchema returns the schema whose data tree root is root: its Dir holds
// the top-level data nodes of every module (as ygot's generated fake root
// does).
func NewSchema(root *yang.Entry) *Schema {
	return &Schema{root: root}
}

// LoadYANG parses YANG modules with goyang and returns their data tree.
// paths are .yang files or directories; modules names modules to load from
// them. Without modules, every .yang file named in paths, and every .yang
// file directly in a directory of paths, is loaded. Imports and includes
// are looked up in the directories of paths and of the files.
func LoadYANG(paths, modules []string) (*Schema, error) {
	var files, dirs []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("yang: %w", err)
		}
		if !fi.IsDir() {
			files = append(files, p)
			dirs = append(dirs, filepath.Dir(p))
			continue
		}
		dirs = append(dirs, p)
		if len(modules) > 0 {
			continue
		}
		found, err := filepath.Glob(filepath.Join(p, "*.yang"))
		if err != nil {
			return nil, fmt.Errorf("yang: %w", err)
		}
		files = append(files, found...)
	}
	files = append(files, modules...)
	if len(files) == 0 {
		return nil, errors.New("yang: no .yang file or module named (give files, directories holding .yang files, or module names)")
	}
	entries, errs := yangentry.Parse(files, slices.Compact(slices.Sorted(slices.Values(dirs))))
	if len(errs) > 0 {
		msgs := make([]string, 0, min(len(errs), 5))
		for _, e := range errs[:min(len(errs), 5)] {
			msgs = append(msgs, e.Error())
		}
		more := ""
		if len(errs) > 5 {
			more = fmt.Sprintf(" (and %d more)", len(errs)-5)
		}
		return nil, fmt.Errorf("yang: %s%s", strings.Join(msgs, "; "), more)
	}
	root := &yang.Entry{Name: "/", Kind: yang.DirectoryEntry, Dir: map[string]*yang.Entry{}}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		for childName, child := range entries[name].Dir {
			if child.RPC != nil || child.Kind == yang.NotificationEntry {
				continue
			}
			if _, dup := root.Dir[childName]; !dup {
				root.Dir[childName] = child
			}
		}
	}
	if len(root.Dir) == 0 {
		return nil, errors.New("yang: the modules define no data nodes")
	}
	return &Schema{root: root}, nil
}

// node is a position in the schema while decomposing: the entry, or nil
// where the schema has nothing (no schema, or a node it does not know).
type node struct {
	e *yang.Entry
}

func (s *Schema) rootNode() node {
	if s == nil {
		return node{}
	}
	return node{e: s.root}
}

func (n node) known() bool { return n.e != nil }

func (n node) isList() bool      { return n.e != nil && n.e.IsList() }
func (n node) isLeafList() bool  { return n.e != nil && n.e.IsLeafList() }
func (n node) isLeaf() bool      { return n.e != nil && n.e.IsLeaf() }
func (n node) isContainer() bool { return n.e != nil && n.e.IsContainer() }

// isPresence reports whether n is a presence container.
func (n node) isPresence() bool {
	return n.isContainer() && len(n.e.Extra["presence"]) > 0
}

// keys returns the key names of a list node.
func (n node) keys() []string {
	if !n.isList() {
		return nil
	}
	return strings.Fields(n.e.Key)
}

// choiceCase is the case of a choice that a child node is in.
type choiceCase struct {
	choice, kase *yang.Entry
}

// child returns the data node name under n and the choices and cases it
// is reached through (outermost first). It returns an unknown node if n is
// unknown or has no such child.
func (n node) child(name string) (node, []choiceCase) {
	if n.e == nil || n.e.Dir == nil {
		return node{}, nil
	}
	if c, ok := n.e.Dir[name]; ok && !c.IsChoice() && !c.IsCase() {
		return node{e: c}, nil
	}
	for _, c := range n.e.Dir {
		if !c.IsChoice() {
			continue
		}
		if found, via := inChoice(c, name); found != nil {
			return node{e: found}, via
		}
	}
	return node{}, nil
}

// inChoice finds data node name in one of choice's cases.
func inChoice(choice *yang.Entry, name string) (*yang.Entry, []choiceCase) {
	for _, kase := range choice.Dir {
		// A short-hand case (a data node right under the choice) is its
		// own case.
		if !kase.IsCase() {
			if kase.Name == name && !kase.IsChoice() {
				return kase, []choiceCase{{choice: choice, kase: kase}}
			}
			if kase.IsChoice() {
				if found, via := inChoice(kase, name); found != nil {
					return found, via
				}
			}
			continue
		}
		if c, ok := kase.Dir[name]; ok && !c.IsChoice() && !c.IsCase() {
			return c, []choiceCase{{choice: choice, kase: kase}}
		}
		for _, c := range kase.Dir {
			if c.IsChoice() {
				if found, via := inChoice(c, name); found != nil {
					return found, append([]choiceCase{{choice: choice, kase: kase}}, via...)
				}
			}
		}
	}
	return nil, nil
}

// dataNodes returns the names of the data nodes a case (or a short-hand
// case's node) holds, nested choices included.
func dataNodes(kase *yang.Entry) []string {
	if !kase.IsCase() && !kase.IsChoice() {
		return []string{kase.Name}
	}
	var out []string
	for _, c := range kase.Dir {
		if c.IsChoice() || c.IsCase() {
			out = append(out, dataNodes(c)...)
			continue
		}
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

// otherCases returns the data node names of every case of choice but kase.
func otherCases(choice, kase *yang.Entry) []string {
	var out []string
	for _, c := range choice.Dir {
		if c != kase {
			out = append(out, dataNodes(c)...)
		}
	}
	slices.Sort(out)
	return out
}
