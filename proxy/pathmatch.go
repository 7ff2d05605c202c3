package proxy

import (
	"slices"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

// Wildcards of gNMI paths (gNMI specification 2.2.2.1).
const (
	anyElem  = "*"
	anyDepth = "..."
)

// fullPath joins a request prefix and a path (elements appended, the path's
// origin unless the prefix has one), wildcards and all.
func fullPath(prefix, p *gpb.Path) *gpb.Path {
	out := &gpb.Path{Origin: p.GetOrigin(), Target: prefix.GetTarget()}
	if prefix.GetOrigin() != "" {
		out.Origin = prefix.GetOrigin()
	}
	out.Elem = concatElems(prefix.GetElem(), p.GetElem())
	return out
}

// concretePart returns the leading part of pattern without wildcards: the
// subtree every match lies in.
func concretePart(pattern *gpb.Path) *gpb.Path {
	out := &gpb.Path{Origin: pattern.GetOrigin()}
	for _, e := range pattern.GetElem() {
		if e.GetName() == anyElem || e.GetName() == anyDepth {
			break
		}
		wild := false
		for _, v := range e.GetKey() {
			if v == anyElem {
				wild = true
			}
		}
		if wild {
			break
		}
		out.Elem = append(out.Elem, e)
	}
	return out
}

// matchesOrUnder reports whether path is a match of pattern or lies under
// one: pattern's elements may be "*" (any one element), "..." (any number,
// including none), and list keys "*" (any value); a pattern element without
// a key matches any keys.
func matchesOrUnder(pattern, path []*gpb.PathElem) bool {
	// matched[k] reports whether the pattern's elements so far match
	// path[:k]: one pass per element, O(len(pattern)·len(path)). Trying
	// every split at each "..." instead takes time that grows
	// combinatorially with their number, and a client chooses the pattern.
	matched := make([]bool, len(path)+1)
	matched[0] = true
	for _, pe := range pattern {
		if pe.GetName() == anyDepth {
			for k := 1; k <= len(path); k++ {
				matched[k] = matched[k] || matched[k-1]
			}
			continue
		}
		alive := false
		for k := len(path); k > 0; k-- {
			matched[k] = matched[k-1] && elemMatches(pe, path[k-1])
			alive = alive || matched[k]
		}
		matched[0] = false
		if !alive {
			return false
		}
	}
	return slices.Contains(matched, true)
}

func elemMatches(pattern, e *gpb.PathElem) bool {
	if pattern.GetName() != anyElem && pattern.GetName() != e.GetName() {
		return false
	}
	for k, v := range pattern.GetKey() {
		got, ok := e.GetKey()[k]
		if !ok || (v != anyElem && v != got) {
			return false
		}
	}
	return true
}

// relativeTo returns p without the leading elements of prefix (which p
// lies under), for an update in a notification with that prefix.
func relativeTo(p, prefix *gpb.Path) *gpb.Path {
	n := min(len(prefix.GetElem()), len(p.GetElem()))
	return &gpb.Path{Elem: p.GetElem()[n:]}
}
