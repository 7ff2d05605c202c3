package journal

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
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
//   - a path without origin and the same path with origin "openconfig"
//     have the same key: the gNMI mixed-schema rules default an
//     unspecified origin to openconfig (gnmipath.Origin), so they name one
//     leaf. Other origins stay distinct;
//   - the key of every path under P (see IsUnder) starts with PathKey(P)
//     followed by an element or list-key separator, so /a/bc is not under
//     /a/b;
//   - a parent sorts before its children.
//
// The key cannot be decoded; records keep the *gnmi.Path itself. Paths using
// the deprecated string Element field are not supported (ProposeChange
// refuses them).
func PathKey(p *gnmi.Path) []byte {
	b := make([]byte, 0, pathKeySize(p))
	b = appendEscaped(b, keyOrigin(p))
	var sorted [4]string
	for _, e := range p.GetElem() {
		b = append(b, sepElem)
		b = appendEscaped(b, leaves.Name(e.GetName()))
		b = appendKeys(b, e.GetKey(), &sorted)
	}
	return b
}

// appendKeys appends an element's list keys, sorted by name, to b;
// sorted is room for their names.
func appendKeys(b []byte, keys map[string]string, sorted *[4]string) []byte {
	if len(keys) == 0 {
		return b
	}
	names := sorted[:0]
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		b = append(b, sepKey)
		b = appendEscaped(b, k)
		b = append(b, sepKeyValue)
		b = appendEscaped(b, keys[k])
	}
	return b
}

// CoveringKeys yields the path keys of the paths that p is under in the
// sense of IsUnder (a delete of any of them deletes p): the root of p's
// origin, each element prefix of p and p itself, and, for each prefix
// ending in a list element with keys, that prefix with the keys removed,
// because a list path without keys covers all of the list's entries. That
// is at most 2×depth+1 keys, shortest first. Each is a prefix of
// PathKey(p), which is built once: they share its array, so a caller that
// keeps one past its iteration must copy it (string(key) does).
func CoveringKeys(p *gnmi.Path) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		var sorted [4]string
		b := make([]byte, 0, pathKeySize(p)) // never grown: the yielded prefixes stay as they are
		b = appendEscaped(b, keyOrigin(p))
		if !yield(b[:len(b):len(b)]) {
			return
		}
		for _, e := range p.GetElem() {
			b = append(b, sepElem)
			b = appendEscaped(b, leaves.Name(e.GetName()))
			if len(e.GetKey()) > 0 {
				if !yield(b[:len(b):len(b)]) {
					return
				}
				b = appendKeys(b, e.GetKey(), &sorted)
			}
			if !yield(b[:len(b):len(b)]) {
				return
			}
		}
	}
}

// keyOrigin is the origin PathKey encodes. A variable only so that tests
// can write a journal as format 4 did, with the origin as written.
var keyOrigin = gnmipath.Origin

// pathKeySize is len(PathKey(p)), without building the key.
func pathKeySize(p *gnmi.Path) int {
	n := escapedSize(keyOrigin(p))
	for _, e := range p.GetElem() {
		n += 1 + escapedSize(leaves.Name(e.GetName()))
		for k, v := range e.GetKey() {
			n += 2 + escapedSize(k) + escapedSize(v)
		}
	}
	return n
}

// escapedSize is len(appendEscaped(nil, s)).
func escapedSize(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if s[i] < escapeLimit {
			n++
		}
	}
	return n
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
func (s subtree) contains(key []byte) bool { return keyUnder(s.key, key) }

// keyUnder reports whether key is the path key of parentKey's path or of a
// path under it (IsUnder), from the keys alone: key starts with parentKey,
// then ends or goes on with an element, or with list keys if parentKey's
// last element has none (a list path without keys covers its entries;
// subtreeOf's prefixes).
func keyUnder(parentKey, key []byte) bool {
	if !bytes.HasPrefix(key, parentKey) {
		return false
	}
	if len(key) == len(parentKey) {
		return true
	}
	switch key[len(parentKey)] {
	case sepElem:
		return true
	case sepKey:
		last := bytes.LastIndexByte(parentKey, sepElem)
		return last >= 0 && bytes.IndexByte(parentKey[last+1:], sepKey) < 0
	}
	return false
}

