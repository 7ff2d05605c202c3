package agent

import (
	"google.golang.org/protobuf/proto"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/metadata"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// This file packs consecutive proposals into one southbound Set (docs/design.md §5:
// batching consecutive ready proposals into one device Set). The journal
// still records the applies one by one (StartApply and CompleteApply of each
// proposal in index order, in one transaction once the device answered), so
// the spec's Order and Sequential hold for the journal; the device sees the
// batch as one atomic Set that has the effect of the proposals applied in
// index order.

// maxBatchProposals bounds the proposals one southbound Set carries.
const maxBatchProposals = 256

// changeBatch is the southbound Set of one or more consecutive proposals.
type changeBatch struct {
	// first and last are the proposal indexes the batch carries.
	first, last uint64
	req         *gpb.SetRequest
	// counts is, per proposal, how many deletes, replaces and updates it
	// contributed to req, to split the device's response.
	counts []opCounts
	// creds is the request metadata the Set carries: its proposals'
	// clients' (all the same identity), nil for none.
	creds metadata.MD
}

type opCounts struct{ deletes, replaces, updates int }

// batchChanges returns the Set that applies the longest prefix of ps (at
// least ps[0], at most maxBatchProposals) with the same effect as sending
// each proposal's own Set in turn, within maxBytes unless ps[0] alone
// exceeds it. ps must be consecutive proposals in index order.
//
// The device runs a Set's deletes first, then its replaces, then its
// updates, each list in order. Concatenating the lists of proposals keeps
// that equivalent to applying them one by one unless a later proposal
// deletes or replaces a path that overlaps (is at, above or below) a path an
// earlier one in the batch writes: the delete or replace would take effect
// before the earlier write instead of after it. Such a proposal starts the
// next batch. (A later delete overlapping an earlier delete, or a later
// replace overlapping an earlier delete or replace, is harmless.)
//
// A proposal with union_replace operations, or with extensions to relay,
// goes alone: the device unites all the union_replaces of a Set, and a
// client's extensions are about its own request. Proposals go together
// only if their clients sent the same prefix (so the same target): the
// Set carries it, with paths relative to it, as each client sent them.
//
// credsOf, if not nil, gives each proposal's client's request metadata
// (credentials.go): proposals of different identities never share a Set.
func batchChanges(ps []*journal.Proposal, maxBytes int, credsOf func(uint64) metadata.MD) (*changeBatch, error) {
	b := &changeBatch{req: &gpb.SetRequest{}}
	// Path keys written so far (by replaces and by updates): at the path
	// itself, and at every path covering it (see coveringKeys).
	replacedAt, replacedUnder := make(map[string]bool), make(map[string]bool)
	updatedAt, updatedUnder := make(map[string]bool), make(map[string]bool)
	overlaps := func(p *gpb.Path, at, under map[string]bool) bool {
		if under[string(journal.PathKey(p))] {
			return true
		}
		for key := range coveringKeys(p) {
			if at[string(key)] {
				return true
			}
		}
		return false
	}
	size := 0
	for n, p := range ps {
		if n == maxBatchProposals {
			break
		}
		req, err := clientRequest(p.GetChange())
		if err != nil {
			if n == 0 {
				return nil, err
			}
			break
		}
		alone := len(req.GetUnionReplace()) > 0 || len(req.GetExtension()) > 0
		var creds metadata.MD
		if credsOf != nil {
			creds = credsOf(p.GetIndex())
		}
		if n > 0 && (alone || !proto.Equal(req.GetPrefix(), b.req.GetPrefix()) || !sameCredentials(creds, b.creds) ||
			wildcardDelete(p.GetChange())) {
			// A Set has one prefix (one target) and one identity; a
			// wildcard delete may match what an earlier proposal writes.
			break
		}
		if n == 0 {
			b.req.Prefix = req.GetPrefix()
			b.creds = creds
		}
		reqSize := proto.Size(req)
		if n > 0 {
			if size+reqSize > maxBytes {
				break
			}
			conflict := false
			for _, d := range req.GetDelete() {
				conflict = conflict || overlaps(d, updatedAt, updatedUnder) || overlaps(d, replacedAt, replacedUnder)
			}
			for _, r := range req.GetReplace() {
				conflict = conflict || overlaps(r.GetPath(), updatedAt, updatedUnder)
			}
			if conflict {
				break
			}
		}
		mark := func(ups []*gpb.Update, at, under map[string]bool) {
			for _, u := range ups {
				var own []byte // the last covering key: the path's own
				for key := range coveringKeys(u.GetPath()) {
					if !under[string(key)] { // the batch's Sets share most prefixes: no new string for those
						under[string(key)] = true
					}
					own = key
				}
				at[string(own)] = true
			}
		}
		mark(req.GetReplace(), replacedAt, replacedUnder)
		mark(req.GetUpdate(), updatedAt, updatedUnder)
		size += reqSize
		b.req.Delete = append(b.req.Delete, req.GetDelete()...)
		b.req.Replace = append(b.req.Replace, req.GetReplace()...)
		b.req.Update = append(b.req.Update, req.GetUpdate()...)
		b.req.UnionReplace = append(b.req.UnionReplace, req.GetUnionReplace()...)
		b.req.Extension = append(b.req.Extension, req.GetExtension()...)
		b.counts = append(b.counts, opCounts{len(req.GetDelete()), len(req.GetReplace()), len(req.GetUpdate())})
		if n == 0 {
			b.first = p.GetIndex()
		}
		b.last = p.GetIndex()
		if alone {
			break
		}
	}
	return b, nil
}

// wildcardDelete reports whether ch deletes a path with wildcards.
func wildcardDelete(ch *journal.Change) bool {
	for _, op := range ch.GetOps() {
		if op.GetKind() == journal.OpDelete && journal.IsWildcard(op.GetPath()) {
			return true
		}
	}
	return false
}

// size is the number of proposals in the batch.
func (b *changeBatch) size() int { return len(b.counts) }

// split returns, per proposal of the batch, the device's answer about its
// own operations: the response's prefix (a device may echo the request's,
// which all the batch's proposals share, and answer with paths relative to
// it), timestamp and extensions, and its results cut at the proposal's
// share of each list. If the device did not answer one result per
// operation, in request order, each proposal's results describe its own
// operations as the batch sent them (none if the device answered none).
func (b *changeBatch) split(resp *gpb.SetResponse) []*gpb.SetResponse {
	out := make([]*gpb.SetResponse, b.size())
	if b.size() == 1 {
		out[0] = resp
		return out
	}
	results := resp.GetResponse()
	if !b.linedUp(results) && len(results) > 0 {
		results = described(b.req)
	}
	nd, nr := len(b.req.GetDelete()), len(b.req.GetReplace())
	var dels, reps, ups []*gpb.UpdateResult
	if len(results) > 0 {
		dels, reps, ups = results[:nd], results[nd:nd+nr], results[nd+nr:]
	}
	for k, c := range b.counts {
		out[k] = &gpb.SetResponse{Prefix: resp.GetPrefix(), Timestamp: resp.GetTimestamp(), Extension: resp.GetExtension()}
		if len(results) == 0 {
			continue
		}
		own := make([]*gpb.UpdateResult, 0, c.deletes+c.replaces+c.updates)
		own = append(own, dels[:c.deletes]...)
		own = append(own, reps[:c.replaces]...)
		own = append(own, ups[:c.updates]...)
		dels, reps, ups = dels[c.deletes:], reps[c.replaces:], ups[c.updates:]
		out[k].Response = own
	}
	return out
}

// linedUp reports whether results are one per operation of the batch's
// request, in its order (deletes, replaces, updates).
func (b *changeBatch) linedUp(results []*gpb.UpdateResult) bool {
	nd, nr := len(b.req.GetDelete()), len(b.req.GetReplace())
	if len(results) != nd+nr+len(b.req.GetUpdate()) {
		return false
	}
	for k, r := range results {
		want := gpb.UpdateResult_UPDATE
		switch {
		case k < nd:
			want = gpb.UpdateResult_DELETE
		case k < nd+nr:
			want = gpb.UpdateResult_REPLACE
		}
		if r.GetOp() != want {
			return false
		}
	}
	return true
}

// described is one UpdateResult per operation of req (deletes, replaces,
// updates), with its path as req has it.
func described(req *gpb.SetRequest) []*gpb.UpdateResult {
	var out []*gpb.UpdateResult
	for _, p := range req.GetDelete() {
		out = append(out, &gpb.UpdateResult{Path: p, Op: gpb.UpdateResult_DELETE})
	}
	for _, u := range req.GetReplace() {
		out = append(out, &gpb.UpdateResult{Path: u.GetPath(), Op: gpb.UpdateResult_REPLACE})
	}
	for _, u := range req.GetUpdate() {
		out = append(out, &gpb.UpdateResult{Path: u.GetPath(), Op: gpb.UpdateResult_UPDATE})
	}
	return out
}
