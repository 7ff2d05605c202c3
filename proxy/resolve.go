package proxy

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// resolve settles out-of-sync paths as an operator asks (the sidecar
// extension's Resolve; `gnmi-sidecar resolve`): RETRY pushes the journal's
// values again; SKIP and ADOPT read the device's current values and journal
// them as an adopted proposal (applied without a device Set), authored by
// the requester.
func (s *Server) resolve(ctx context.Context, r *sidecarpb.Resolve) (*gpb.SetResponse, error) {
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
	author := requester(ctx)
	log := s.log.With("resolve", r.GetAction().String(), "by", author)
	var result *sidecarpb.ResolveResult
	var err error
	switch r.GetAction() {
	case sidecarpb.Resolve_ACTION_RETRY:
		var settled int
		var still []*journal.OutOfSync
		settled, still, err = s.opts.Agent.RetryOutOfSync(ctx, paths, author)
		if err == nil {
			result = &sidecarpb.ResolveResult{Settled: uint64(settled)}
			for _, rec := range still {
				result.StillOutOfSync = append(result.StillOutOfSync, journal.PathString(rec.GetValue().GetPath()))
			}
		}
	case sidecarpb.Resolve_ACTION_SKIP:
		var recs []*journal.OutOfSync
		recs, err = s.outOfSync(ctx, paths)
		if err == nil && len(recs) == 0 {
			return nil, status.Error(codes.FailedPrecondition, "resolve skip: nothing is out of sync there (gnmi-sidecar status)")
		}
		var targets []*gpb.Path
		for _, rec := range recs {
			targets = append(targets, rec.GetValue().GetPath())
		}
		if err == nil {
			result, err = s.adopt(ctx, "SKIP", targets, author, paths)
		}
	case sidecarpb.Resolve_ACTION_ADOPT:
		if len(paths) == 0 {
			return nil, status.Error(codes.InvalidArgument, "resolve adopt: name the paths whose device values the journal takes")
		}
		result, err = s.adopt(ctx, "ADOPT", paths, author, paths)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "resolve: unknown action %v (RETRY, SKIP or ADOPT)", r.GetAction())
	}
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, journalError(err)
	}
	log.Info("resolved out-of-sync paths", "settled", result.GetSettled(), "still", len(result.GetStillOutOfSync()),
		"proposal", result.GetProposal())
	resp := &gpb.SetResponse{Timestamp: time.Now().UnixNano()}
	resp.Extension = append(resp.Extension, responseExtension(&sidecarpb.Response{Index: result.GetProposal(), Resolve: result}))
	return resp, nil
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
// adopted proposal: for each target a Delete of it and an Update of every
// value the device returned there, so that the journal holds exactly what
// the device holds. It waits until the proposal is applied and reports the
// out-of-sync records at or under scope it settled, recording them in a
// Resolution (action SKIP or ADOPT) with author.
func (s *Server) adopt(ctx context.Context, action string, targets []*gpb.Path, author string, scope []*gpb.Path) (*sidecarpb.ResolveResult, error) {
	before, err := s.outOfSync(ctx, scope)
	if err != nil {
		return nil, err
	}
	var ops []*journal.Op
	for _, p := range targets {
		values, err := s.deviceValues(ctx, p)
		if err != nil {
			return nil, err
		}
		ops = append(ops, &journal.Op{Kind: journal.OpDelete, Path: p})
		for _, u := range values {
			ops = append(ops, &journal.Op{Kind: journal.OpUpdate, Path: u.GetPath(),
				Values: []*journal.Leaf{{Path: u.GetPath(), Value: u.GetVal()}}})
		}
	}
	p, err := s.opts.Agent.ProposeAdoption(ctx, ops, author)
	if err != nil {
		return nil, err
	}
	s.opts.Agent.Notify()
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
	out := &sidecarpb.ResolveResult{Proposal: i, Settled: uint64(max(0, len(before)-len(after)))}
	res := &journal.Resolution{Author: author, Action: action, Proposal: i}
	still := make(map[string]bool, len(after))
	for _, rec := range after {
		out.StillOutOfSync = append(out.StillOutOfSync, journal.PathString(rec.GetValue().GetPath()))
		res.StillOutOfSync = append(res.StillOutOfSync, rec.GetValue().GetPath())
		still[string(journal.PathKey(rec.GetValue().GetPath()))] = true
	}
	for _, rec := range before {
		if !still[string(journal.PathKey(rec.GetValue().GetPath()))] {
			res.Settled = append(res.Settled, rec.GetValue().GetPath())
		}
	}
	if _, err := s.opts.Journal.RecordResolution(ctx, res); err != nil {
		return nil, err
	}
	return out, nil
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
		return nil, status.Errorf(status.Code(err), "reading the device's values at %s: %v", journal.PathString(p), status.Convert(err).Message())
	}
	var out []*gpb.Update
	for _, n := range resp.GetNotification() {
		for _, u := range n.GetUpdate() {
			full := &gpb.Path{Origin: n.GetPrefix().GetOrigin(), Elem: append(slices.Clone(n.GetPrefix().GetElem()), u.GetPath().GetElem()...)}
			if full.Origin == "" {
				full.Origin = u.GetPath().GetOrigin()
			}
			if !journal.IsUnder(full, p) {
				return nil, status.Errorf(codes.FailedPrecondition,
					"the device answered a Get of %s with a value at %s: adopt a path at or above it", journal.PathString(p), journal.PathString(full))
			}
			out = append(out, &gpb.Update{Path: full, Val: u.GetVal()})
		}
	}
	return out, nil
}

// requester names the client of ctx for the journal: its verified
// certificate's subject, else the username it sent, else its address.
// Never a password.
func requester(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
			return subjectOf(info.State.VerifiedChains[0][0])
		}
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if u := md.Get("username"); len(u) == 1 && u[0] != "" {
			return u[0]
		}
	}
	if addr := peerAddr(ctx); addr != "" {
		return addr
	}
	return "unknown"
}

func subjectOf(cert *x509.Certificate) string {
	return fmt.Sprintf("cert:%s", cert.Subject.String())
}
