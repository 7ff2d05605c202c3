package agent

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	gvalue "github.com/openconfig/gnmi/value"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// This file turns journal records into southbound SetRequests. The requests
// alias the records' paths and values instead of cloning them: the records
// are never modified once read, and the requests are only marshaled. Neither
// must be modified afterwards.

// changeRequest returns the SetRequest that applies a proposal's change to
// the device exactly as the client sent it: the delete paths in Delete, the
// values of replaces in Replace, of union_replaces in UnionReplace and of
// updates in Update, each in op order. Paths are full paths; the request
// has no prefix.
//
// An operation kind other than these (which the journal refuses to store)
// is an error.
func changeRequest(ops []*journal.Op) (*gpb.SetRequest, error) {
	req := &gpb.SetRequest{}
	for _, op := range ops {
		switch op.GetKind() {
		case journal.OpDelete:
			req.Delete = append(req.Delete, op.GetPath())
		case journal.OpReplace:
			req.Replace = appendLeaves(req.Replace, op.GetValues())
		case journal.OpUpdate:
			req.Update = appendLeaves(req.Update, op.GetValues())
		case journal.OpUnionReplace:
			req.UnionReplace = appendLeaves(req.UnionReplace, op.GetValues())
		default:
			return nil, fmt.Errorf("journaled operation on %s has kind %v", gnmipath.String(op.GetPath()), op.GetKind())
		}
	}
	return req, nil
}

// clientRequest returns the SetRequest that applies change ch to the
// device as its client sent it: the client's prefix (target, origin,
// elements) and the operations' paths relative to it (changeRequest), with
// the extensions the client sent for the device.
func clientRequest(ch *journal.Change) (*gpb.SetRequest, error) {
	req, err := changeRequest(ch.GetOps())
	if err != nil {
		return nil, err
	}
	if req.Extension, err = changeExtensions(ch); err != nil {
		return nil, err
	}
	prefix := ch.GetPrefix()
	if prefix == nil {
		return req, nil
	}
	if !joinedFromAll(prefix, req) {
		// Paths the prefix was not joined into (a resolve's or a
		// restore's proposal journaled by a version that recorded its
		// Set's own prefix): full paths, under the prefix's target alone.
		req.Prefix = gnmipath.TargetPrefix(prefix.GetTarget())
		return req, nil
	}
	// The origin goes where the client put it: on the prefix, on the path,
	// or on both (Op.origin_on_path).
	rel := func(p *gpb.Path, onPath bool) *gpb.Path {
		n := len(prefix.GetElem())
		out := &gpb.Path{Origin: p.GetOrigin(), Elem: p.GetElem()[n:]}
		if prefix.GetOrigin() != "" && !onPath {
			out.Origin = ""
		}
		return out
	}
	onPath := originsOnPath(ch.GetOps())
	req.Prefix = prefix
	for n, p := range req.Delete {
		req.Delete[n] = rel(p, onPath[journal.OpDelete][n])
	}
	for kind, ups := range map[journal.OpKind][]*gpb.Update{journal.OpReplace: req.Replace,
		journal.OpUnionReplace: req.UnionReplace, journal.OpUpdate: req.Update} {
		for n, u := range ups {
			ups[n] = &gpb.Update{Path: rel(u.GetPath(), onPath[kind][n]), Val: u.GetVal()}
		}
	}
	return req, nil
}

// originsOnPath is, per operation kind, whether each entry changeRequest
// makes of ops (a delete's path, a write's values) had the origin on the
// client's path as well as on its prefix (Op.origin_on_path).
func originsOnPath(ops []*journal.Op) map[journal.OpKind][]bool {
	out := make(map[journal.OpKind][]bool)
	for _, op := range ops {
		n := len(op.GetValues())
		if op.GetKind() == journal.OpDelete {
			n = 1
		}
		for range n {
			out[op.GetKind()] = append(out[op.GetKind()], op.GetOriginOnPath())
		}
	}
	return out
}

