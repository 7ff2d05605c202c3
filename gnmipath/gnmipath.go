// Package gnmipath renders, joins and matches gNMI paths the one way the
// sidecar's packages do: String for messages, logs and the introspection
// tree, Short for error messages about paths a client sent, Join for a
// request's prefix and path, MatchesOrUnder for request paths with
// wildcards.
package gnmipath

import (
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
)

// Wildcards of gNMI paths (gNMI specification 2.2.2.1): AnyElem stands for
// any one element (or, as a key value, any value), AnyDepth for any number
// of elements, including none.
const (
	AnyElem  = "*"
	AnyDepth = "..."
)

// String renders a path, e.g. "/interfaces/interface[name=eth0]/config/mtu"
// (prefixed by "origin:" when the path has an origin): keys sorted by
// name, `\`, `=` and `]` in key values escaped, so that the string is
// unique per path. The target is not rendered.
func String(p *gpb.Path) string {
	// Not ygot.PathToString: it cleans the string like a file path, which
	// rewrites key values holding "//" or "/../" (and drops elements).
	elems, err := ygot.PathToStrings(p)
	s := "/" + strings.Join(elems, "/")
	if err != nil {
		s = p.String()
	}
	if p.GetOrigin() != "" {
		s = p.GetOrigin() + ":" + s
	}
	return s
}

// Short is String for error messages about paths a client sent, which may
// be huge: at most 16 elements, 8 keys per element and 64 bytes per name
// or value are rendered, the result is cut to about 160 bytes, and "..."
// marks what was left out.
func Short(p *gpb.Path) string {
	const maxElems, maxKeys, maxName, maxLen = 16, 8, 64, 160
	cut := false
	short := func(s string) string {
		if len(s) <= maxName {
			return s
		}
		cut = true
		return truncate(s, maxName)
	}
	elems := p.GetElem()
	if len(elems) > maxElems {
		elems, cut = elems[:maxElems], true
	}
	q := &gpb.Path{Origin: short(p.GetOrigin())}
	for _, e := range elems {
		names := slices.Sorted(maps.Keys(e.GetKey()))
		if len(names) > maxKeys {
			names, cut = names[:maxKeys], true
		}
		var keys map[string]string
		for _, k := range names {
			if keys == nil {
				keys = make(map[string]string, len(names))
			}
			keys[short(k)] = short(e.GetKey()[k])
		}
		q.Elem = append(q.Elem, &gpb.PathElem{Name: short(e.GetName()), Key: keys})
	}
	s := String(q)
	if len(s) > maxLen {
		s, cut = truncate(s, maxLen), true
	}
	if cut {
		s += "..."
	}
	return s
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Join joins a request's prefix and one of its paths into the full path:
// the prefix's elements then the path's, and the prefix's origin, or the
// path's if the prefix has none. The target is dropped: gNMI allows one
// only in the prefix, where it names the device rather than a path. Join
// does not check that the two origins agree; its callers say how they
// refuse a contradiction. The result shares no slice with its arguments.
func Join(prefix, p *gpb.Path) *gpb.Path {
	out := &gpb.Path{Origin: p.GetOrigin(), Elem: Concat(prefix.GetElem(), p.GetElem())}
	if o := prefix.GetOrigin(); o != "" {
		out.Origin = o
	}
	return out
}

// Concat returns a new slice holding a then b (never sharing a's array, so
// sibling paths built from one base cannot overwrite each other).
func Concat(a, b []*gpb.PathElem) []*gpb.PathElem {
	out := make([]*gpb.PathElem, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// Relative returns p without the leading elements of prefix (which p lies
// under), for an update in a notification with that prefix.
func Relative(p, prefix *gpb.Path) *gpb.Path {
	n := min(len(prefix.GetElem()), len(p.GetElem()))
	return &gpb.Path{Elem: p.GetElem()[n:]}
}

// Wild reports whether e is a wildcard element or has a wildcard key.
func Wild(e *gpb.PathElem) bool {
	if e.GetName() == AnyElem || e.GetName() == AnyDepth {
		return true
	}
	for _, v := range e.GetKey() {
		if v == AnyElem {
			return true
		}
	}
	return false
}

// MatchesOrUnder reports whether path is a match of pattern or lies under
// one: pattern's elements may be AnyElem (any one element), AnyDepth (any
// number, including none), and list keys AnyElem (any value); a pattern
// element without a key matches any keys.
func MatchesOrUnder(pattern, path []*gpb.PathElem) bool {
	// matched[k] reports whether the pattern's elements so far match
	// path[:k]: one pass per element, O(len(pattern)·len(path)). Trying
	// every split at each AnyDepth instead takes time that grows
	// combinatorially with their number, and a client chooses the pattern.
	matched := make([]bool, len(path)+1)
	matched[0] = true
	for _, pe := range pattern {
		if pe.GetName() == AnyDepth {
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
	if pattern.GetName() != AnyElem && pattern.GetName() != e.GetName() {
		return false
	}
	for k, v := range pattern.GetKey() {
		got, ok := e.GetKey()[k]
		if !ok || (v != AnyElem && v != got) {
			return false
		}
	}
	return true
}

// TargetPrefix is the prefix of a request to the gNMI target target: one
// naming only the target, nil if target is "" (none).
func TargetPrefix(target string) *gpb.Path {
	if target == "" {
		return nil
	}
	return &gpb.Path{Target: target}
}

// DefaultOrigin is the origin of a path that names none: the gNMI
// mixed-schema rules (rpc/gnmi/mixed-schema.md) say "where the origin field
// is unspecified, its value should default to openconfig".
const DefaultOrigin = "openconfig"

// Origin returns p's origin as the sidecar compares origins: "" both for
// none and for DefaultOrigin, which name the same tree. Other origins are
// returned as they are.
func Origin(p *gpb.Path) string {
	return CanonicalOrigin(p.GetOrigin())
}

// CanonicalOrigin returns origin, or "" for DefaultOrigin (see Origin).
func CanonicalOrigin(origin string) string {
	if origin == DefaultOrigin {
		return ""
	}
	return origin
}

// SameOrigin reports whether a and b have the same origin, no origin and
// DefaultOrigin being the same.
func SameOrigin(a, b *gpb.Path) bool {
	return Origin(a) == Origin(b)
}
