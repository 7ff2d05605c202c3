package journal

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// Up to format 4, PathKey kept a path's origin as it was written, so a
// path without origin and the same path with origin "openconfig" were two
// records of what the device holds as one leaf (gNMI mixed-schema rules:
// no origin means openconfig). Format 5 keys both as the first
// (gnmipath.Origin). upgradeOrigins brings a format 2 to 4 journal's
// records to it:
//
//   - the history deltas and the kept proposals' values, where both
//     spellings of a leaf occur, are rewritten as if format 5 had
//     recorded them: the leaf's value at any time is whichever spelling
//     holds the later write (originUpgrade.later), one entry per leaf in
//     a delta, one value per leaf in a proposal, and a proposal's
//     rollback value is what the leaf held (so merged) before it was
//     committed. This step runs in one transaction with a marker
//     (keyOriginsMerged), as running it twice would merge merged states
//     again;
//   - then every committed, applied, out-of-sync and list-keys record
//     keyed with origin "openconfig" moves to the key without, in
//     chunks; where a record of the other spelling is there already, the
//     later write stays (originUpgrade.later; list keys: the record with
//     more keys). Each chunk moves whole records, so it can run again.
//
// The last transaction flips the format and drops the marker.
func (j *Journal) upgradeOrigins(from uint32) error {
	var marked bool
	err := j.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(keyOriginsMerged)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		marked = err == nil
		return err
	})
	if err != nil {
		return err
	}
	u := &originUpgrade{j: j}
	if err := u.lastSpellings(); err != nil {
		return err
	}
	merged := 0
	if !marked {
		if merged, err = u.mergeSpellings(); err != nil {
			return err
		}
	}
	moved := 0
	for _, ns := range [][]byte{nsCommitted, nsApplied, nsOutOfSync, nsListKeys} {
		for {
			n, err := u.moveOpenconfigKeys(ns)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			moved += n
		}
	}
	err = j.update(func(txn *badger.Txn) error {
		w := &writeTxn{txn: txn, now: j.opts.Clock()}
		if err := w.delete(keyOriginsMerged); err != nil {
			return err
		}
		return w.put(keyMeta, &journalpb.Meta{Format: formatVersion})
	})
	if err != nil {
		return err
	}
	j.log.Info("journal upgraded (a path without origin and with origin openconfig are one leaf)", "from", from, "format", formatVersion,
		"records_moved", moved, "leaves_merged", merged)
	return nil
}

// keyOriginsMerged marks, during the upgrade to format 5, that the history
// and the proposals were rewritten (mergeSpellings).
var keyOriginsMerged = []byte("u5")

// openconfigOrigin is the origin format 4 wrote at the start of a path key.
var openconfigOrigin = []byte(gnmipath.DefaultOrigin)

// format4Canonical returns the format-5 key of a format-4 path key, and
// whether it differs (the format-4 key had origin "openconfig").
func format4Canonical(pathKey []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(pathKey, openconfigOrigin)
	if !ok || len(rest) > 0 && rest[0] != sepElem {
		return pathKey, false
	}
	return rest, true
}

// originUpgrade is the upgrade to format 5 (upgradeOrigins).
type originUpgrade struct {
	j *Journal
	// last: for a kept proposal that wrote both spellings of a leaf, the
	// spelling it wrote last (spellingOf), by index and leaf key.
	last map[uint64]map[string]int
}

// lastSpellings sets u.last from the kept proposals' operations, in the
// order the device applied them.
func (u *originUpgrade) lastSpellings() error {
	u.last = map[uint64]map[string]int{}
	return u.j.db.View(func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		for i := max(c.GetFirstIndex(), 1); i <= c.GetLastIndex(); i++ {
			p, err := loadProposal(txn, c, i)
			if err != nil {
				return err
			}
			seen := map[string]uint8{}
			last := map[string]int{}
			for _, op := range p.GetChange().GetOps() {
				for _, unit := range Units(op) {
					pv := &PathValue{Path: unit.GetPath()}
					if gnmipath.Origin(pv.GetPath()) != "" {
						continue
					}
					k := string(PathKey(pv.GetPath()))
					seen[k] |= 1 << spellingOf(pv)
					last[k] = spellingOf(pv)
				}
			}
			for k, mask := range seen {
				if mask != 3 {
					continue
				}
				if u.last[i] == nil {
					u.last[i] = map[string]int{}
				}
				u.last[i][k] = last[k]
			}
		}
		return nil
	})
}