// joinedFromAll reports whether every path of req is prefix joined with a
// path (gnmipath.Join): it has the prefix's origin, if the prefix has one,
// and starts with the prefix's elements.
func joinedFromAll(prefix *gpb.Path, req *gpb.SetRequest) bool {
	joined := func(p *gpb.Path) bool {
		if o := prefix.GetOrigin(); o != "" && p.GetOrigin() != o {
			return false
		}
		if len(p.GetElem()) < len(prefix.GetElem()) {
			return false
		}
		for k, e := range prefix.GetElem() {
			if q := p.GetElem()[k]; q.GetName() != e.GetName() || !maps.Equal(q.GetKey(), e.GetKey()) {
				return false
			}
		}
		return true
	}
	for _, p := range req.GetDelete() {
		if !joined(p) {
			return false
		}
	}
	for _, ups := range [][]*gpb.Update{req.GetReplace(), req.GetUnionReplace(), req.GetUpdate()} {
		for _, u := range ups {
			if !joined(u.GetPath()) {
				return false
			}
		}
	}
	return true
}

// changeExtensions decodes the extensions a change relays to the device
// (journal.Change.extensions), in the client's order.
func changeExtensions(ch *journal.Change) ([]*gnmi_ext.Extension, error) {
	var out []*gnmi_ext.Extension
	for n, b := range ch.GetExtensions() {
		e := &gnmi_ext.Extension{}
		if err := proto.Unmarshal(b, e); err != nil {
			return nil, fmt.Errorf("journaled extension %d: %w", n+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func appendLeaves(dst []*gpb.Update, leaves []*journal.Leaf) []*gpb.Update {
	for _, leaf := range leaves {
		dst = append(dst, &gpb.Update{Path: leaf.GetPath(), Val: leaf.GetValue()})
	}
	return dst
}

// inWriteOrder returns a copy of values sorted the way they were originally
// written: by index and, within one index, tombstones first, then by path.
// Tombstones go first because that is how the original Set took effect
// (gNMI deletes before it writes); setBatcher relies on it. It is the
// order in which rollback values and an operator's retry are sent.
func inWriteOrder(values []*journal.PathValue) []*journal.PathValue {
	type keyed struct {
		pv  *journal.PathValue
		key []byte
	}
	sorted := make([]keyed, len(values))
	for n, pv := range values {
		sorted[n] = keyed{pv: pv, key: journal.PathKey(pv.GetPath())}
	}
	slices.SortStableFunc(sorted, func(a, b keyed) int {
		if c := cmp.Compare(a.pv.GetIndex(), b.pv.GetIndex()); c != 0 {
			return c
		}
		if a.pv.GetDeleted() != b.pv.GetDeleted() {
			if a.pv.GetDeleted() {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.key, b.key)
	})
	out := make([]*journal.PathValue, len(sorted))
	for n, k := range sorted {
		out[n] = k.pv
	}
	return out
}

// inPathOrder returns a copy of values sorted by path key, the order
// topTombstones needs (a path's key sorts before those of the paths under
// it).
func inPathOrder(values []*journal.PathValue) []*journal.PathValue {
	keys := make(map[*journal.PathValue][]byte, len(values))
	for _, pv := range values {
		keys[pv] = journal.PathKey(pv.GetPath())
	}
	out := slices.Clone(values)
	slices.SortStableFunc(out, func(a, b *journal.PathValue) int { return bytes.Compare(keys[a], keys[b]) })
	return out
}

// topTombstones returns a tombstone for each top-most path among a
// change's values (in path-key order, as the journal keeps them): deleting
// them clears everything the change wrote. Written back after them, the
// applied values at and under those paths put the device back to the
// applied configuration wherever the change wrote (see Agent.restore).
func topTombstones(changeValues []*journal.PathValue) []*journal.PathValue {
	var out []*journal.PathValue
	top := make(map[string]bool)
	for _, pv := range changeValues {
		covered := false
		for key := range coveringKeys(pv.GetPath()) {
			if top[string(key)] {
				covered = true
				break
			}
		}
		if !covered {
			top[string(journal.PathKey(pv.GetPath()))] = true
			out = append(out, &journal.PathValue{Path: pv.GetPath(), Deleted: true})
		}
	}
	return out
}

// setBatcher packs per-path values, fed in the order they must take effect,
// into as few SetRequests as gNMI semantics allow. A tombstone becomes a
// Delete of its path. A value becomes, by its kind (package leaves):
//
//   - a leaf's JSON text: a member of one JSON object Update at its parent
//     container, shared with the other JSON leaves there (the journal keeps
//     JSON values leaf by leaf; devices take them back grouped, the way
//     clients sent them, and some take JSON only at containers);
//   - a whole leaf-list as JSON: the same, with a Delete of its path in the
//     same request, so it ends up exactly so whether the device merges a
//     leaf-list on Update or replaces it; a leaflist TypedValue: a Replace
//     of its path;
//   - a marker ({} at a list entry or presence container): left out if the
//     value after it (tombstones aside) is under its path, which creates
//     the node too, else an Update with {} at its path;
//   - anything else (a scalar TypedValue, an opaque value): an Update with
//     the TypedValue exactly as stored.
//
// Within one SetRequest the target applies all deletes, then all replaces,
// then the updates in list order. Appending values to Update therefore keeps
// their order, but a delete after an overlapping update would be hoisted
// before it. So a tombstone joins the pending request unless it overlaps (is
// at, above or below) an update there written by another proposal; then the
// pending request is sent first. The requests, sent one after another, leave
// the device as the values applied one by one would. A JSON leaf joins an
// earlier object at its container only if no other Update that may overlap
// the container was appended since.
//
// The values of one proposal index (one original Set) must come tombstones
// first, the order in which that Set took effect: its per-path values may
// hold a value at /a and a tombstone at /a/b, and applying the tombstone
// second would remove part of what /a holds. In plain path order the
// batcher cannot fix this up: when the tombstone also overlaps an earlier
// proposal's pending update, it must go between that update and its own
// Set's value, which already share the pending request. (An overlap with an
// update of the same index alone does not split the request, since deletes
// take effect first inside it, as they did in the original Set.)
// journal.ReplayApplied, which a re-push reads, gives what is stored under
// such a value in index order, tombstones first.
//
// Requests are kept within limits.bytes (their proto.Size, a JSON object
// counted by its members' sizes), so that they stay under gRPC's maximum
// message size; callers leave room for what they add to a request
// (extensions). A single value larger than that is sent alone. They also
// hold at most limits.values values, so that a device that takes long per
// value answers each one within the agent's ApplyTimeout.
//
// A setBatcher is not safe for concurrent use.
type setBatcher struct {
	limits setLimits
	values int // in pending

	// pending is the request being filled and size its encoded size;
	// target is the target of its values (a Set has one, in its prefix).
	pending *gpb.SetRequest
	size    int
	target  string

	// The proposal indexes of pending's updates, for an overlap check that
	// costs O(path depth) map lookups rather than O(updates pending).
	// updatesAt maps the path key of each update's path to the indexes of
	// the updates at exactly that path; updatesUnder maps the key of every
	// path covering an update's path (see coveringKeys) to the indexes of
	// all updates at or under it. A JSON object counts as an update at
	// each of its members' paths.
	updatesAt    map[string]indexSpan
	updatesUnder map[string]indexSpan

	// groups are the JSON objects of pending still open to members, by
	// container path key and encoding.
	groups    map[groupKey]*jsonGroup
	allGroups []*jsonGroup // open or closed, encoded by flush
	// markers are the markers pending whose fate is open, each under the
	// one before it: the next value that is not a tombstone either lies
	// under them (and creates their nodes: they are left out) or ends
	// them (they are sent). They count as values meanwhile.
	markers []*journal.PathValue
	// seq numbers pending's Updates; written maps a member's path key to
	// the seq of the Update that last wrote it, so that a member never
	// joins an object older than that Update.
	seq     int
	written map[string]int
}

// groupKey names a JSON object Update: its path's key and its encoding.
type groupKey struct {
	path string
	ietf bool
}

// jsonGroup is a JSON object Update being filled: its members, in order.
type jsonGroup struct {
	update  *gpb.Update
	seq     int
	ietf    bool
	names   []string
	members map[string]json.RawMessage
}

func (g *jsonGroup) encode() {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for n, name := range g.names {
		if n > 0 {
			buf.WriteByte(',')
		}
		nameJSON, _ := json.Marshal(name) // a string always encodes
		buf.Write(nameJSON)
		buf.WriteByte(':')
		buf.Write(g.members[name])
	}
	buf.WriteByte('}')
	if g.ietf {
		g.update.Val = &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: buf.Bytes()}}
	} else {
		g.update.Val = &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: buf.Bytes()}}
	}
}

// Field numbers of SetRequest's repeated fields (gnmi.proto), to size the
// entries a setBatcher adds.
const (
	setRequestDeleteField  protowire.Number = 2
	setRequestReplaceField protowire.Number = 3
	setRequestUpdateField  protowire.Number = 4
)

// setLimits bound the requests of a setBatcher: their encoded size and
// their number of values (0: no bound).
type setLimits struct {
	bytes, values int
}

// newSetBatcher returns an empty batcher whose requests keep within limits,
// except for a single value that alone exceeds them.
func newSetBatcher(limits setLimits) *setBatcher {
	return &setBatcher{
		limits:       limits,
		updatesAt:    make(map[string]indexSpan),
		updatesUnder: make(map[string]indexSpan),
		groups:       make(map[groupKey]*jsonGroup),
		written:      make(map[string]int),
	}
}

// valueKind is how a setBatcher sends a value (see setBatcher).
type valueKind int

const (
	kindDelete valueKind = iota
	kindMarker
	kindMember   // a JSON leaf, into an object at its container
	kindLeafList // a JSON leaf-list: a member, and a Delete of its path
	kindReplace  // a leaflist TypedValue
	kindUpdate   // anything else, as it is
)

func kindOf(pv *journal.PathValue) valueKind {
	v := pv.GetValue()
	switch {
	case pv.GetDeleted():
		return kindDelete
	case leaves.IsMarker(v):
		return kindMarker
	case v.GetLeaflistVal() != nil:
		return kindReplace
	}
	elems := pv.GetPath().GetElem()
	if len(elems) < 2 || len(elems[len(elems)-1].GetKey()) > 0 {
		return kindUpdate // at the root's children or at a list entry: as it is
	}
	b := v.GetJsonIetfVal()
	if b == nil {
		b = v.GetJsonVal()
	}
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || b[0] == '{':
		return kindUpdate // not JSON, or an object: a value of its own
	case b[0] == '[':
		return kindLeafList
	}
	return kindMember
}

