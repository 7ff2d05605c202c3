package proxy

import (
	"context"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// resolve settles out-of-sync paths as an operator asks (the sidecar
// extension's Resolve; `gnmi-sidecar resolve`): RETRY pushes the journal's
// values again; SKIP and ADOPT read the device's current values and journal
// them as an adopted proposal (applied without a device Set), authored by
// the requester.
func (s *Server) resolve(ctx context.Context, r *sidecarpb.Resolve, by journal.Authorship) (*gpb.SetResponse, error) {
	paths := make([]*gpb.Path, 0, len(r.GetPaths()))
	for _, p := range r.GetPaths() {
		gp, err := ygot.StringToStructuredPath(p)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "resolve: path %q: %v", p, err)
		}
		if err := journal.ValidatePath(gp); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "resolve: %v", err)
		}
		paths = append(paths, gp)
	}
	if err := s.refuseIfDisconnected(true); err != nil {
		return nil, err
	}
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	if err := s.atRest(ctx); err != nil {
		return nil, err
	}
	author := by.Author
	var res *journal.Resolution
	var err error
	switch r.GetAction() {
	case sidecarpb.Resolve_ACTION_RETRY:
		res, err = s.opts.Agent.RetryOutOfSync(ctx, paths, author)
	case sidecarpb.Resolve_ACTION_SKIP:
		res, err = s.skip(ctx, paths, by)
	case sidecarpb.Resolve_ACTION_ADOPT:
		if len(paths) == 0 {
			return nil, status.Error(codes.InvalidArgument, "resolve adopt: name the paths whose device values the journal takes")
		}
		res, err = s.adopt(ctx, "ADOPT", paths, by, paths)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "resolve: unknown action %v (RETRY, SKIP or ADOPT)", r.GetAction())
	}
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, JournalError(err)
	}
	result := &sidecarpb.ResolveResult{Settled: uint64(len(res.GetSettled())), Proposal: res.GetProposal()}
	for _, p := range res.GetStillOutOfSync() {
		result.StillOutOfSync = append(result.StillOutOfSync, gnmipath.String(p))
	}
	s.log.Info("resolved out-of-sync paths", "action", r.GetAction().String(), "by", author,
		"settled", result.GetSettled(), "still", len(result.GetStillOutOfSync()), "proposal", result.GetProposal())
	resp := &gpb.SetResponse{Timestamp: time.Now().UnixNano()}
	resp.Extension = append(resp.Extension, responseExtension(&sidecarpb.Response{Index: result.GetProposal(), Resolve: result}))
	return resp, nil
}

// skip adopts the device's values at the out-of-sync paths at or under
// paths (all of them if paths is empty).
func (s *Server) skip(ctx context.Context, paths []*gpb.Path, by journal.Authorship) (*journal.Resolution, error) {
	recs, err := s.outOfSync(ctx, paths)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, status.Error(codes.FailedPrecondition, "resolve skip: nothing is out of sync there (gnmi-sidecar status)")
	}
	targets := make([]*gpb.Path, 0, len(recs))
	for _, rec := range recs {
		targets = append(targets, rec.GetValue().GetPath())
	}
	return s.adopt(ctx, "SKIP", targets, by, paths)
}

// outOfSync returns the out-of-sync records at or under paths (all if
// paths is empty).
func (s *Server) outOfSync(ctx context.Context, paths []*gpb.Path) ([]*journal.OutOfSync, error) {
	recs, err := s.opts.Journal.OutOfSync(ctx)
	if err != nil {
		return nil, err
	}
	return journal.SelectOutOfSync(recs, paths), nil
}

// adopt reads the device's configuration at targets and journals it as an
// adopted proposal, the Set a client would send for it (a Delete of each
// target and an Update of every value the device returned there), so that
// the journal holds exactly what the device holds. It waits until the
// proposal is applied and records, in the Resolution it returns (action
// SKIP or ADOPT, with author), the out-of-sync records at or under scope
// it settled.
func (s *Server) adopt(ctx context.Context, action string, targets []*gpb.Path, by journal.Authorship, scope []*gpb.Path) (*journal.Resolution, error) {
	before, err := s.outOfSync(ctx, scope)
	if err != nil {
		return nil, err
	}
	req := &gpb.SetRequest{Delete: targets}
	for _, p := range targets {
		values, err := s.deviceValues(ctx, p)
		if err != nil {
			return nil, err
		}
		req.Update = append(req.Update, values...)
	}
	ops, err := requestOps(req)
	if err != nil {
		return nil, err
	}
	p, err := s.opts.Agent.ProposeAdoption(ctx, by, ops)
	if err != nil {
		return nil, err
	}
	wctx, cancel := s.waitContext(ctx)
	defer cancel()
	i := p.GetIndex()
	if p, err = s.opts.Agent.WaitChange(wctx, i, true); err != nil {
		return nil, s.waitError(wctx, i, err)
	}
	if e := changeError(p); e != nil {
		return nil, e
	}
	after, err := s.outOfSync(ctx, scope)
	if err != nil {
		return nil, err
	}
	res := &journal.Resolution{Author: by.Author, Action: action, Proposal: i, Settled: journal.SettledPaths(before, after)}
	for _, rec := range after {
		res.StillOutOfSync = append(res.StillOutOfSync, rec.GetValue().GetPath())
	}
	return s.opts.Journal.RecordResolution(ctx, res)
}

// deviceValues reads the device's configuration at p (Get, CONFIG,
// JSON_IETF): its updates with full paths; none if the device has nothing
// there (NotFound).
func (s *Server) deviceValues(ctx context.Context, p *gpb.Path) ([]*gpb.Update, error) {
	resp, err := s.device.Get(s.outgoing(ctx), &gpb.GetRequest{Path: []*gpb.Path{p}, Type: gpb.GetRequest_CONFIG,
		Encoding: gpb.Encoding_JSON_IETF})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, status.Errorf(status.Code(err), "reading the device's values at %s: %v", gnmipath.String(p), status.Convert(err).Message())
	}
	var out []*gpb.Update
	for _, n := range resp.GetNotification() {
		for _, u := range n.GetUpdate() {
			full, err := joinPath(n.GetPrefix(), u.GetPath())
			if err != nil {
				return nil, status.Errorf(codes.FailedPrecondition, "the device answered a Get of %s with %v", gnmipath.String(p), err)
			}
			if !journal.IsUnder(full, p) {
				return nil, status.Errorf(codes.FailedPrecondition,
					"the device answered a Get of %s with a value at %s: adopt a path at or above it", gnmipath.String(p), gnmipath.String(full))
			}
			out = append(out, &gpb.Update{Path: full, Val: u.GetVal()})
		}
	}
	return out, nil
}
