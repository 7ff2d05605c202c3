package proxy

import (
	"context"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// resolve settles out-of-sync paths as an operator asks (the sidecar
// extension's Resolve; `gnmi-sidecar resolve`): RETRY pushes the journal's
// values again; SKIP and ADOPT read the device's current values and journal
// them as an adopted proposal (applied without a device Set), authored by
// the requester.
func (s *Server) resolve(ctx context.Context, r *sidecarpb.Resolve, by journal.Sender) (*gpb.SetResponse, error) {
	paths, err := resolvePaths(r)
	if err != nil {
		return nil, err
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
	switch r.GetAction() {
	case sidecarpb.Resolve_ACTION_RETRY:
		res, err = s.opts.Agent.RetryOutOfSync(ctx, paths, author)
	case sidecarpb.Resolve_ACTION_SKIP:
		res, err = s.skip(ctx, paths, by)
	case sidecarpb.Resolve_ACTION_ADOPT:
		res, err = s.adopt(ctx, "ADOPT", paths, by, paths)
	case sidecarpb.Resolve_ACTION_REVERT:
		res, err = s.revert(ctx, paths, author)
	default:
		// checkRequest refused every other action, and an ADOPT or REVERT
		// without paths, before anything was journaled.
		return nil, status.Errorf(codes.Internal, "resolve: action %v passed the request checks", r.GetAction())
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
func (s *Server) skip(ctx context.Context, paths []*gpb.Path, by journal.Sender) (*journal.Resolution, error) {
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
func (s *Server) adopt(ctx context.Context, action string, targets []*gpb.Path, by journal.Sender, scope []*gpb.Path) (*journal.Resolution, error) {
	before, err := s.outOfSync(ctx, scope)
	if err != nil {
		return nil, err
	}
	ops, prefix, err := AdoptionOps(s.outgoing(ctx), s.reader, s.opts.DeviceTarget, targets)
	if err != nil {
		return nil, err
	}
	// The proposal's prefix names the target the values were read from
	// (the agent sends an adoption applied under a later term with it,
	// agent.clientRequest).
	by.Prefix = prefix
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

// AdoptionOps reads the device's configuration at paths (dev, with ctx's
// credentials) and returns the operations of the Set a client would send
// for the journal to hold exactly that (journal.ProposeAdoption): a Delete
// of each path, then an Update of every value the device returns there.
// A path the device holds nothing at is only deleted. Errors are gRPC
// statuses: FailedPrecondition when paths name several targets, the
// device's code when it cannot be read, FailedPrecondition when it answers
// with a value outside the path. (Proposing the
// operations may still be refused: a value the journal cannot record leaf
// by leaf.) Both `gnmi-sidecar resolve skip|adopt` and drift adoption
// (package drift) build their adopted proposals with it.
//
// The Gets go to the gNMI target of paths (AdoptionTarget: the one they
// name, else deviceTarget), in their prefix; the operations' paths carry
// none. prefix names that target (nil if none): the proposal of the
// operations takes it as its journal.Sender.Prefix, so that its values are
// applied and re-pushed there.
func AdoptionOps(ctx context.Context, dev *devread.Reader, deviceTarget string, paths []*gpb.Path) (ops []*journal.Op, prefix *gpb.Path, err error) {
	target, paths, err := AdoptionTarget(paths, deviceTarget)
	if err != nil {
		return nil, nil, err
	}
	req := &gpb.SetRequest{Delete: paths}
	if req.Update, err = dev.Read(ctx, target, paths...); err != nil {
		return nil, nil, err
	}
	if ops, err = requestOps(req); err != nil {
		return nil, nil, err
	}
	return ops, gnmipath.TargetPrefix(target), nil
}

// AdoptionTarget returns the one gNMI target of paths (out-of-sync
// records' paths carry the target their values were written to) and the
// paths without it; deviceTarget (--device-target) if they name none. Paths
// of several targets are refused: a proposal has one target.
func AdoptionTarget(paths []*gpb.Path, deviceTarget string) (string, []*gpb.Path, error) {
	target, named := deviceTarget, false
	out := make([]*gpb.Path, len(paths))
	for n, p := range paths {
		out[n] = p
		t := p.GetTarget()
		if t == "" {
			continue
		}
		if named && t != target {
			return "", nil, status.Errorf(codes.FailedPrecondition,
				"the paths were written to different gNMI targets (%q and %q): resolve them one target at a time", target, t)
		}
		target, named = t, true
		out[n] = proto.CloneOf(p)
		out[n].Target = ""
	}
	return target, out, nil
}

// revert puts the journal's applied values back on the device at paths
// (agent.RevertDrift: drift an operator reverts by hand, under
// --drift-policy report) and records it as a Resolution (action REVERT):
// the paths reverted, and those the device refused, now out of sync.
func (s *Server) revert(ctx context.Context, paths []*gpb.Path, author string) (*journal.Resolution, error) {
	out, err := s.opts.Agent.RevertDrift(ctx, paths)
	if err != nil {
		return nil, err
	}
	refused := make(map[string]bool)
	var still []*gpb.Path
	for _, pv := range out.Refused {
		refused[string(journal.PathKey(pv.GetPath()))] = true
		still = append(still, pv.GetPath())
	}
	var settled []*gpb.Path
	for _, p := range paths {
		if !refused[string(journal.PathKey(p))] {
			settled = append(settled, p)
		}
	}
	return s.opts.Journal.RecordResolution(ctx, &journal.Resolution{Author: author, Action: "REVERT", Settled: settled, StillOutOfSync: still})
}