// add adds pv to the pending request. If pv cannot join it, add returns the
// pending request, which must be sent before the one pv is now pending in;
// otherwise it returns nil.
func (b *setBatcher) add(pv *journal.PathValue) *gpb.SetRequest {
	kind := kindOf(pv)
	if kind == kindDelete && leaves.KeepsEntry(pv.GetPath()) {
		// A replayed Set never sends this tombstone: where the entry itself
		// is deleted, a tombstone at or above it does that, and the journal
		// keeps a tombstone of its own for every other value it knew under
		// the container.
		return nil
	}
	if kind != kindDelete {
		b.settleMarkers(pv.GetPath())
	}
	size := b.sizeOf(pv, kind)
	var ready *gpb.SetRequest
	full := b.size+size > b.limits.bytes || b.limits.values > 0 && b.values >= b.limits.values
	target := pv.GetPath().GetTarget()
	if b.pending != nil && (full || target != b.target ||
		kind == kindDelete && b.overlapsOtherUpdate(pv) || kind == kindReplace && b.overlapsUpdate(pv)) {
		ready = b.flush()
	}
	if b.pending == nil {
		b.pending = &gpb.SetRequest{}
		b.target = target
	}
	b.size += size
	b.values++
	path := pv.GetPath()
	switch kind {
	case kindDelete:
		b.pending.Delete = append(b.pending.Delete, path)
		return ready
	case kindMarker:
		// It writes nothing under its path, so a tombstone there need not
		// split the request; one at or above it must (updatesUnder).
		b.markers = append(b.markers, pv)
		for key := range coveringKeys(path) {
			widen(b.updatesUnder, key, pv.GetIndex())
		}
		return ready
	case kindMember, kindLeafList:
		if kind == kindLeafList {
			b.pending.Delete = append(b.pending.Delete, path)
		}
		b.addMember(pv)
	case kindReplace:
		b.pending.Replace = append(b.pending.Replace, &gpb.Update{Path: path, Val: pv.GetValue()})
	default:
		b.appendUpdate(path, pv.GetValue())
		b.closeGroups(path, pv.GetValue())
	}
	widen(b.updatesAt, journal.PathKey(path), pv.GetIndex())
	for key := range coveringKeys(path) {
		widen(b.updatesUnder, key, pv.GetIndex())
	}
	return ready
}

