package introspection

// Request paths of the introspection tree: checked against the tree's
// shape, turned into patterns, and into the parts of the tree they select.

import (
	"maps"
	"slices"
	"strconv"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// treePattern is one path of a request: the prefix and the path joined,
// checked against the tree's shape, numeric keys in canonical form.
type treePattern struct {
	elems []*gpb.PathElem
}

// String is the pattern with the origin, for messages.
func (p treePattern) String() string {
	return gnmipath.Short(&gpb.Path{Origin: Origin, Elem: p.elems})
}

// matches reports whether the leaf at path is selected by p: it matches p
// or lies under a match.
func (p treePattern) matches(path []*gpb.PathElem) bool {
	return gnmipath.MatchesOrUnder(p.elems, path)
}

// newPattern joins prefix and path and checks the result: InvalidArgument
// for what no gNMI path of this tree can be (deprecated elements, keys on
// a container, a non-numeric index), NotFound for an element the tree does
// not have.
func newPattern(prefix, path *gpb.Path) (treePattern, error) {
	//lint:ignore SA1019 the deprecated field is read only to refuse it
	if len(prefix.GetElement()) > 0 || len(path.GetElement()) > 0 {
		return treePattern{}, status.Error(codes.InvalidArgument, "path uses the deprecated element field; send elem")
	}
	var p treePattern
	for _, e := range gnmipath.Concat(prefix.GetElem(), path.GetElem()) {
		// A copy: check canonicalizes keys in place.
		p.elems = append(p.elems, &gpb.PathElem{Name: e.GetName(), Key: maps.Clone(e.GetKey())})
	}
	if err := p.check(); err != nil {
		return treePattern{}, err
	}
	return p, nil
}

// check walks p along the schema as long as its elements are concrete and
// canonicalizes numeric keys everywhere.
func (p treePattern) check() error {
	node := schema()
	for n, e := range p.elems {
		if e.GetName() == "" {
			return status.Errorf(codes.InvalidArgument, "%s: element %d has no name", p, n+1)
		}
		// Numeric keys are compared in canonical form: index=007 is index=7.
		for _, k := range [...]string{Index, Seq} {
			v, ok := e.GetKey()[k]
			if !ok || v == gnmipath.AnyElem {
				continue
			}
			i, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "%s: key %s=%q is not a number", p, k, v)
			}
			e.Key[k] = strconv.FormatUint(i, 10)
		}
		if node == nil {
			continue // below a wildcard: any shape may match
		}
		if e.GetName() == gnmipath.AnyElem || e.GetName() == gnmipath.AnyDepth {
			node = nil
			continue
		}
		if len(node.children) == 0 {
			return status.Errorf(codes.NotFound, "%s: %s is a leaf; nothing is below it", p, node.name)
		}
		next := node.child(e.GetName())
		if next == nil {
			where := "at the root of origin " + Origin
			if n > 0 {
				where = "under " + gnmipath.String(&gpb.Path{Elem: p.elems[:n]})
			}
			return status.Errorf(codes.NotFound, "%s: no element %q %s (it has %s)", p, e.GetName(), where, node.childNames())
		}
		if err := p.checkKeys(e, next); err != nil {
			return err
		}
		node = next
	}
	return nil
}

// checkKeys checks the keys of element e, which names schema node n.
func (p treePattern) checkKeys(e *gpb.PathElem, n *schemaNode) error {
	for k := range e.GetKey() {
		switch {
		case n.key == "":
			return status.Errorf(codes.InvalidArgument, "%s: %s is not a list; it has no keys", p, n.name)
		case k != n.key:
			return status.Errorf(codes.InvalidArgument, "%s: %s has one key, %s (not %s)", p, n.name, n.key, k)
		}
	}
	return nil
}

// concrete reports whether p has no wildcard (element or key).
func (p treePattern) concrete() bool { return !slices.ContainsFunc(p.elems, gnmipath.Wild) }