// later returns which of a and b, two records of one leaf under its two
// spellings (either may be nil), format 5 keeps: the later write, by
// proposal index; at the same index (one Set wrote both) a value over a
// tombstone (gNMI applies a Set's deletes first), then the spelling the
// Set wrote last if its proposal is kept, else the path without origin,
// so that the choice is the same wherever it is made.
func (u *originUpgrade) later(a, b *PathValue) *PathValue {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.GetIndex() != b.GetIndex():
		if a.GetIndex() > b.GetIndex() {
			return a
		}
		return b
	case a.GetDeleted() != b.GetDeleted():
		if b.GetDeleted() {
			return a
		}
		return b
	case spellingOf(a) == spellingOf(b):
		return a
	}
	if n, ok := u.last[a.GetIndex()][string(PathKey(a.GetPath()))]; ok {
		if spellingOf(b) == n {
			return b
		}
		return a
	}
	if spellingOf(b) == 0 {
		return b
	}
	return a
}

// spellings are the two records of one leaf: [0] without origin, [1] with
// origin "openconfig".
type spellings [2]*PathValue

func spellingOf(p *journalpb.PathValue) int {
	if p.GetPath().GetOrigin() == gnmipath.DefaultOrigin {
		return 1
	}
	return 0
}

func (u *originUpgrade) merged(s *spellings) *PathValue { return u.later(s[0], s[1]) }

