package leaves

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
)

// List names a list of the device's data tree and its key names: Path is
// the list's schema path (origin and element names, no keys, no module
// prefixes), Keys its key names, sorted.
type List struct {
	Path *gpb.Path
	Keys []string
}

// ListsOf returns the lists a path goes through: each element with keys is
// an entry of a list whose key names are those keys. p is not modified.
func ListsOf(p *gpb.Path) []List {
	var out []List
	for n, e := range p.GetElem() {
		if len(e.GetKey()) > 0 {
			out = append(out, ListAt(p, n))
		}
	}
	return out
}

// ListAt is the list p's element n (one with keys) is an entry of: the
// path to it, without keys or module prefixes, and its key names, sorted.
func ListAt(p *gpb.Path, n int) List {
	lp := &gpb.Path{Origin: p.GetOrigin(), Elem: make([]*gpb.PathElem, n+1)}
	for k, pe := range p.GetElem()[:n+1] {
		lp.Elem[k] = &gpb.PathElem{Name: Name(pe.GetName())}
	}
	return List{Path: lp, Keys: slices.Sorted(maps.Keys(p.GetElem()[n].GetKey()))}
}

// Keys holds the key names of lists, learned from keyed paths (see
// Learn), for decomposing JSON lists without a schema. It is safe for
// concurrent use.
type Keys struct {
	mu    sync.RWMutex
	lists map[string][]string // listID -> sorted key names
}

// NewKeys returns Keys knowing lists.
func NewKeys(lists ...List) *Keys {
	k := &Keys{lists: make(map[string][]string)}
	for _, l := range lists {
		k.add(l)
	}
	return k
}

// listID identifies a list by its origin (none and "openconfig" being one,
// gnmipath.Origin) and element names.
func listID(origin string, names []string) string {
	return gnmipath.CanonicalOrigin(origin) + "\x00" + strings.Join(names, "/")
}

// pathID identifies the list p names (origin and element names without
// module prefixes). Not a rendering of p (gnmipath.String): the list is
// the same whatever keys p names and whichever module prefixes it uses.
func pathID(p *gpb.Path) string {
	names := make([]string, len(p.GetElem()))
	for n, e := range p.GetElem() {
		names[n] = Name(e.GetName())
	}
	return listID(p.GetOrigin(), names)
}

// add records l, keeping the larger key set if l's list is known with
// others (a path may name an entry by fewer keys than the list has, as a
// delete or a subscription may). It reports whether anything changed.
func (k *Keys) add(l List) bool {
	id := pathID(l.Path)
	have, ok := k.lists[id]
	if ok && (len(have) >= len(l.Keys) || !containsAll(l.Keys, have)) {
		return false
	}
	k.lists[id] = slices.Clone(l.Keys)
	return true
}

// knowsAll reports whether every list p goes through is known with at
// least as many keys as p names it by: Learn's question for every Set,
// answered without building the lists (k.mu is held).
func (k *Keys) knowsAll(p *gpb.Path) bool {
	var buf [256]byte
	id := append(append(buf[:0], gnmipath.CanonicalOrigin(p.GetOrigin())...), 0) // listID, element by element
	for n, e := range p.GetElem() {
		if n > 0 {
			id = append(id, '/')
		}
		id = append(id, Name(e.GetName())...)
		if len(e.GetKey()) == 0 {
			continue
		}
		if have, ok := k.lists[string(id)]; !ok || len(have) < len(e.GetKey()) {
			return false
		}
	}
	return true
}

func containsAll(set, sub []string) bool {
	for _, s := range sub {
		if !slices.Contains(set, s) {
			return false
		}
	}
	return true
}

// Learn records the lists p goes through (ListsOf) and returns those it
// did not know. Only paths that must name entries by all their keys
// should be learned from: the paths of a Set's updates and replaces, and
// the paths in a device's answers.
func (k *Keys) Learn(p *gpb.Path) []List {
	if k == nil {
		return nil
	}
	k.mu.RLock()
	known := k.knowsAll(p)
	k.mu.RUnlock()
	if known {
		return nil
	}
	lists := ListsOf(p)
	var learned []List
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range lists {
		if k.add(l) {
			learned = append(learned, l)
		}
	}
	return learned
}

// lookup returns the key names of the list at origin and names.
func (k *Keys) lookup(origin string, names []string) ([]string, bool) {
	if k == nil {
		return nil, false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	keys, ok := k.lists[listID(origin, names)]
	return keys, ok
}

// Lists returns every list known, in no particular order.
func (k *Keys) Lists() []List {
	if k == nil {
		return nil
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]List, 0, len(k.lists))
	for id, keys := range k.lists {
		origin, names, _ := strings.Cut(id, "\x00")
		p := &gpb.Path{Origin: origin}
		for _, n := range strings.Split(names, "/") {
			p.Elem = append(p.Elem, &gpb.PathElem{Name: n})
		}
		out = append(out, List{Path: p, Keys: slices.Clone(keys)})
	}
	return out
}