func (b *setBatcher) appendUpdate(path *gpb.Path, v *gpb.TypedValue) {
	b.pending.Update = append(b.pending.Update, &gpb.Update{Path: path, Val: v})
	b.seq++
	b.written[string(journal.PathKey(path))] = b.seq
}

// settleMarkers decides the open markers on the arrival of a value (not a
// tombstone) at path: under the innermost one, it creates their nodes, and
// they are dropped; else the innermost is sent, and so on outwards.
func (b *setBatcher) settleMarkers(path *gpb.Path) {
	for len(b.markers) > 0 {
		top := b.markers[len(b.markers)-1]
		if journal.IsUnder(path, top.GetPath()) {
			b.values -= len(b.markers)
			b.markers = b.markers[:0]
			return
		}
		b.appendUpdate(top.GetPath(), top.GetValue())
		b.markers = b.markers[:len(b.markers)-1]
	}
}

// sizeOf is about what pv adds to a request's encoded size.
func (b *setBatcher) sizeOf(pv *journal.PathValue, kind valueKind) int {
	switch kind {
	case kindDelete:
		return protowire.SizeTag(setRequestDeleteField) + protowire.SizeBytes(proto.Size(pv.GetPath()))
	case kindMember, kindLeafList:
		v := pv.GetValue()
		// The member's name and text, and room for the object's own path
		// and framing (counted for every member: a bound, not a sum).
		n := len(v.GetJsonIetfVal()) + len(v.GetJsonVal()) + len(lastName(pv.GetPath())) + 16 +
			protowire.SizeTag(setRequestUpdateField) + protowire.SizeBytes(proto.Size(pv.GetPath()))
		if kind == kindLeafList {
			n += protowire.SizeTag(setRequestDeleteField) + protowire.SizeBytes(proto.Size(pv.GetPath()))
		}
		return n
	}
	u := &gpb.Update{Path: pv.GetPath(), Val: pv.GetValue()}
	return protowire.SizeTag(setRequestUpdateField) + protowire.SizeBytes(proto.Size(u))
}

