package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Before-images from the device (docs/design.md §4, docs/values.md). The
// journal knows the device's configuration in its read scopes: the
// subtrees it read from the device (a baseline's scopes, and the paths read
// before a change to a path outside them) and took into its committed and
// applied values. Everything the sidecar writes there afterwards it
// journals itself, so a rollback finds what the device held before in the
// committed values. Outside them a Set's paths are read first
// (DeviceRead): what the device holds there is taken in at the change's
// commit, ahead of the change's own values.

// BaselineTag names the newest baseline's point: the device's own
// configuration as the sidecar read it.
const BaselineTag = "baseline"

// nsReadScope holds the read scopes, by path key; each value is the
// scope's *gnmi.Path.
var nsReadScope = []byte("sc/")

// DeviceRead is what the device held at a change's paths before it, read
// just before the change is journaled (Sender.Read).
type DeviceRead struct {
	// Values are the device's values, as a Get of Scopes answered them
	// (full paths, the device's encodings).
	Values []*gnmi.Update
	// Scopes are the subtrees read: the journal knows them once the change
	// is committed.
	Scopes []*gnmi.Path
	// Unread are the subtrees the change writes that the device could not
	// be read at: a rollback that would delete what is there is refused.
	Unread []*gnmi.Path
	// Wide are subtrees read whole in place of the Scopes under them (the
	// parent of many entries of one list, devread.ReadCoalesced): of what
	// Values hold under them, only what lies in Scopes is taken.
	Wide []*gnmi.Path
}

// GetUnread returns r's Unread (nil for a nil r).
func (r *DeviceRead) GetUnread() []*gnmi.Path {
	if r == nil {
		return nil
	}
	return r.Unread
}

// coverage is the set of read scopes, by path key, as of the newest
// durable transaction.
type coverage struct {
	mu   sync.RWMutex
	keys map[string]bool
}

func loadCoverage(db *badger.DB) (*coverage, error) {
	c := &coverage{keys: make(map[string]bool)}
	err := db.View(func(txn *badger.Txn) error {
		return iteratePrefix(txn, nsReadScope, func(key, _ []byte) error {
			c.keys[string(key[len(nsReadScope):])] = true
			return nil
		})
	})
	return c, err
}

func (c *coverage) add(keys []string) {
	if len(keys) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		c.keys[k] = true
	}
}

// covers reports whether a read scope is key or an ancestor of it: its
// own key, or any prefix of it that ends where an element, or the list
// keys of an element, begin (see subtreeOf).
func (c *coverage) covers(key []byte) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return keyOrAbove(c.keys, key)
}

// Covered reports whether the journal knows the device's configuration at
// and under p: p is in a read scope.
func (j *Journal) Covered(p *gnmi.Path) bool {
	return j.coverage.covers(PathKey(p))
}

