package journal

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"
)

// recentProposals are the proposal records the writer's newest durable
// transactions wrote, as the writer held them decoded: the agent reads a
// proposal right after the writer wrote it (the applier the ready ones,
// the waiters their statuses, the completion the one it completes), and
// this spares those reads the decoding. A kept record is the newest
// durable version of its proposal, never changed (readers get a copy,
// shallowProposal): the writer drops a proposal's record before the
// transaction that writes or deletes it commits and keeps the new one once
// it is durable, after publishing the heads. A proposal without a record
// here is read from Badger.
type recentProposals struct {
	mu      sync.Mutex
	byIndex map[uint64]recentProposal
	size    int // encoded bytes of the records kept
}

type recentProposal struct {
	p *Proposal // nil: deleted by the transaction (writeTxn.written)
	// plain is the record as written, before compression (compressRecord),
	// for the next record written as it plus an apply step
	// (applyStepSuffix), which rewrites counts; size is its length.
	plain    []byte
	size     int
	rewrites int
}

// The records kept are bounded, by count and by encoded size; a larger
// record is never kept. Decoded, a record takes about nine times its
// encoded size (a one-leaf proposal: 3 KB of heap), and its encoding is
// kept with it, so the bounds are what the readers need, not more: the
// proposals in flight, one per waiting client and the next batch's (256
// records of 64 clients' Sets hold about 0.9 MB; 1,024 held 3 MB of a
// soak's 12 MB live heap).
const (
	recentMaxCount      = 256
	recentMaxSize       = 256 << 10
	recentMaxRecordSize = 16 << 10
)

// get returns proposal i's kept record (not a copy), or nil.
func (r *recentProposals) get(i uint64) *Proposal {
	e, _ := r.entry(i)
	return e.p
}

// entry returns proposal i's kept record and its encoding, if kept.
func (r *recentProposals) entry(i uint64) (recentProposal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byIndex[i]
	return e, ok
}

// prefix returns the kept records of from, from+1, ... up to to, stopping
// at the first proposal without one.
func (r *recentProposals) prefix(from, to uint64) []*Proposal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Proposal
	for i := from; i <= to; i++ {
		e, ok := r.byIndex[i]
		if !ok {
			break
		}
		out = append(out, e.p)
	}
	return out
}

// drop forgets the records of the proposals in written: a transaction
// about to commit changes them.
func (r *recentProposals) drop(written map[uint64]recentProposal) {
	if len(written) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range written {
		if e, ok := r.byIndex[i]; ok {
			r.size -= e.size
			delete(r.byIndex, i)
		}
	}
}

// add keeps the records a durable transaction wrote, dropping the oldest
// proposals' beyond the bounds.
func (r *recentProposals) add(written map[uint64]recentProposal) {
	if len(written) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byIndex == nil {
		r.byIndex = make(map[uint64]recentProposal)
	}
	for i, e := range written {
		if e.p == nil || e.size > recentMaxRecordSize {
			continue
		}
		r.byIndex[i] = e
		r.size += e.size
	}
	if len(r.byIndex) <= recentMaxCount && r.size <= recentMaxSize {
		return
	}
	// Down to half the bounds, so that this runs once in many transactions.
	for _, i := range slices.Sorted(maps.Keys(r.byIndex)) {
		if len(r.byIndex) <= recentMaxCount/2 && r.size <= recentMaxSize/2 {
			break
		}
		r.size -= r.byIndex[i].size
		delete(r.byIndex, i)
	}
}

// clear forgets every record.
func (r *recentProposals) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.byIndex)
	r.size = 0
}

// statusOf is p's ProposalStatus view (loadProposalStatus).
func statusOf(p *Proposal) *Proposal {
	ch, rb := p.GetChange(), p.GetRollback()
	v := &statusView{}
	v.change.Commit, v.change.Apply, v.change.Adopted = ch.GetCommit(), ch.GetApply(), ch.GetAdopted()
	v.change.AbortedBy, v.change.AdoptedTerm, v.change.Baseline = ch.GetAbortedBy(), ch.GetAdoptedTerm(), ch.GetBaseline()
	v.rollback.Commit, v.rollback.Apply = rb.GetCommit(), rb.GetApply()
	v.proposal.Index, v.proposal.Phase = p.GetIndex(), p.GetPhase()
	v.proposal.Change, v.proposal.Rollback = &v.change, &v.rollback
	return &v.proposal
}