func lastName(p *gpb.Path) string {
	elems := p.GetElem()
	return elems[len(elems)-1].GetName()
}

// addMember puts a JSON leaf into the object at its container, opening one
// if none is open.
func (b *setBatcher) addMember(pv *journal.PathValue) {
	path := pv.GetPath()
	elems := path.GetElem()
	parent := &gpb.Path{Origin: path.GetOrigin(), Elem: elems[:len(elems)-1]}
	v := pv.GetValue()
	ietf := v.GetJsonIetfVal() != nil
	text := v.GetJsonIetfVal()
	if !ietf {
		text = v.GetJsonVal()
	}
	key := groupKey{path: string(journal.PathKey(parent)), ietf: ietf}
	memberKey := string(journal.PathKey(path))
	g, ok := b.groups[key]
	if !ok || b.written[memberKey] > g.seq {
		b.seq++
		g = &jsonGroup{update: &gpb.Update{Path: parent}, seq: b.seq, ietf: ietf, members: make(map[string]json.RawMessage)}
		b.groups[key] = g
		b.allGroups = append(b.allGroups, g)
		b.pending.Update = append(b.pending.Update, g.update)
	}
	b.written[memberKey] = g.seq
	name := lastName(path)
	if _, dup := g.members[name]; !dup {
		g.names = append(g.names, name)
	}
	g.members[name] = json.RawMessage(bytes.TrimSpace(text))
}

