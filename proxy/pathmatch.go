package proxy

import (
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
	if len(pattern) == 0 {
		return true
	}
	pe := pattern[0]
	if pe.GetName() == anyDepth {
		for skip := 0; skip <= len(path); skip++ {
			if matchesOrUnder(pattern[1:], path[skip:]) {
				return true
			}
		}
		return false
	}
	if len(path) == 0 || !elemMatches(pe, path[0]) {
		return false
	}
	return matchesOrUnder(pattern[1:], path[1:])
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
