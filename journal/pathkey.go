package journal

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"

	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Bytes with a structural meaning in a path key. Bytes below escapeLimit in
// names, key names, key values and the origin are escaped, so these bytes
// only ever appear as structure.
const (
	sepElem     = 0x01 // starts a path element
	sepKey      = 0x02 // starts a list key name
	sepKeyValue = 0x03 // separates a list key name from its value
	escapeByte  = 0x04 // escapes the next byte (stored as byte + escapeShift)
	escapeLimit = 0x05
	escapeShift = 0x30
)

// PathKey returns the canonical byte encoding of a gNMI path used as the
// journal's key for it. The encoding guarantees:
//
//   - equal paths have equal keys, and only they: list keys are sorted by
//     name, the origin is part of the key, the target is ignored, and
//     element names are taken without module prefix
//     ("openconfig-system:config" is "config", as devices read it);
//   - the key of every path under P (see IsUnder) starts with PathKey(P)
//     followed by an element or list-key separator, so /a/bc is not under
//     /a/b;
//   - a parent sorts before its children.
//
// The key cannot be decoded; records keep the *gnmi.Path itself. Paths using
// the deprecated string Element field are not supported (ProposeChange
// refuses them).
func PathKey(p *gnmi.Path) []byte {
	var b []byte
	b = appendEscaped(b, p.GetOrigin())
	for _, e := range p.GetElem() {
		b = append(b, sepElem)
		b = appendEscaped(b, leaves.Name(e.GetName()))
		if len(e.GetKey()) == 0 {
			continue
		}
		names := make([]string, 0, len(e.GetKey()))
		for k := range e.GetKey() {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			b = append(b, sepKey)
			b = appendEscaped(b, k)
			b = append(b, sepKeyValue)
			b = appendEscaped(b, e.GetKey()[k])
		}
	}
	return b
}

func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < escapeLimit {
			b = append(b, escapeByte, c+escapeShift)
			continue
		}
		b = append(b, c)
	}
	return b
}

// subtree describes the keys at and under a path: the path's own key and the
// key prefixes of its descendants. A path whose last element has no list keys
// also covers every entry of that list (deleting /interfaces/interface
// deletes all interfaces).
type subtree struct {
	key      []byte
	prefixes [][]byte
}

func subtreeOf(p *gnmi.Path) subtree {
	key := PathKey(p)
	s := subtree{key: key, prefixes: [][]byte{append(slices.Clip(key), sepElem)}}
	elems := p.GetElem()
	if len(elems) > 0 && len(elems[len(elems)-1].GetKey()) == 0 {
		s.prefixes = append(s.prefixes, append(slices.Clip(key), sepKey))
	}
	return s
}

// contains reports whether key is the subtree's path or a descendant of it.
func (s subtree) contains(key []byte) bool {
	if bytes.Equal(key, s.key) {
		return true
	}
	for _, p := range s.prefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// IsUnder reports whether child is parent or a descendant of it (a path
// whose last element has no list keys covers all entries of that list).
func IsUnder(child, parent *gnmi.Path) bool {
	return subtreeOf(parent).contains(PathKey(child))
}

// PathString renders a path for messages and logs, e.g.
// "/interfaces/interface[name=eth0]/config/mtu" (prefixed by "origin:" when
// the path has an origin).
func PathString(p *gnmi.Path) string {
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

// Limits of a journaled path, far above any YANG model's paths. A path's
// PathKey is part of Badger keys, which Badger caps at 65,000 bytes: a
// longer one could be proposed but never committed.
const (
	// MaxPathElems is the most elements a journaled path may have.
	MaxPathElems = 256
	// MaxPathBytes is the most bytes a journaled path's PathKey may take:
	// about the bytes of its origin, names, key names and key values.
	MaxPathBytes = 16 << 10
)

// ValidatePath reports why a path cannot be journaled (nil if it can): it
// must use elem, not the deprecated element field, be within MaxPathElems
// and MaxPathBytes, and be concrete: every element named, no wildcard
// element, no empty key name or wildcard key. The error's text is meant
// for the client that sent the path.
func ValidatePath(p *gnmi.Path) error {
	if p == nil {
		return errors.New("missing path")
	}
	//lint:ignore SA1019 the deprecated field is read only to refuse it
	if len(p.GetElement()) > 0 {
		return errors.New("path uses the deprecated element field; send elem")
	}
	if n := len(p.GetElem()); n > MaxPathElems {
		return fmt.Errorf("path %s has %d elements; the journal takes paths of at most %d", ShortPathString(p), n, MaxPathElems)
	}
	if n := len(PathKey(p)); n > MaxPathBytes {
		return fmt.Errorf("path %s takes %d bytes; the journal takes paths of at most %d bytes of names, keys and values", ShortPathString(p), n, MaxPathBytes)
	}
	for n, e := range p.GetElem() {
		if e.GetName() == "" {
			named := ShortPathString(&gnmi.Path{Origin: p.GetOrigin(), Elem: p.GetElem()[:n]})
			return fmt.Errorf("path %s/... has an element without a name (element %d)", strings.TrimSuffix(named, "/"), n+1)
		}
		if strings.Contains(e.GetName(), "*") || strings.Contains(e.GetName(), "...") {
			return fmt.Errorf("path %s has a wildcard; paths must be concrete", ShortPathString(p))
		}
		for k, v := range e.GetKey() {
			if k == "" || v == "*" {
				return fmt.Errorf("path %s has an empty key name or a wildcard key", ShortPathString(p))
			}
		}
	}
	return nil
}

// ShortPathString is PathString for error messages about paths a client
// sent, which may be huge: at most 16 elements, 8 keys per element and 64
// bytes per name or value are rendered, the result is cut to about 160
// bytes, and "..." marks what was left out.
func ShortPathString(p *gnmi.Path) string {
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
	q := &gnmi.Path{Origin: short(p.GetOrigin())}
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
		q.Elem = append(q.Elem, &gnmi.PathElem{Name: short(e.GetName()), Key: keys})
	}
	s := PathString(q)
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