// statusView holds statusOf's proposal and its parts in one allocation:
// the agent and the writer take one per decision.
type statusView struct {
	proposal Proposal
	change   Change
	rollback Rollback
}

// recentValues are the encoded committed and applied value records (lc/,
// la/) the writer's durable transactions wrote: a commit reads the
// committed value of every path it writes (the before-image of its history
// delta and rollback) and an apply the applied one, which are most often
// the values the previous Sets to those paths wrote. Reading them here
// spares a Badger lookup (the memtables, the tables' blooms and indexes,
// and the value-log read and checksum of a record of valueThreshold bytes
// or more) per path, and the record is kept decoded too (the PathValue
// the writer wrote), so that it is not decoded per read: like the heads
// and the proposals the writer keeps, a kept PathValue is never changed
// (every transition builds new PathValues; a build with the devtools tag
// checks at every read that it still encodes as its record, see
// checkSharedValues). Only the writer reads them (writeTxn.value)
// and adds to them, once a transaction is durable; a transaction's own
// writes are read from writeTxn.valuesWritten first. A value without a
// record here is read from Badger.
type recentValues struct {
	mu    sync.Mutex
	byKey map[string]recentValue
	size  int // bytes of the keys and records kept
}

// recentValue is a kept value record: its encoding, plain and as stored,
// and pv, the PathValue it encodes (shared, never changed), or deleted.
// tombstone is the record's Deleted, which expand reads of the committed
// values without decoding.
type recentValue struct {
	b         []byte
	plain     []byte // pv encoded, uncompressed (b, if b is not compressed)
	pv        *PathValue
	deleted   bool
	tombstone bool
}

// bytes is what v keeps: its record, and its plain encoding if the record
// is compressed.
func (v recentValue) bytes() int {
	if len(v.b) > 0 && v.b[0] == compressedRecord {
		return len(v.b) + len(v.plain)
	}
	return len(v.b)
}

// The values kept are bounded by count and by bytes: a device's steady
// traffic rewrites a few hundred paths at most, and a larger write (a
// replace of a whole subtree, a baseline) would only churn them.
const (
	recentValuesMaxCount = 2048
	recentValuesMaxSize  = 256 << 10
)

// get returns the kept record of key, and whether one is kept.
func (r *recentValues) get(key []byte) (recentValue, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.byKey[string(key)]
	return v, ok
}

// clear forgets every kept record.
func (r *recentValues) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.byKey)
	r.size = 0
}

// add keeps the records a durable transaction wrote; beyond the bounds it
// forgets others, at random (map order), down to half of them.
func (r *recentValues) add(written map[string]recentValue) {
	if len(written) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey == nil {
		r.byKey = make(map[string]recentValue)
	}
	for k, v := range written {
		if old, ok := r.byKey[k]; ok {
			r.size -= len(k) + old.bytes()
		}
		r.byKey[k] = v
		r.size += len(k) + v.bytes()
	}
	if len(r.byKey) <= recentValuesMaxCount && r.size <= recentValuesMaxSize {
		return
	}
	for k, v := range r.byKey {
		if len(r.byKey) <= recentValuesMaxCount/2 && r.size <= recentValuesMaxSize/2 {
			break
		}
		r.size -= len(k) + v.bytes()
		delete(r.byKey, k)
	}
}

// mustDecodeAs panics unless the record b of key decodes as m: a reader
// changed a PathValue it shares with the writer (the writer keeps them
// decoded with their records, and embeds their encodings in others), or
// a record encoded in parts (plainValues) is not the message. Only builds
// with the devtools tag call it (checkSharedValues).
func mustDecodeAs(key, b []byte, m proto.Message) {
	was := m.ProtoReflect().New().Interface()
	if err := decodeRecord(b, was); err != nil {
		panic(fmt.Sprintf("journal: the record of %q: %v", key, err))
	}
	if !proto.Equal(was, m) {
		panic(fmt.Sprintf("journal: the record of %q is not what the writer holds (a shared value changed, or encoded in parts wrongly): %v, its record %v", key, m, was))
	}
}
