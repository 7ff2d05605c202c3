package journal

import (
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Keys returns the list keys the journal knows: learned from the keyed
// paths of every proposal (and kept under nsListKeys), plus whatever the
// caller teaches it (Learn). The journal decomposes JSON lists with them
// when it has no schema.
func (j *Journal) Keys() *leaves.Keys { return j.keys }

// listSet collects the lists of a proposal's paths, each once.
type listSet struct {
	seen  map[string]bool
	lists []leaves.List
	id    []byte // listSetID's buffer
}

func newListSet() *listSet { return &listSet{seen: make(map[string]bool)} }

func (s *listSet) add(p *gnmi.Path) {
	if !hasKeys(p) {
		return
	}
	for n, e := range p.GetElem() {
		if len(e.GetKey()) == 0 {
			continue
		}
		s.id = listSetID(s.id[:0], p, n)
		if !s.seen[string(s.id)] {
			s.seen[string(s.id)] = true
			s.lists = append(s.lists, leaves.ListAt(p, n))
		}
	}
}

// listSetID appends to b what identifies leaves.ListAt(p, n): the
// PathKey of its path and its key names, sorted, without building it.
func listSetID(b []byte, p *gnmi.Path, n int) []byte {
	b = appendEscaped(b, keyOrigin(p))
	for _, e := range p.GetElem()[:n+1] {
		b = append(b, sepElem)
		b = appendEscaped(b, leaves.Name(e.GetName()))
	}
	var sorted [4]string
	names := sorted[:0]
	for k := range p.GetElem()[n].GetKey() {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		b = append(b, 0)
		b = appendEscaped(b, k)
	}
	return b
}

func hasKeys(p *gnmi.Path) bool {
	for _, e := range p.GetElem() {
		if len(e.GetKey()) > 0 {
			return true
		}
	}
	return false
}

// recordLists keeps the key names of lists not yet kept (or kept with
// fewer keys). What is kept is read once per list, then known to the
// writer (Journal.keptLists).
func (w *writeTxn) recordLists(lists []leaves.List) error {
	for _, l := range lists {
		key := valueKey(nsListKeys, PathKey(l.Path))
		if n, ok := w.listKeysKept(string(key)); ok && n >= len(l.Keys) {
			continue
		}
		have := &ListKeys{}
		found, err := w.get(key, have)
		if err != nil {
			return err
		}
		if found && len(have.GetKeys()) >= len(l.Keys) {
			w.noteListKeys(string(key), len(have.GetKeys()))
			continue
		}
		if err := w.put(key, &ListKeys{List: l.Path, Keys: slices.Clone(l.Keys)}); err != nil {
			return err
		}
		w.noteListKeys(string(key), len(l.Keys))
	}
	return nil
}

// listKeysKept returns the number of keys the list-keys record key is
// known to hold, in this transaction or a durable one.
func (w *writeTxn) listKeysKept(key string) (int, bool) {
	if n, ok := w.listsKept[key]; ok {
		return n, true
	}
	n, ok := w.keptLists[key]
	return n, ok
}

// noteListKeys records that the list-keys record key holds n keys.
func (w *writeTxn) noteListKeys(key string, n int) {
	if w.listsKept == nil {
		w.listsKept = make(map[string]int)
	}
	w.listsKept[key] = n
}

// loadListKeys reads the kept list keys.
func loadListKeys(db *badger.DB) (*leaves.Keys, error) {
	var lists []leaves.List
	err := db.View(func(txn *badger.Txn) error {
		return iteratePrefix(txn, nsListKeys, func(key, val []byte) error {
			lk := &ListKeys{}
			if err := decodeRecord(val, lk); err != nil {
				return fmt.Errorf("decode %q: %w: %w", key, err, ErrCorrupt)
			}
			lists = append(lists, leaves.List{Path: lk.GetList(), Keys: lk.GetKeys()})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("journal: read list keys: %w", err)
	}
	return leaves.NewKeys(lists...), nil
}