// Name returns an element or member name without its module prefix
// ("openconfig-system:config" → "config"). YANG identifiers hold no colon,
// so anything before one is a prefix.
func Name(s string) string {
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// KeyMirror reports whether p is where OpenConfig repeats a list key in
// the entry's config container (…/interface[name=eth0]/config/name), and
// returns the entry. A device holds that leaf for as long as the entry
// exists: deleting it alone would break the entry.
func KeyMirror(p *gpb.Path) (*gpb.Path, bool) {
	elems := p.GetElem()
	n := len(elems)
	if n < 3 || Name(elems[n-2].GetName()) != "config" || len(elems[n-2].GetKey()) > 0 || len(elems[n-1].GetKey()) > 0 {
		return nil, false
	}
	if _, ok := elems[n-3].GetKey()[Name(elems[n-1].GetName())]; !ok {
		return nil, false
	}
	return &gpb.Path{Origin: p.GetOrigin(), Elem: elems[:n-2]}, true
}

// EntryConfig reports whether p is the config container of a list entry
// (…/interface[name=eth0]/config), which in OpenConfig holds the entry's
// key mirror (see KeyMirror).
func EntryConfig(p *gpb.Path) bool {
	elems := p.GetElem()
	n := len(elems)
	return n >= 2 && Name(elems[n-1].GetName()) == "config" && len(elems[n-1].GetKey()) == 0 && len(elems[n-2].GetKey()) > 0
}

// KeepsEntry reports whether p is an OpenConfig list entry's key mirror or
// the config container holding it (KeyMirror, EntryConfig): a device holds
// both for as long as the entry exists and deleting either alone breaks
// it, so a delete of p is never sent by itself (replaying changes or going
// back to a point); deleting the entry, or above it, removes p.
func KeepsEntry(p *gpb.Path) bool {
	if EntryConfig(p) {
		return true
	}
	_, ok := KeyMirror(p)
	return ok
}

// LearnOpenConfig learns, from data, the JSON or JSON_IETF value a device
// answered a read of at with, the keys of the lists it holds that follow
// OpenConfig's convention (the OpenConfig style guide): an entry's direct
// leaves are exactly its keys, each repeated with the same value in the
// entry's config container. A list whose entries do not all follow it is
// left unknown. It returns the lists it did not know.
func (k *Keys) LearnOpenConfig(at *gpb.Path, data []byte) []List {
	var v any
	if k == nil || json.Unmarshal(data, &v) != nil {
		return nil
	}
	elems := make([]*gpb.PathElem, len(at.GetElem()))
	for n, e := range at.GetElem() {
		elems[n] = &gpb.PathElem{Name: Name(e.GetName())}
	}
	var learned []List
	var walk func(elems []*gpb.PathElem, v any)
	walk = func(elems []*gpb.PathElem, v any) {
		switch v := v.(type) {
		case map[string]any:
			for name, child := range v {
				walk(append(slices.Clip(elems), &gpb.PathElem{Name: Name(name)}), child)
			}
		case []any:
			if len(elems) == 0 {
				return
			}
			keys := openConfigKeys(v)
			if keys == nil {
				return
			}
			l := List{Path: &gpb.Path{Origin: at.GetOrigin(), Elem: elems}, Keys: keys}
			k.mu.Lock()
			if k.add(l) {
				learned = append(learned, l)
			}
			k.mu.Unlock()
			for _, entry := range v {
				walk(elems, entry)
			}
		}
	}
	walk(elems, v)
	return learned
}

// openConfigKeys returns the key names of a JSON list whose entries follow
// OpenConfig's convention (see LearnOpenConfig), sorted; nil if they do not.
func openConfigKeys(entries []any) []string {
	var keys []string
	for n, e := range entries {
		entry, ok := e.(map[string]any)
		if !ok {
			return nil
		}
		var config map[string]any
		var direct []string
		for name, v := range entry {
			switch v := v.(type) {
			case map[string]any:
				if Name(name) == "config" {
					config = v
				}
			case []any:
			default:
				direct = append(direct, name)
			}
		}
		if config == nil || len(direct) == 0 {
			return nil
		}
		for _, name := range direct {
			mirror, ok := lookupMember(config, Name(name))
			if !ok || !reflect.DeepEqual(mirror, entry[name]) {
				return nil
			}
		}
		names := make([]string, len(direct))
		for i, d := range direct {
			names[i] = Name(d)
		}
		slices.Sort(names)
		if n == 0 {
			keys = names
		} else if !slices.Equal(keys, names) {
			return nil
		}
	}
	return keys
}

// lookupMember returns the member of obj named name, with or without a
// module prefix.
func lookupMember(obj map[string]any, name string) (any, bool) {
	for k, v := range obj {
		if Name(k) == name {
			return v, true
		}
	}
	return nil, false
}
