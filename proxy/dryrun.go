package proxy

import (
	"context"
	"errors"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// dryRun answers a Set carrying the extension's dry_run: the leaf-level
// changes its operations would make to the committed configuration, in
// path order, with nothing journaled or sent to the device. With the
// device's YANG it refuses what the device would refuse for its schema,
// with the code the device answers: NotFound for a path the schema does
// not have, InvalidArgument for a value it does not admit.
func (s *Server) dryRun(ctx context.Context, req *gpb.SetRequest, ops []*journal.Op) (*gpb.SetResponse, error) {
	diff, err := s.opts.Journal.DryRun(ctx, ops, s.beforeImages(ctx, s.readTarget(req.GetPrefix()), ops))
	if err != nil {
		return nil, dryRunError(err)
	}
	r := &sidecarpb.Response{Diff: leafChanges(diff), SchemaChecked: s.opts.Journal.Schema() != nil}
	resp := &gpb.SetResponse{Prefix: req.GetPrefix(), Timestamp: time.Now().UnixNano()}
	resp.Extension = append(resp.Extension, responseExtension(r))
	return resp, nil
}

// dryRunError maps a dry run's refusal to its gRPC status: as JournalError
// does, but for what the device's schema refuses, which is answered as the
// device answers it.
func dryRunError(err error) error {
	var refusal *journal.SchemaRefusal
	if !errors.As(err, &refusal) {
		return JournalError(err)
	}
	code := codes.InvalidArgument
	if errors.Is(err, leaves.ErrNotInSchema) {
		code = codes.NotFound
	}
	st := status.Newf(code, "%v: the device would refuse this Set (dry run against the device's YANG, --yang; nothing was journaled)", err)
	return withErrorInfo(st, ReasonDeviceWouldRefuse).Err()
}

// dryRunRollback answers a rollback Set carrying the extension's dry_run:
// the leaf-level changes the rollback (of one proposal, or to a point)
// would make, path, value now and value after, with nothing journaled or
// sent to the device. It is refused as the rollback would be.
func (s *Server) dryRunRollback(ctx context.Context, rb *sidecarpb.Rollback) (*gpb.SetResponse, error) {
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	if err := s.atRest(ctx); err != nil {
		return nil, err
	}
	j := s.opts.Journal
	r := &sidecarpb.Response{}
	if rb.GetToTag() != "" || rb.ToIndex != nil {
		pt, err := restorePoint(rb)
		if err != nil {
			return nil, err
		}
		diff, index, err := j.RestoreDiff(ctx, pt)
		if err != nil {
			return nil, JournalError(err)
		}
		r.Diff = leafChanges(diff)
		r.Restored = &sidecarpb.Restored{Tag: pt.Tag, PointIndex: index, Unchanged: len(diff) == 0}
	} else {
		diff, i, err := j.RollbackDiff(ctx, rb.GetIndex())
		switch {
		case errors.Is(err, journal.ErrNotFound):
			return nil, rollbackNotFound(rb.GetIndex(), i)
		case err != nil:
			return nil, JournalError(err)
		}
		r.Index, r.Phase, r.Diff = i, sidecarpb.Phase_PHASE_ROLLBACK, leafChanges(diff)
	}
	resp := &gpb.SetResponse{Timestamp: time.Now().UnixNano()}
	resp.Extension = append(resp.Extension, responseExtension(r))
	return resp, nil
}

// leafChanges is diff as the extension's LeafChanges.
func leafChanges(diff []journal.LeafDiff) []*sidecarpb.LeafChange {
	out := make([]*sidecarpb.LeafChange, 0, len(diff))
	for _, d := range diff {
		out = append(out, &sidecarpb.LeafChange{Path: gnmipath.String(d.Path), Old: liveValue(d.Before), New: liveValue(d.After),
			OldUnknown: d.Unknown})
	}
	return out
}

// liveValue is pv's value, nil for nothing or a tombstone.
func liveValue(pv *journal.PathValue) *gpb.TypedValue {
	if pv == nil || pv.GetDeleted() {
		return nil
	}
	return pv.GetValue()
}