// Outermost sorts paths in key order and returns those not at or under
// another (an equal path once): the subtrees that hold all of them. It
// reuses paths' array.
func Outermost(paths []*gnmi.Path) []*gnmi.Path {
	slices.SortFunc(paths, func(a, b *gnmi.Path) int { return slices.Compare(PathKey(a), PathKey(b)) })
	kept := paths[:0]
	for _, p := range paths {
		if len(kept) == 0 || !IsUnder(p, kept[len(kept)-1]) {
			kept = append(kept, p)
		}
	}
	return kept
}

// IsUnder reports whether child is parent or a descendant of it (a path
// whose last element has no list keys covers all entries of that list).
func IsUnder(child, parent *gnmi.Path) bool {
	return subtreeOf(parent).contains(PathKey(child))
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
	return validatePath(p, false)
}

// ValidateDeletePath is ValidatePath for the path of a delete, which may
// hold wildcards (gNMI 3.4.6: the target expands them): "*" as an element
// name or a key value, or a key left out. The journal expands them
// against the committed values when it commits the change (its
// tombstones are the matches'); "..." cannot be recorded exactly and is
// refused.
func ValidateDeletePath(p *gnmi.Path) error {
	return validatePath(p, true)
}

// IsWildcard reports whether p holds a wildcard element name or key value.
func IsWildcard(p *gnmi.Path) bool {
	return slices.ContainsFunc(p.GetElem(), wildElem)
}

// wildElem reports whether e's name or one of its key values is "*".
// Unlike gnmipath.Wild, it does not count an element named "..." (which
// validatePath refuses).
func wildElem(e *gnmi.PathElem) bool {
	if e.GetName() == gnmipath.AnyElem {
		return true
	}
	for _, v := range e.GetKey() {
		if v == gnmipath.AnyElem {
			return true
		}
	}
	return false
}

func validatePath(p *gnmi.Path, wildcards bool) error {
	if p == nil {
		return errors.New("missing path")
	}
	//lint:ignore SA1019 the deprecated field is read only to refuse it
	if len(p.GetElement()) > 0 {
		return errors.New("path uses the deprecated element field; send elem")
	}
	if n := len(p.GetElem()); n > MaxPathElems {
		return fmt.Errorf("path %s has %d elements; the journal takes paths of at most %d", gnmipath.Short(p), n, MaxPathElems)
	}
	if n := pathKeySize(p); n > MaxPathBytes {
		return fmt.Errorf("path %s takes %d bytes; the journal takes paths of at most %d bytes of names, keys and values", gnmipath.Short(p), n, MaxPathBytes)
	}
	for n, e := range p.GetElem() {
		if e.GetName() == "" {
			named := gnmipath.Short(&gnmi.Path{Origin: p.GetOrigin(), Elem: p.GetElem()[:n]})
			return fmt.Errorf("path %s/... has an element without a name (element %d)", strings.TrimSuffix(named, "/"), n+1)
		}
		if strings.Contains(e.GetName(), "...") {
			return fmt.Errorf("path %s has the wildcard \"...\": the journal cannot record exactly what it deletes; name the paths", gnmipath.Short(p))
		}
		if strings.Contains(e.GetName(), "*") && !(wildcards && e.GetName() == gnmipath.AnyElem) {
			return fmt.Errorf("path %s has a wildcard; paths must be concrete (only a delete's may hold \"*\")", gnmipath.Short(p))
		}
		for k, v := range e.GetKey() {
			if k == "" || v == "*" && !wildcards {
				return fmt.Errorf("path %s has an empty key name or a wildcard key (only a delete's may)", gnmipath.Short(p))
			}
		}
	}
	return nil
}