// mergeSpellings rewrites the history deltas and the kept proposals in
// which both spellings of a leaf occur (see upgradeOrigins), and sets the
// marker, in one transaction. It returns the number of such leaves.
func (u *originUpgrade) mergeSpellings() (int, error) {
	j := u.j
	type delta struct {
		key []byte
		d   *HistoryDelta
	}
	var (
		c         *Configuration
		deltas    []delta // those with an entry of a leaf with both spellings
		proposals []*Proposal
		state     = map[string]*spellings{} // per leaf with both spellings
	)
	err := j.db.View(func(txn *badger.Txn) error {
		var err error
		if c, err = loadConfiguration(txn); err != nil {
			return err
		}
		// Which leaves have both spellings: in the values, the history and
		// the proposals.
		seen := map[string]uint8{}
		note := func(pv *PathValue) {
			if pv == nil || gnmipath.Origin(pv.GetPath()) != "" {
				return
			}
			seen[string(PathKey(pv.GetPath()))] |= 1 << spellingOf(pv)
		}
		for _, ns := range [][]byte{nsCommitted, nsApplied} {
			err := iteratePrefix(txn, valueKey(ns, openconfigOrigin), func(key, _ []byte) error {
				canon, ok := format4Canonical(key[len(ns):])
				if !ok {
					return nil
				}
				if _, err := txn.Get(valueKey(ns, canon)); err == nil {
					seen[string(canon)] = 3
				} else if !errors.Is(err, badger.ErrKeyNotFound) {
					return err
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		history := func(fn func(key []byte, d *HistoryDelta)) error {
			return iteratePrefix(txn, nsHistory, func(key, val []byte) error {
				d := &HistoryDelta{}
				if err := decodeRecord(val, d); err != nil {
					return fmt.Errorf("decode %q: %w: %w", key, err, ErrCorrupt)
				}
				fn(key, d)
				return nil
			})
		}
		kept := func(fn func(p *Proposal)) error {
			for i := max(c.GetFirstIndex(), 1); i <= c.GetLastIndex(); i++ {
				p, err := loadProposal(txn, c, i)
				if err != nil {
					return err
				}
				fn(p)
			}
			return nil
		}
		err = history(func(_ []byte, d *HistoryDelta) {
			for _, e := range d.GetEntries() {
				note(e.GetBefore())
				note(e.GetAfter())
			}
		})
		if err != nil {
			return err
		}
		err = kept(func(p *Proposal) {
			for _, pv := range p.GetChange().GetValues() {
				note(pv)
			}
			for _, pv := range p.GetRollback().GetValues() {
				note(pv)
			}
		})
		if err != nil {
			return err
		}
		for k, mask := range seen {
			if mask == 3 {
				state[k] = &spellings{}
			}
		}
		if len(state) == 0 {
			return nil
		}
		// The proposals and deltas to rewrite, and each spelling's value
		// before the oldest delta kept: the Before of its oldest entry, or
		// its committed value if no delta kept changed it.
		touches := func(pv *PathValue) bool {
			_, ok := state[string(PathKey(pv.GetPath()))]
			return ok
		}
		err = kept(func(p *Proposal) {
			if slices.ContainsFunc(p.GetChange().GetValues(), touches) || slices.ContainsFunc(p.GetRollback().GetValues(), touches) {
				proposals = append(proposals, p)
			}
		})
		if err != nil {
			return err
		}
		started := map[string]*[2]bool{}
		err = history(func(key []byte, d *HistoryDelta) {
			keep := false
			for _, e := range d.GetEntries() {
				pv := entryValue(e)
				k := string(PathKey(pv.GetPath()))
				s, ok := state[k]
				if !ok {
					continue
				}
				keep = true
				if started[k] == nil {
					started[k] = &[2]bool{}
				}
				if n := spellingOf(pv); !started[k][n] {
					started[k][n] = true
					s[n] = e.GetBefore()
				}
			}
			if keep {
				deltas = append(deltas, delta{key: key, d: d})
			}
		})
		if err != nil {
			return err
		}
		for k, s := range state {
			for n, origin := range [][]byte{nil, openconfigOrigin} {
				if started[k] != nil && started[k][n] {
					continue
				}
				pv := &PathValue{}
				found, err := getRecord(txn, valueKey(nsCommitted, append(slicesClone(origin), k...)), pv)
				if err != nil {
					return err
				}
				if found {
					s[n] = pv
				}
			}
		}
		return nil
	})
	if err != nil || len(state) == 0 {
		return 0, err
	}

	// The deltas, oldest first: per leaf with both spellings, one entry
	// from the merged value before to the merged value after.
	before := map[uint64]map[string]*PathValue{} // proposal → leaf → merged value before its commit
	for _, d := range deltas {
		var entries []*HistoryEntry
		at := map[string]int{} // leaf → its entry in entries
		var touched []string
		for _, e := range d.d.GetEntries() {
			pv := entryValue(e)
			k := string(PathKey(pv.GetPath()))
			s, ok := state[k]
			if !ok {
				entries = append(entries, e)
				continue
			}
			if _, ok := at[k]; !ok {
				at[k] = len(entries)
				entries = append(entries, &HistoryEntry{Before: u.merged(s)})
				touched = append(touched, k)
			}
			s[spellingOf(pv)] = e.GetAfter()
		}
		for _, k := range touched {
			entries[at[k]].After = u.merged(state[k])
		}
		if d.d.GetKind() == HistoryKindCommitChange {
			if before[d.d.GetProposal()] == nil {
				before[d.d.GetProposal()] = map[string]*PathValue{}
			}
			for _, k := range touched {
				before[d.d.GetProposal()][k] = entries[at[k]].GetBefore()
			}
		}
		d.d.Entries = entries
	}

	err = j.update(func(txn *badger.Txn) error {
		w := &writeTxn{txn: txn, now: j.opts.Clock()}
		for _, d := range deltas {
			if err := w.put(d.key, d.d); err != nil {
				return err
			}
		}
		for _, p := range proposals {
			if !u.mergeProposal(p, state, before[p.GetIndex()]) {
				continue
			}
			if err := w.put(proposalKey(p.GetIndex()), p); err != nil {
				return err
			}
		}
		return w.putEmpty(keyOriginsMerged)
	})
	if errors.Is(err, badger.ErrTxnTooBig) {
		return 0, fmt.Errorf("merging the history of paths written both without origin and with origin openconfig: %w; open it with a larger memtable (journal Options.MemTableSize): %w", err, ErrFormat)
	}
	return len(state), err
}

// entryValue is the value whose path names an entry's leaf.
func entryValue(e *HistoryEntry) *PathValue {
	if e.GetAfter() != nil {
		return e.GetAfter()
	}
	return e.GetBefore()
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// mergeProposal makes p's values hold one value per leaf of state: its
// change's value, the later of the two if it wrote both spellings
// (later); its rollback value, what the leaf held before p's commit
// (before, from the history; else the later of its rollback values). It
// reports whether p changed.
func (u *originUpgrade) mergeProposal(p *Proposal, state map[string]*spellings, before map[string]*PathValue) bool {
	changed := false
	dedupe := func(values []*PathValue, pick func(k string, first, pv *PathValue) *PathValue) []*PathValue {
		at := map[string]int{}
		out := values[:0:0]
		for _, pv := range values {
			k := string(PathKey(pv.GetPath()))
			if _, ok := state[k]; !ok {
				out = append(out, pv)
				continue
			}
			if n, ok := at[k]; ok {
				changed = true
				out[n] = pick(k, out[n], pv)
				continue
			}
			at[k] = len(out)
			out = append(out, pick(k, nil, pv))
		}
		return out
	}
	if ch := p.GetChange(); len(ch.GetValues()) > 0 {
		ch.Values = dedupe(ch.GetValues(), func(_ string, first, pv *PathValue) *PathValue { return u.later(first, pv) })
	}
	if rb := p.GetRollback(); len(rb.GetValues()) > 0 {
		written := map[string]*PathValue{}
		for _, pv := range p.GetChange().GetValues() {
			written[string(PathKey(pv.GetPath()))] = pv
		}
		rb.Values = dedupe(rb.GetValues(), func(k string, first, pv *PathValue) *PathValue {
			prev, ok := before[k]
			if !ok || written[k] == nil {
				return u.later(first, pv)
			}
			v := rollbackValue(prev, written[k])
			if first == nil && !proto.Equal(v, pv) {
				changed = true
			}
			return v
		})
	}
	return changed
}

// moveChunk bounds the records one transaction of moveOpenconfigKeys moves.
const moveChunk = 1000

// moveOpenconfigKeys moves up to moveChunk records of namespace ns keyed
// with origin "openconfig" to their format-5 keys (see upgradeOrigins)
// and returns how many it moved.
func (u *originUpgrade) moveOpenconfigKeys(ns []byte) (int, error) {
	j := u.j
	moved := 0
	err := j.update(func(txn *badger.Txn) error {
		w := &writeTxn{txn: txn, now: j.opts.Clock()}
		var keys [][]byte
		err := iteratePrefix(txn, valueKey(ns, openconfigOrigin), func(key, _ []byte) error {
			if _, ok := format4Canonical(key[len(ns):]); ok && len(keys) < moveChunk {
				keys = append(keys, key)
			}
			return nil
		})
		if err != nil {
			return err
		}
		var c *Configuration
		if bytes.Equal(ns, nsOutOfSync) && len(keys) > 0 {
			if c, err = w.configuration(); err != nil {
				return err
			}
		}
		for _, key := range keys {
			old := key[len(ns):]
			canon, _ := format4Canonical(old)
			if err := u.moveRecord(w, ns, old, canon, c); err != nil {
				return fmt.Errorf("move %q: %w", key, err)
			}
		}
		moved = len(keys)
		if c != nil {
			return w.put(keyConfiguration, c)
		}
		return nil
	})
	return moved, err
}

// moveKeeping moves the record at ns+old (decoded into from) to
// ns+canon (decoded into to, if found), unless keep(found) says the record
// there wins.
func (w *writeTxn) moveKeeping(ns, old, canon []byte, from, to proto.Message, keep func(found bool) bool) error {
	if _, err := w.get(valueKey(ns, old), from); err != nil {
		return err
	}
	found, err := w.get(valueKey(ns, canon), to)
	if err != nil {
		return err
	}
	if err := w.delete(valueKey(ns, old)); err != nil {
		return err
	}
	if keep(found) {
		return nil
	}
	return w.put(valueKey(ns, canon), from)
}

// moveRecord moves the record at ns+old to ns+canon, keeping the later
// one if there is one there already; c is the configuration, whose count
// of out-of-sync records it keeps (ns is nsOutOfSync).
func (u *originUpgrade) moveRecord(w *writeTxn, ns, old, canon []byte, c *Configuration) error {
	switch {
	case bytes.Equal(ns, nsListKeys):
		var from, to ListKeys
		return w.moveKeeping(ns, old, canon, &from, &to, func(found bool) bool {
			return found && len(to.GetKeys()) >= len(from.GetKeys())
		})
	case bytes.Equal(ns, nsOutOfSync):
		var from, to OutOfSync
		return w.moveKeeping(ns, old, canon, &from, &to, func(found bool) bool {
			if !found {
				return false
			}
			if c.OutOfSync > 0 {
				c.OutOfSync--
			}
			return u.later(to.GetValue(), from.GetValue()) == to.GetValue()
		})
	}
	from, err := w.value(ns, old)
	if err != nil {
		return err
	}
	if from == nil {
		return fmt.Errorf("no record")
	}
	to, err := w.value(ns, canon)
	if err != nil {
		return err
	}
	if err := w.delete(valueKey(ns, old)); err != nil {
		return err
	}
	if bytes.Equal(ns, nsApplied) && from.GetDeleted() {
		if err := w.delete(appliedTombstoneKey(from.GetIndex(), old)); err != nil {
			return err
		}
	}
	if to != nil && u.later(to, from) == to {
		return nil
	}
	if bytes.Equal(ns, nsApplied) {
		return w.writeApplied([]*PathValue{from})
	}
	return w.put(valueKey(ns, canon), from)
}