// keylessList returns the name of the first list p names without its key,
// if any.
func (p treePattern) keylessList() (string, bool) {
	node := schema()
	for _, e := range p.elems {
		if node = node.child(e.GetName()); node == nil {
			return "", false
		}
		if _, ok := e.GetKey()[node.key]; node.key != "" && !ok {
			return node.name, true
		}
	}
	return "", false
}

// treeSelection is which parts of the tree some patterns select, so that only
// those are read and rendered.
type treeSelection struct {
	configuration, device, commitConfirm, outOfSync, resolutions, tags, proposals bool
	// drift: the watcher's records; diff: a fresh comparison of the
	// device with the journal, selected only by name (a wildcard does not
	// make a read compare the device).
	drift, diff bool
	// indexes, if not nil, restricts proposals to these (ascending).
	indexes []uint64
}

// selection returns the parts of the tree p's leading concrete elements
// select.
func (p treePattern) selection() treeSelection {
	if len(p.elems) == 0 || p.elems[0].GetName() == gnmipath.AnyElem || p.elems[0].GetName() == gnmipath.AnyDepth {
		return treeSelection{configuration: true, device: true, commitConfirm: true, outOfSync: true, resolutions: true, tags: true, proposals: true, drift: true}
	}
	switch p.elems[0].GetName() {
	case Configuration:
		return treeSelection{configuration: true}
	case Device:
		return treeSelection{device: true}
	case CommitConfirm:
		return treeSelection{commitConfirm: true}
	case OutOfSync:
		return treeSelection{outOfSync: true}
	case Resolutions:
		return treeSelection{resolutions: true}
	case Tags, TagDeletions:
		// Both change with Configuration.tag_changes.
		return treeSelection{tags: true}
	case Drift:
		return treeSelection{drift: true}
	case Diff:
		return treeSelection{diff: true}
	}
	sel := treeSelection{proposals: true}
	if i, ok := p.index(); ok {
		sel.indexes = []uint64{i}
	}
	return sel
}

// index returns the proposal index p names, if it names one.
func (p treePattern) index() (uint64, bool) {
	if len(p.elems) < 2 || p.elems[0].GetName() != Proposals || p.elems[1].GetName() != Proposal {
		return 0, false
	}
	v, ok := p.elems[1].GetKey()[Index]
	if !ok || v == gnmipath.AnyElem {
		return 0, false
	}
	i, err := strconv.ParseUint(v, 10, 64) // canonical since check
	return i, err == nil
}

// union is the selection of both s and o.
func (s treeSelection) union(o treeSelection) treeSelection {
	out := treeSelection{
		configuration: s.configuration || o.configuration,
		device:        s.device || o.device,
		commitConfirm: s.commitConfirm || o.commitConfirm,
		outOfSync:     s.outOfSync || o.outOfSync,
		resolutions:   s.resolutions || o.resolutions,
		tags:          s.tags || o.tags,
		proposals:     s.proposals || o.proposals,
		drift:         s.drift || o.drift,
		diff:          s.diff || o.diff,
	}
	switch {
	case s.proposals && s.indexes == nil, o.proposals && o.indexes == nil:
		// all proposals
	default:
		out.indexes = append(slices.Clone(s.indexes), o.indexes...)
		slices.Sort(out.indexes)
		out.indexes = slices.Compact(out.indexes)
	}
	return out
}

// selectionOf is the union of the patterns' selections.
func selectionOf(patterns []treePattern) treeSelection {
	var sel treeSelection
	for _, p := range patterns {
		sel = sel.union(p.selection())
	}
	return sel
}

// matchesAnyPattern reports whether any of patterns selects the leaf at path.
func matchesAnyPattern(patterns []treePattern, path []*gpb.PathElem) bool {
	for _, p := range patterns {
		if p.matches(path) {
			return true
		}
	}
	return false
}