// ReadScopes returns the read scopes, in path-key order.
func (j *Journal) ReadScopes(ctx context.Context) ([]*gnmi.Path, error) {
	var out []*gnmi.Path
	err := j.view(ctx, func(txn *badger.Txn) error {
		return iteratePrefix(txn, nsReadScope, func(key, val []byte) error {
			p := &gnmi.Path{}
			if err := decodeRecord(val, p); err != nil {
				return fmt.Errorf("decode %q: %w", key, err)
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// RecordReadScopes records scopes as read scopes on their own: the device
// was read there and held nothing, and the journal holds nothing there
// either (a new journal's baseline of a device that holds nothing).
func (j *Journal) RecordReadScopes(ctx context.Context, scopes []*gnmi.Path) error {
	return j.submit(ctx, func(w *writeTxn) error { return w.addReadScopes(scopes) })
}

// addReadScopes records scopes as read scopes, once this transaction is
// durable.
func (w *writeTxn) addReadScopes(scopes []*gnmi.Path) error {
	for _, p := range scopes {
		key := PathKey(p)
		if err := w.put(valueKey(nsReadScope, key), p); err != nil {
			return err
		}
		w.scopesAdded = append(w.scopesAdded, string(key))
	}
	return nil
}

// takeDeviceReads takes what the device held where the journal knew
// nothing, read before change ch of proposal i was journaled, into the
// committed and applied values: a unit is taken where the committed
// values hold nothing at its path and nothing above it was deleted (an
// earlier proposal's delete, committed after the read: the device no
// longer holds it). Its index is 0 (no proposal wrote it) and no history
// delta records it: the device held it all along, so a History snapshot or
// a restore of any earlier time finds it as it is, and the change's own
// history entries and rollback values find it as their before-image. The
// read scopes are recorded.
func (w *writeTxn) takeDeviceReads(c *Configuration, ch *Change) error {
	target := ch.GetPrefix().GetTarget()
	var taken []*PathValue
	for u := range deviceUnits(ch.GetDeviceReads()) {
		key := PathKey(u.GetPath())
		prev, err := w.value(nsCommitted, key)
		if err != nil {
			return err
		}
		if prev != nil {
			continue
		}
		skip, err := w.deletedOrCreatedAbove(c, key)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		path := u.GetPath()
		if path.GetTarget() != target {
			path = proto.CloneOf(path)
			path.Target = target
		}
		pv := &PathValue{Path: path, Value: u.GetValue()}
		if err := w.put(valueKey(nsCommitted, key), pv); err != nil {
			return err
		}
		taken = append(taken, pv)
	}
	if err := w.writeApplied(taken); err != nil {
		return err
	}
	w.read = taken
	return w.addReadScopes(ch.GetReadScopes())
}

// deletedOrCreatedAbove reports whether the committed values hold, at a
// path above p (an element prefix of it, or the whole list of a keyed
// element on it), a tombstone (an earlier proposal deleted it, committed
// after the read: the device no longer holds p) or the marker of a list
// entry a proposal created (what the device holds under it that the
// journal does not, the device made with the entry: the entry's key
// leaves in its config container, say; it was not there before).
func (w *writeTxn) deletedOrCreatedAbove(c *Configuration, key []byte) (bool, error) {
	for above := range keysAbove(key) {
		pv, err := w.value(nsCommitted, above)
		if err != nil {
			return false, err
		}
		if pv == nil {
			continue
		}
		if pv.GetDeleted() {
			return true, nil
		}
		if created, err := w.createdEntry(c, pv); err != nil || created {
			return created, err
		}
	}
	return false, nil
}

// createdEntry reports whether pv, a committed value, is the marker of a
// list entry a change of the sidecar's created (not one the device held:
// a baseline's, an adoption's, or a read's, index 0). A proposal retention
// dropped is taken for one that did not.
func (w *writeTxn) createdEntry(c *Configuration, pv *PathValue) (bool, error) {
	if pv.GetIndex() == 0 || !leaves.IsMarker(pv.GetValue()) {
		return false, nil
	}
	p, err := w.proposalStatusView(c, pv.GetIndex())
	if errors.Is(err, ErrCompacted) || errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !p.GetChange().GetAdopted(), nil
}

// unknownBefore marks, in eff's before-images, what the device held
// where it could not be read: a path the change writes under one of
// unread whose committed value is nil gets a tombstone marked unknown, so
// that a rollback or a restore that would write it is refused (see
// refuseUnknown) instead of deleting what the sidecar never saw.
func unknownBefore(unread []*gnmi.Path, pv *PathValue) *PathValue {
	key := PathKey(pv.GetPath())
	for _, u := range unread {
		if subtreeOf(u).contains(key) {
			return &PathValue{Path: pv.GetPath(), Deleted: true, Unknown: true}
		}
	}
	return nil
}

// refuseUnknown returns the refusal of an undo that would write values of
// which one is unknown (nil if none is).
func refuseUnknown(what string, values []*PathValue) error {
	for _, pv := range values {
		if pv.GetUnknown() {
			return guardf("%s: what the device held at %s before the change is not known (the device could not be read when the change was made), and the undo would delete it; write the value you want there with a Set instead",
				what, gnmipath.String(pv.GetPath()))
		}
	}
	return nil
}

// removeStale is a baseline's last commit's own step: under the
// baseline's read scopes, every value the committed configuration holds
// that the baseline's proposals (from first on) did not write is one the
// device no longer holds: it gets a tombstone in eff, so that the journal
// holds exactly what the device does.
func (w *writeTxn) removeStale(eff *effective, i, first uint64, scopes []*gnmi.Path) error {
	for _, scope := range scopes {
		sub := subtreeOf(scope)
		// stale tombstones the committed value pv at path key k.
		stale := func(k []byte, pv *PathValue) {
			if pv.GetDeleted() || pv.GetIndex() >= first {
				return
			}
			if _, ok := eff.values[string(k)]; ok {
				return
			}
			eff.put(bytes.Clone(k), &PathValue{Path: pv.GetPath(), Index: i, Deleted: true})
		}
		if pv, err := w.value(nsCommitted, sub.key); err != nil {
			return err
		} else if pv != nil {
			stale(sub.key, pv)
		}
		for _, prefix := range sub.prefixes {
			err := iteratePrefix(w.txn, valueKey(nsCommitted, prefix), func(key, val []byte) error {
				pv := &PathValue{}
				if err := decodeRecord(val, pv); err != nil {
					return fmt.Errorf("decode %q: %w", key, err)
				}
				stale(key[len(nsCommitted):], pv)
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// baselineStart returns the index of the first proposal of the baseline
// whose last proposal is p.
func baselineStart(p *Proposal) uint64 {
	if first := p.GetChange().GetBaselineFirst(); first != 0 {
		return first
	}
	return p.GetIndex()
}

// BaselinePart says which part of a baseline a proposal is.
type BaselinePart struct {
	// First is the baseline's first proposal; 0 for the first itself.
	First uint64
	// Final marks the baseline's last proposal.
	Final bool
}

// ProposeBaseline journals one proposal of a baseline: ops, which write
// the device's configuration in scopes as read from it (a client's Set
// would send them; journal.BaselineChunks splits a large read into
// several, each naming the first: part), adopted under the applied term
// like ProposeAdoption, marked baseline, and final on the baseline's last
// proposal, whose commit also
// removes from the committed values in scopes what the device no longer
// holds and makes it Configuration.baseline_index.
func (j *Journal) ProposeBaseline(ctx context.Context, by Sender, scopes []*gnmi.Path, ops []*Op, part BaselinePart, then ...func(*Tx) error) (*Proposal, error) {
	by.emptyOK, by.Read = true, nil
	return j.propose(ctx, by, ops, "a commit-confirmed is outstanding", "confirm or cancel it first, or wait for its rollback",
		func(w *writeTxn, p *Proposal) error {
			if err := w.markAdopted(p); err != nil {
				return err
			}
			p.Change.Baseline = true
			p.Change.FinalChunk = part.Final
			p.Change.BaselineFirst = part.First
			p.Change.ReadScopes = scopes
			return w.put(proposalKey(p.GetIndex()), p)
		}, then)
}

// BaselineChunks decomposes the device's configuration as read (updates,
// full paths) leaf by leaf and returns it as the operations of one or more
// baseline proposals (ProposeBaseline), each of at most max units, so that
// every one fits in a journal transaction. Each operation is an update of
// one unit at its own path.
func (j *Journal) BaselineChunks(updates []*gnmi.Update, max int) ([][]*Op, error) {
	if len(updates) == 0 {
		return [][]*Op{nil}, nil
	}
	clean, _, err := j.deviceOps(updates)
	if err != nil {
		return nil, err
	}
	var chunks [][]*Op
	var cur []*Op
	for u := range deviceUnits(clean) {
		cur = append(cur, &Op{Kind: OpUpdate, Path: u.GetPath(), Values: []*Leaf{u}})
		if len(cur) == max {
			chunks, cur = append(chunks, cur), nil
		}
	}
	if len(cur) > 0 || len(chunks) == 0 {
		chunks = append(chunks, cur)
	}
	return chunks, nil
}

// containerMarker reports whether u, a unit of the device's answer, is the
// marker of a container rather than of a list entry: an empty container a
// device shows in its answers whether or not anything was configured
// there. (A presence container the device holds empty is therefore not
// known to a baseline: a rollback of a change that writes under it leaves
// it, empty, in place.)
func containerMarker(u *Leaf) bool {
	elems := u.GetPath().GetElem()
	return leaves.IsMarker(u.GetValue()) && (len(elems) == 0 || len(elems[len(elems)-1].GetKey()) == 0)
}

// deviceOps returns the device's values as read (full paths) as the
// update operations a client would send to write them, cleaned and
// decomposed (cleanOps), with the lists their keyed paths name and those
// learned from the device's JSON (learnFromDevice).
func (j *Journal) deviceOps(updates []*gnmi.Update) ([]*Op, []leaves.List, error) {
	learned := j.learnFromDevice(updates)
	ops := make([]*Op, 0, len(updates))
	for _, u := range updates {
		ops = append(ops, &Op{Kind: OpUpdate, Path: u.GetPath(), Values: []*Leaf{{Path: u.GetPath(), Value: u.GetVal()}}})
	}
	clean, lists, err := j.cleanOps(ops)
	if err != nil {
		return nil, nil, fmt.Errorf("the device's values: %w", err)
	}
	return clean, append(learned, lists...), nil
}

// deviceReads is deviceOps of read's values, less what they hold under
// read.Wide outside read.Scopes: another entry of a list read whole is
// neither what the change's before-image needs nor in a scope the journal
// will know, and a list of 100,000 entries read for 20 of them would
// otherwise go into the proposal's record whole.
func (j *Journal) deviceReads(read *DeviceRead) ([]*Op, []leaves.List, error) {
	ops, lists, err := j.deviceOps(read.Values)
	if err != nil || len(read.Wide) == 0 {
		return ops, lists, err
	}
	wide, scopes := pathKeySet(read.Wide), pathKeySet(read.Scopes)
	kept := ops[:0]
	for _, op := range ops {
		units := Units(op)
		keep := slices.DeleteFunc(slices.Clone(units), func(u *Leaf) bool {
			key := PathKey(u.GetPath())
			return keyOrAbove(wide, key) && !keyOrAbove(scopes, key)
		})
		switch {
		case len(keep) == len(units):
			kept = append(kept, op)
		case len(keep) > 0:
			kept = append(kept, &Op{Kind: op.GetKind(), Path: op.GetPath(), OriginOnPath: op.GetOriginOnPath(), Values: keep, Units: keep})
		}
	}
	return kept, lists, nil
}

// pathKeySet is the set of paths' keys, for keyOrAbove.
func pathKeySet(paths []*gnmi.Path) map[string]bool {
	out := make(map[string]bool, len(paths))
	for _, p := range paths {
		out[string(PathKey(p))] = true
	}
	return out
}

// deviceUnits yields the units of ops, the device's values (deviceOps),
// but the markers of containers (containerMarker).
func deviceUnits(ops []*Op) iter.Seq[*Leaf] {
	return func(yield func(*Leaf) bool) {
		for _, op := range ops {
			for _, u := range Units(op) {
				if !containerMarker(u) && !yield(u) {
					return
				}
			}
		}
	}
}

// learnFromDevice learns the keys of the lists in the device's JSON values
// that follow OpenConfig's convention (leaves.Keys.LearnOpenConfig), so
// that its configuration can be recorded leaf by leaf without its YANG,
// and returns them.
func (j *Journal) learnFromDevice(updates []*gnmi.Update) []leaves.List {
	var learned []leaves.List
	for _, u := range updates {
		var data []byte
		switch v := u.GetVal().GetValue().(type) {
		case *gnmi.TypedValue_JsonIetfVal:
			data = v.JsonIetfVal
		case *gnmi.TypedValue_JsonVal:
			data = v.JsonVal
		default:
			continue
		}
		learned = append(learned, j.keys.LearnOpenConfig(u.GetPath(), data)...)
	}
	return learned
}

// deviceUnitValues decomposes the device's configuration as read
// (updates, full paths) leaf by leaf: its units' values by key (the
// markers of list entries included, those of containers not), and the
// keys in order.
func (j *Journal) deviceUnitValues(updates []*gnmi.Update) (map[string]*gnmi.TypedValue, []string, error) {
	units := make(map[string]*gnmi.TypedValue)
	var keys []string
	if len(updates) == 0 {
		return units, keys, nil
	}
	clean, _, err := j.deviceOps(updates)
	if err != nil {
		return nil, nil, err
	}
	for u := range deviceUnits(clean) {
		k := string(PathKey(u.GetPath()))
		if _, ok := units[k]; !ok {
			keys = append(keys, k)
		}
		units[k] = u.GetValue()
	}
	slices.Sort(keys)
	return units, keys, nil
}

// DeviceConfig is the device's configuration as read, leaf by leaf, for
// telling which applied values a re-push need not send (Skip).
type DeviceConfig struct {
	j     *Journal
	units map[string]*gnmi.TypedValue
	// sent are the keys of the applied tombstones a re-push sends: the
	// device holds something under them that no applied value explains.
	// Everything applied under one of them is sent too.
	sent map[string]bool
}

// ReadDeviceConfig decomposes the device's configuration as read (updates,
// full paths, from a read of every read scope or of subtrees above them)
// leaf by leaf, keeping what lies in the read scopes, and compares it with
// the applied values' tombstones.
func (j *Journal) ReadDeviceConfig(ctx context.Context, updates []*gnmi.Update) (*DeviceConfig, error) {
	units, keys, err := j.deviceUnitValues(updates)
	if err != nil {
		return nil, err
	}
	keys = slices.DeleteFunc(keys, func(k string) bool {
		if j.coverage.covers([]byte(k)) {
			return false
		}
		delete(units, k)
		return true
	})
	d := &DeviceConfig{j: j, units: units, sent: make(map[string]bool)}
	live := make(map[string]bool)
	var tombstones []*PathValue
	err = j.view(ctx, func(txn *badger.Txn) error {
		return iteratePrefix(txn, nsApplied, func(key, val []byte) error {
			pv := &PathValue{}
			if err := decodeRecord(val, pv); err != nil {
				return fmt.Errorf("decode %q: %w", key, err)
			}
			if pv.GetDeleted() {
				tombstones = append(tombstones, pv)
			} else {
				live[string(key[len(nsApplied):])] = true
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	// A tombstone the device holds something under that no live applied
	// value (written after it) stands for is sent, with all under it.
	for _, pv := range tombstones {
		key := PathKey(pv.GetPath())
		if !j.Covered(pv.GetPath()) {
			d.sent[string(key)] = true
			continue
		}
		sub := subtreeOf(pv.GetPath())
		for n, _ := slices.BinarySearch(keys, string(key)); n < len(keys) && sub.contains([]byte(keys[n])); n++ {
			if !live[keys[n]] {
				d.sent[string(key)] = true
				break
			}
		}
	}
	return d, nil
}

// Skip reports whether a re-push need not send applied value pv: it is in
// a read scope, no tombstone the re-push sends is at or above it, and the
// device holds the same value there (for a tombstone: nothing at or under
// its path but what later applied values wrote).
func (d *DeviceConfig) Skip(pv *PathValue) bool {
	if d == nil || !d.j.Covered(pv.GetPath()) {
		return false
	}
	key := PathKey(pv.GetPath())
	if keyOrAbove(d.sent, key) {
		return false
	}
	if pv.GetDeleted() {
		return true
	}
	v, ok := d.units[string(key)]
	return ok && leaves.Equal(v, pv.GetValue())
}

// Len is the number of units the device holds.
func (d *DeviceConfig) Len() int { return len(d.units) }

// keyOrAbove reports whether set holds key or the key of a path above it
// (keysAbove).
func keyOrAbove(set map[string]bool, key []byte) bool {
	if len(set) == 0 {
		return false
	}
	if set[string(key)] {
		return true
	}
	for above := range keysAbove(key) {
		if set[string(above)] {
			return true
		}
	}
	return false
}

// keysAbove yields the keys of the paths above the path of key, shortest
// first: the prefixes of key that end where an element, or the list keys
// of an element, begin — each element prefix of the path, and the whole
// list of each keyed element on it (see subtreeOf). They share key's
// bytes.
func keysAbove(key []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for n, b := range key {
			if (b == sepElem || b == sepKey) && !yield(key[:n]) {
				return
			}
		}
	}
}