// closeGroups closes the open JSON objects an Update of v at path may
// overlap, so that no later member moves ahead of it: those at or above
// path, and, for a value that may hold a subtree (not a scalar), all.
func (b *setBatcher) closeGroups(path *gpb.Path, v *gpb.TypedValue) {
	if len(b.groups) == 0 {
		return
	}
	if _, err := gvalue.ToScalar(v); err != nil || v.GetJsonVal() != nil || v.GetJsonIetfVal() != nil {
		clear(b.groups)
		return
	}
	for key := range coveringKeys(path) {
		delete(b.groups, groupKey{path: string(key), ietf: true})
		delete(b.groups, groupKey{path: string(key), ietf: false})
	}
}

// flush returns the pending request and starts a new one; nil if nothing is
// pending. Open markers are sent with it: nothing in it creates their
// nodes.
func (b *setBatcher) flush() *gpb.SetRequest {
	req := b.pending
	if req != nil {
		for n := len(b.markers) - 1; n >= 0; n-- {
			b.appendUpdate(b.markers[n].GetPath(), b.markers[n].GetValue())
		}
		for _, g := range b.allGroups {
			g.encode()
		}
		if b.target != "" {
			inPrefix(req, b.target)
		}
	}
	b.pending = nil
	b.size, b.values = 0, 0
	b.markers = b.markers[:0]
	b.allGroups = b.allGroups[:0]
	b.seq = 0
	clear(b.written)
	clear(b.updatesAt)
	clear(b.updatesUnder)
	clear(b.groups)
	return req
}

// inPrefix moves the target of req's paths (all target) into its prefix:
// gNMI allows a target in the prefix only.
func inPrefix(req *gpb.SetRequest, target string) {
	untargeted := func(p *gpb.Path) *gpb.Path {
		if p.GetTarget() == "" {
			return p
		}
		out := proto.CloneOf(p)
		out.Target = ""
		return out
	}
	req.Prefix = &gpb.Path{Target: target}
	for n, p := range req.Delete {
		req.Delete[n] = untargeted(p)
	}
	for _, ups := range [][]*gpb.Update{req.Replace, req.Update} {
		for _, u := range ups {
			u.Path = untargeted(u.GetPath())
		}
	}
}

// overlapsUpdate reports whether pv's path is at, above or below the path
// of any pending update: a Replace there would take effect before it.
func (b *setBatcher) overlapsUpdate(pv *journal.PathValue) bool {
	if _, ok := b.updatesUnder[string(journal.PathKey(pv.GetPath()))]; ok {
		return true
	}
	for key := range coveringKeys(pv.GetPath()) {
		if _, ok := b.updatesAt[string(key)]; ok {
			return true
		}
	}
	return false
}

// overlapsOtherUpdate reports whether the tombstone pv is at, above or below
// the path of a pending update written by a proposal other than pv's.
func (b *setBatcher) overlapsOtherUpdate(pv *journal.PathValue) bool {
	i := pv.GetIndex()
	if s, ok := b.updatesUnder[string(journal.PathKey(pv.GetPath()))]; ok && !s.only(i) {
		return true // updates at or below pv's path
	}
	for key := range coveringKeys(pv.GetPath()) {
		if s, ok := b.updatesAt[string(key)]; ok && !s.only(i) {
			return true // an update at or above pv's path
		}
	}
	return false
}

// indexSpan is the range of proposal indexes of a set of updates.
type indexSpan struct{ min, max uint64 }

// only reports whether every index in s is i.
func (s indexSpan) only(i uint64) bool { return s.min == i && s.max == i }

// widen adds index i to the span m holds for key.
func widen(m map[string]indexSpan, key []byte, i uint64) {
	s, ok := m[string(key)]
	switch {
	case !ok:
		m[string(key)] = indexSpan{min: i, max: i}
	case i < s.min:
		m[string(key)] = indexSpan{min: i, max: s.max}
	case i > s.max:
		m[string(key)] = indexSpan{min: s.min, max: i}
	}
}

// coveringKeys yields the path keys of the paths that p is under
// (journal.CoveringKeys: at most 2×depth+1 keys, sharing one array). p is
// not modified.
func coveringKeys(p *gpb.Path) iter.Seq[[]byte] {
	return journal.CoveringKeys(p)
}
