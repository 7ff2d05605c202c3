package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/trace"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// ExtensionID is the RegisteredExtension id of the sidecar's extension.
const ExtensionID = gnmi_ext.ExtensionID_EID_EXPERIMENTAL

// Set journals the request as a proposal (or, with the rollback extension,
// proposes a rollback) and answers when the agent is done with it: after
// the device answered (SYNC) or once committed (ASYNC).
func (s *Server) Set(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	defer trace.StartRegion(ctx, "set").End()
	resp, err := s.set(ctx, req)
	receipt := s.opts.AlwaysReplyExtension || hasSidecarExtension(req)
	var r *refusal
	switch {
	case errors.As(err, &r) && receipt:
		return nil, r.GRPCStatus().Err()
	case r != nil:
		// The device's refusal as the device made it: code, message and
		// details, without the sidecar's receipt.
		return nil, r.st.Err()
	case err == nil && !receipt:
		// The reply is the device's: the sidecar's receipt only for a
		// client that asked for it (docs/extension.md).
		resp.Extension = withoutSidecarExtension(resp.GetExtension())
	}
	return resp, err
}

// refusal is the error of a Set whose proposal did not take effect: st is
// what the client is told (the device's code, message and details, as the
// device sent them, or the sidecar's reason), and receipt the sidecar's
// Response about the proposal. As an error (GRPCStatus) it carries the
// receipt as its last status detail; Set keeps it only for a client that
// asked for the sidecar's extension, or with Options.AlwaysReplyExtension.
type refusal struct {
	st      *status.Status
	receipt *sidecarpb.Response
}

// GRPCStatus is st with the receipt as a last detail.
func (r *refusal) GRPCStatus() *status.Status {
	if withDetail, err := r.st.WithDetails(r.receipt); err == nil {
		return withDetail
	}
	return r.st
}

func (r *refusal) Error() string { return r.GRPCStatus().Err().Error() }

// hasSidecarExtension reports whether req carries the sidecar's extension
// (an empty one asks for the receipt).
func hasSidecarExtension(req *gpb.SetRequest) bool {
	for _, e := range req.GetExtension() {
		if e.GetRegisteredExt().GetId() == ExtensionID {
			return true
		}
	}
	return false
}

func (s *Server) set(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	// The change's device Set carries its client's custom metadata, and
	// its credentials unless the sidecar has a device account, as Get and
	// Subscribe do (docs/security.md; the agent removes them).
	ctx = agent.WithCredentials(ctx, forwarded(ctx))
	ext, commit, err := RequestExtensions(req.GetExtension())
	if err != nil {
		return nil, err
	}
	ma, err := masterArbitration(req.GetExtension())
	if err != nil {
		return nil, err
	}
	// Every check of the request comes before master arbitration, the
	// first thing a Set may journal: a refused Set changes nothing.
	by, err := authorship(ctx, ext)
	if err != nil {
		return nil, err
	}
	if err := checkExtensionCombination(req, ext, commit); err != nil {
		return nil, err
	}
	if by.Extensions, err = relayedExtensions(req.GetExtension()); err != nil {
		return nil, err
	}
	if len(by.Extensions) > 0 && (ext.GetTag() != nil || ext.GetResolve() != nil || ext.GetRollback() != nil || ext.GetSyncFrom() != nil) {
		return nil, status.Error(codes.InvalidArgument,
			"a rollback, resolve, tag or sync-from Set sends the device no Set of the client's: it cannot carry extensions for the device (docs/extension.md)")
	}
	ops, err := s.checkRequest(req, ext, commit)
	if err != nil {
		return nil, err
	}
	if err := s.arbitrate(ctx, ma); err != nil {
		return nil, err
	}
	if onlyArbitration(req, ma) {
		return masterResponse(req), nil
	}
	sync := ext.GetMode() == sidecarpb.SetMode_SET_MODE_SYNC
	if sync {
		// The client waits for the device's answer: its deadline and its
		// cancel reach the device (agent/clients.go).
		ctx = agent.WithWaitingClient(ctx)
	}
	if hasOps(req) && !ext.GetDryRun() || ext.GetRollback() != nil || ext.GetResolve() != nil || ext.GetTag() != nil {
		// A new journal's baseline goes first (baseline.go), and a
		// sync-from reads the device with no write in between.
		if err := s.awaitBaseline(ctx); err != nil {
			return nil, err
		}
		s.syncMu.RLock()
		defer s.syncMu.RUnlock()
	}
	switch {
	case ext.GetSyncFrom() != nil:
		return s.syncFrom(ctx, req, by)
	case ext.GetTag() != nil:
		return s.tag(ctx, ext.GetTag(), by)
	case ext.GetResolve() != nil:
		return s.resolve(ctx, ext.GetResolve(), by)
	case ext.GetRollback() != nil:
		rb := ext.GetRollback()
		if ext.GetDryRun() {
			return s.dryRunRollback(ctx, rb)
		}
		if rb.GetToTag() != "" || rb.ToIndex != nil {
			return s.restore(ctx, rb, sync, by)
		}
		return s.rollback(ctx, rb.GetIndex(), sync, by)
	}
	if p := req.GetPrefix(); proto.Size(p) > 0 {
		// The client's change: its device Set carries the client's prefix,
		// target included. What the Sets above journal (rollbacks,
		// restores, adoptions) the sidecar makes itself, with full paths.
		by.Prefix = proto.CloneOf(p)
	}
	if commit != nil {
		return s.commitConfirmed(ctx, req, ops, commit, sync, by)
	}
	if !hasOps(req) && !ext.GetDryRun() {
		return s.relaySet(ctx, req)
	}
	if ops == nil { // a dry run of nothing: refused as requestOps refuses it
		if ops, err = requestOps(req); err != nil {
			return nil, err
		}
	}
	if ext.GetDryRun() {
		return s.dryRun(ctx, req, ops)
	}
	by.Read = s.beforeImages(ctx, s.readTarget(by.Prefix), ops)
	return s.propose(ctx, req, sync, func() (*journal.Proposal, error) {
		return s.opts.Agent.ProposeChange(ctx, by, ops)
	})
}

// checkExtensionCombination refuses, with InvalidArgument, a Set asking
// for two things at once (but a dry run of a rollback), or for an
// operation-less one (rollback, resolve, tag) with operations.
func checkExtensionCombination(req *gpb.SetRequest, ext *sidecarpb.Request, commit *gnmi_ext.Commit) error {
	var asked []string
	for _, a := range []struct {
		name string
		on   bool
	}{{"a rollback", ext.GetRollback() != nil}, {"a resolve", ext.GetResolve() != nil}, {"a tag", ext.GetTag() != nil},
		{"a sync-from", ext.GetSyncFrom() != nil},
		{"the commit-confirmed extension", commit != nil}, {"a dry run", ext.GetDryRun() && ext.GetRollback() == nil}} {
		if a.on {
			asked = append(asked, a.name)
		}
	}
	if len(asked) > 1 {
		return status.Errorf(codes.InvalidArgument, "a Set cannot carry both %s and %s: send them separately", asked[0], asked[1])
	}
	rb := ext.GetRollback()
	if rb != nil && rb.GetIndex() != 0 && (rb.GetToTag() != "" || rb.ToIndex != nil) {
		return status.Error(codes.InvalidArgument, "sidecar extension: a rollback names one proposal (index) or a point to go back to (to_tag, to_index), not both")
	}
	if rb != nil && rb.GetToTag() != "" && rb.ToIndex != nil {
		return status.Error(codes.InvalidArgument, "sidecar extension: a rollback goes back to a tag (to_tag) or to a proposal (to_index), not both")
	}
	if hasOps(req) {
		for _, a := range []struct {
			name string
			on   bool
		}{{"rollback", rb != nil}, {"resolve", ext.GetResolve() != nil}, {"tag", ext.GetTag() != nil}, {"sync-from", ext.GetSyncFrom() != nil}} {
			if a.on {
				return status.Errorf(codes.InvalidArgument, "a %s Set (sidecar extension with %s) must carry no operations", a.name, a.name)
			}
		}
	}
	return nil
}

// relaySet passes a Set without operations (nothing to journal: a gNMI
// target must accept one, and it may carry extensions for the device)
// through to the device and answers with the device's answer.
func (s *Server) relaySet(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	out := proto.CloneOf(req)
	out.Extension = withoutSidecarExtension(out.GetExtension())
	resp, err := s.device.Set(s.outgoing(ctx), out)
	if err != nil {
		return nil, s.deviceError(err)
	}
	resp.Extension = withoutSidecarExtension(resp.GetExtension())
	return resp, nil
}

// hasOps reports whether a SetRequest carries any operation.
func hasOps(req *gpb.SetRequest) bool {
	return len(req.GetDelete())+len(req.GetReplace())+len(req.GetUpdate())+len(req.GetUnionReplace()) > 0
}

// propose journals a change with journalIt (through the agent, which takes
// the steps the new proposal enables in the same transaction and is then
// notified) and answers req when the agent is done with it: once applied
// (sync) or committed.
//
// annotate, if any, adds to the sidecar's Response extension of the answer.
func (s *Server) propose(ctx context.Context, req *gpb.SetRequest, sync bool, journalIt func() (*journal.Proposal, error),
	annotate ...func(*sidecarpb.Response)) (*gpb.SetResponse, error) {
	if err := s.refuseIfDisconnected(sync); err != nil {
		return nil, err
	}
	region := trace.StartRegion(ctx, "set.propose")
	p, err := journalIt()
	region.End()
	if err != nil {
		return nil, JournalError(err)
	}
	s.log.Debug("set journaled", "proposal", p.GetIndex(), "ops", len(p.GetChange().GetOps()), "sync", sync)
	// A SYNC client waits as long as it does (its deadline went with its
	// Set to the device), or until StopWaiting: its own context and the
	// server's stop channel, without a context of its own per Set. An
	// ASYNC one stops a little early (waitContext).
	wctx := ctx
	i := p.GetIndex()
	region = trace.StartRegion(ctx, "set.wait")
	if sync {
		p, err = s.opts.Agent.WaitChangeUntil(ctx, s.waits.Done(), i, true)
	} else {
		var cancel context.CancelFunc
		wctx, cancel = s.waitContext(ctx)
		defer cancel() // after waitError, which reads why wctx ended
		p, err = s.opts.Agent.WaitChange(wctx, i, false)
	}
	region.End()
	if err != nil {
		if sync && ctx.Err() != nil && s.waits.Err() == nil {
			// The client gave up: its Set is withdrawn, or cancelled at the
			// device and read back.
			s.opts.Agent.ClientGone(i, ctx.Err())
			st := status.FromContextError(ctx.Err())
			return nil, status.Errorf(st.Code(),
				"%s: the sidecar withdraws the Set (proposal %d), or cancels it at the device and reads the device back; gnmi-sidecar journal show %d says whether it was applied",
				st.Message(), i, i)
		}
		return nil, s.waitError(wctx, i, err)
	}
	ch := p.GetChange()
	if e := changeError(p); e != nil {
		return nil, e
	}
	var resp *gpb.SetResponse
	if dev, ok := s.opts.Agent.TakeResponse(p.GetIndex()); ok && sync {
		resp = clientResponse(dev)
		inClientTerms(resp, req)
	} else {
		// ASYNC, or applied by an earlier sidecar run: describe the Set
		// ourselves.
		resp = &gpb.SetResponse{Prefix: req.GetPrefix(), Timestamp: time.Now().UnixNano(), Response: updateResults(req)}
		if t := ch.GetApplied(); sync && t != nil {
			resp.Timestamp = t.AsTime().UnixNano()
		}
	}
	r := changeResponse(p)
	for _, fn := range annotate {
		fn(r)
	}
	resp.Extension = append(resp.Extension, responseExtension(r))
	return resp, nil
}

// rollback proposes the rollback of proposal i (0: the newest change in
// effect) and waits for it.
func (s *Server) rollback(ctx context.Context, i uint64, sync bool, by journal.Sender) (*gpb.SetResponse, error) {
	if err := s.beforeRollback(ctx, sync); err != nil {
		return nil, err
	}
	j := s.opts.Journal
	if i == 0 {
		newest, err := j.NewestRollbackable(ctx)
		if errors.Is(err, journal.ErrNotFound) {
			return nil, rollbackNotFound(0, 0)
		}
		if err != nil {
			return nil, JournalError(err)
		}
		i = newest
	}
	if _, err := s.opts.Agent.ProposeRollback(ctx, i, by); err != nil {
		if errors.Is(err, journal.ErrNotFound) {
			return nil, rollbackNotFound(i, i)
		}
		return nil, JournalError(err)
	}
	s.log.Info("rollback journaled", "proposal", i, "sync", sync, "author", by.Author)
	return s.waitRollback(ctx, i, sync, false)
}

// beforeRollback readies a rollback (of a proposal, or to a point): it is
// refused while the device is disconnected (sync), and waits until the
// journal records every acknowledged Set and is at rest.
func (s *Server) beforeRollback(ctx context.Context, sync bool) error {
	if err := s.refuseIfDisconnected(sync); err != nil {
		return err
	}
	if err := s.settle(ctx); err != nil {
		return err
	}
	return s.atRest(ctx)
}

// atRest waits, as long as the client's deadline allows, until every
// journaled proposal is finished: only then may a change be rolled back
// (the newest change in effect, nothing later in progress). A change
// still being applied (re-sent after a sidecar restart, say) is waited
// for, not refused. When the wait ends first, the rollback is proposed
// anyway and the journal's refusal says what is still in progress.
func (s *Server) atRest(ctx context.Context) error {
	c, err := s.opts.Journal.Configuration(ctx)
	if err != nil {
		return JournalError(err)
	}
	last := c.GetLastIndex()
	if last == 0 || last < c.GetFirstIndex() {
		return nil
	}
	wctx, cancel := s.waitContext(ctx)
	defer cancel()
	_, err = s.opts.Agent.Wait(wctx, last, journal.Done)
	switch {
	case err == nil, errors.Is(err, journal.ErrCompacted):
		return nil
	case s.waits.Err() != nil:
		return status.Error(codes.Unavailable, "the sidecar is shutting down; nothing was journaled")
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case wctx.Err() != nil:
		return nil // the client's deadline is near: propose, the journal says why if it refuses
	}
	return JournalError(err)
}

// waitRollback waits until proposal i's rollback is applied (sync) or
// committed and answers the Set that asked for it. With orFailed, a change
// that failed ends the wait too (a cancelled commit-confirmed whose change
// never took effect): the answer then describes the change.
func (s *Server) waitRollback(ctx context.Context, i uint64, sync, orFailed bool) (*gpb.SetResponse, error) {
	wctx, cancel := s.waitContext(ctx)
	defer cancel()
	p, err := s.opts.Agent.Wait(wctx, i, func(p *journal.Proposal) bool {
		if orFailed && journal.ChangeFailed(p) {
			return true
		}
		if sync {
			return journal.Finished(p.GetRollback().GetApply())
		}
		return p.GetRollback().GetCommit() == journal.StatusComplete
	})
	if err != nil {
		return nil, s.waitError(wctx, i, err)
	}
	if e := p.GetRollback().GetError(); e != nil && p.GetRollback().GetApply() == journal.StatusFailed {
		// The detail (the Response: phase ROLLBACK, apply FAILED) tells a
		// program this refusal from one made before anything was journaled.
		st := status.Newf(codes.Code(e.GetCode()),
			"the device refused the rollback of proposal %d: %s; the journal records it as rolled back and the paths the device refused as out of sync (gnmi-sidecar status; resolve them with gnmi-sidecar resolve)",
			i, e.GetMessage())
		return nil, &refusal{st: st, receipt: rollbackResponse(p)}
	}
	resp := &gpb.SetResponse{Timestamp: time.Now().UnixNano()}
	r := rollbackResponse(p)
	if orFailed && journal.ChangeFailed(p) {
		r = changeResponse(p)
	} else if t := p.GetRollback().GetApplied(); sync && t != nil {
		resp.Timestamp = t.AsTime().UnixNano()
	}
	resp.Extension = append(resp.Extension, responseExtension(r))
	return resp, nil
}

// settle waits until the journal records every Set already acknowledged
// (agent.Settle), so that what a client reads from the journal next
// includes its own acknowledged Sets.
func (s *Server) settle(ctx context.Context) error {
	if err := s.opts.Agent.Settle(ctx); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}

// withoutSidecarExtension drops extensions with the sidecar's id from a
// device response, so the sidecar's own is the only one.
func withoutSidecarExtension(exts []*gnmi_ext.Extension) []*gnmi_ext.Extension {
	out := exts[:0:0]
	for _, e := range exts {
		if e.GetRegisteredExt().GetId() != ExtensionID {
			out = append(out, e)
		}
	}
	return out
}

// refuseIfDisconnected refuses a SYNC Set while the device is not
// connected, before anything is journaled.
func (s *Server) refuseIfDisconnected(sync bool) error {
	st := s.opts.Agent.Status()
	if st.Fenced {
		return status.Errorf(codes.FailedPrecondition,
			"this sidecar is fenced: the device answered that another client holds a higher MasterArbitration election id (%s); it no longer writes to device %s and journaled nothing. Stop the other writer and restart this sidecar to take over",
			st.FencedBy, s.opts.Target)
	}
	if !sync || s.opts.QueueWhenDisconnected || st.Connected {
		return nil
	}
	refusal := status.New(codes.Unavailable, fmt.Sprintf(
		"device %s is not connected; nothing was journaled (retry later, use the sidecar extension's ASYNC mode, or run the sidecar with --queue-when-disconnected)",
		s.opts.Target))
	return withErrorInfo(refusal, ReasonDeviceUnreachable).Err()
}

// ErrorDomain and the reasons of the google.rpc.ErrorInfo details the
// sidecar adds to its own refusals, so that a program tells them from the
// device's answers without reading messages.
const (
	ErrorDomain = "gnmi-sidecar"
	// ReasonDeviceUnreachable: the sidecar is up but its device is not
	// connected (UNAVAILABLE).
	ReasonDeviceUnreachable = "DEVICE_UNREACHABLE"
	// ReasonDeviceWouldRefuse: a dry run found that the device would refuse
	// the Set, checking it against the device's YANG.
	ReasonDeviceWouldRefuse = "DEVICE_WOULD_REFUSE"
)

// withErrorInfo returns st with an ErrorInfo detail of reason.
func withErrorInfo(st *status.Status, reason string) *status.Status {
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}); err == nil {
		return withInfo
	}
	return st
}

// maxDeadlineMargin bounds how much earlier than the client's deadline a
// Set stops waiting (see waitContext).
const maxDeadlineMargin = 200 * time.Millisecond

// waitContext returns the context a Set waits with. It ends a little
// before the client's deadline (a tenth of the time left, at most
// maxDeadlineMargin): once the deadline has passed, gRPC resets the stream
// and drops whatever the handler answers, and the client must learn that
// its Set stays journaled. It also ends on StopWaiting.
func (s *Server) waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return s.clientWaitContext(ctx)
	}
	early, cancel := context.WithDeadline(ctx, d.Add(-min(time.Until(d)/10, maxDeadlineMargin)))
	wctx, stop := s.clientWaitContext(early)
	return wctx, func() {
		stop()
		cancel()
	}
}

// clientWaitContext returns ctx, ended also by StopWaiting (a SYNC Set's
// wait watches StopWaiting itself, see propose).
func (s *Server) clientWaitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.waits, cancel)
	return wctx, func() {
		stop()
		cancel()
	}
}

// waitError explains a wait for proposal i that ended before the proposal
// did: it stays journaled and the agent still applies it.
func (s *Server) waitError(ctx context.Context, i uint64, err error) error {
	switch {
	case s.waits.Err() != nil:
		// Not Unavailable: a client retrying would journal the Set twice.
		return status.Errorf(codes.Aborted, "the sidecar is shutting down; the Set is journaled as proposal %d and will be applied when it runs again", i)
	case ctx.Err() != nil:
		st := status.FromContextError(ctx.Err())
		return status.Errorf(st.Code(), "%s; the Set is journaled as proposal %d and will still be applied", st.Message(), i)
	case errors.Is(err, agent.ErrFenced):
		return status.Errorf(codes.FailedPrecondition,
			"this sidecar is fenced (another client is master on device %s): the Set is journaled as proposal %d and is applied only if this sidecar, restarted, becomes master again", s.opts.Target, i)
	case errors.Is(err, journal.ErrFailed):
		// Aborted, as for a shutdown: the Set is journaled.
		return status.Errorf(codes.Aborted, "the sidecar's journal failed a write to its disk and the sidecar stops to recover; the Set is journaled as proposal %d and will be applied when it runs again", i)
	}
	return JournalError(err)
}

// changeError is the error a finished change answers with (a *refusal):
// the device's own code, message and status details when it rejected the
// change, as journaled, with the sidecar's Response as its receipt.
func changeError(p *journal.Proposal) error {
	if !journal.ChangeFailed(p) {
		return nil
	}
	e := p.GetChange().GetError()
	st := status.FromProto(&spb.Status{Code: int32(e.GetCode()), Message: e.GetMessage(), Details: e.GetDetails()})
	if st.Code() == codes.OK {
		st = status.Newf(codes.Aborted, "proposal %d was not applied", p.GetIndex())
	}
	return &refusal{st: st, receipt: changeResponse(p)}
}

// RequestExtensions returns the sidecar extension of a SetRequest's
// extensions (the zero Request if absent) and its commit-confirmed
// extension (nil if absent), and refuses, with InvalidArgument, the
// sidecar's own extensions it cannot honour: as Set decodes them. The
// extensions it does not handle itself are relayed to the device with the
// change (relayedExtensions): docs/extension.md has the matrix.
func RequestExtensions(exts []*gnmi_ext.Extension) (*sidecarpb.Request, *gnmi_ext.Commit, error) {
	out := &sidecarpb.Request{}
	var commit *gnmi_ext.Commit
	seen := false
	for _, e := range exts {
		switch ext := e.GetExt().(type) {
		case *gnmi_ext.Extension_RegisteredExt:
			reg := ext.RegisteredExt
			if reg.GetId() != ExtensionID {
				continue // the device's: relayed
			}
			if seen {
				return nil, nil, status.Errorf(codes.InvalidArgument, "more than one sidecar extension (id %d) in one SetRequest", ExtensionID)
			}
			seen = true
			if err := proto.Unmarshal(reg.GetMsg(), out); err != nil {
				return nil, nil, status.Errorf(codes.InvalidArgument,
					"sidecar extension (id %d): msg is not a gnmisidecar.extension.v1.Request: %v", ExtensionID, err)
			}
			if _, ok := sidecarpb.SetMode_name[int32(out.GetMode())]; !ok {
				return nil, nil, status.Errorf(codes.InvalidArgument, "sidecar extension (id %d): unknown set mode %d (0 = SYNC, 1 = ASYNC)", ExtensionID, out.GetMode())
			}
		case *gnmi_ext.Extension_MasterArbitration:
			// Arbitrated by the sidecar (arbitration.go), not forwarded.
		case *gnmi_ext.Extension_Commit:
			if commit != nil {
				return nil, nil, status.Error(codes.InvalidArgument, "more than one commit-confirmed extension in one SetRequest")
			}
			commit = ext.Commit
		}
	}
	return out, commit, nil
}

// relayedExtensions returns, serialized as received, the extensions of a
// SetRequest the sidecar does not handle itself (its own registered
// extension, commit-confirmed and master arbitration are its): the
// device's registered extensions, Depth, ConfigSubscription, History and
// kinds newer than the sidecar's gNMI. They go with the change's device
// Set; the device decides what they mean.
func relayedExtensions(exts []*gnmi_ext.Extension) ([][]byte, error) {
	var out [][]byte
	for _, e := range exts {
		switch x := e.GetExt().(type) {
		case *gnmi_ext.Extension_MasterArbitration, *gnmi_ext.Extension_Commit:
			continue
		case *gnmi_ext.Extension_RegisteredExt:
			if x.RegisteredExt.GetId() == ExtensionID {
				continue
			}
		}
		b, err := proto.Marshal(e)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "an extension cannot be relayed to the device: %v", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// requestOps turns a SetRequest into journal operations: full paths
// (prefix joined, target dropped), values exactly as sent, in gNMI order
// (deletes, replaces, union_replaces, updates).
func requestOps(req *gpb.SetRequest) ([]*journal.Op, error) {
	prefix := req.GetPrefix()
	var ops []*journal.Op
	for _, p := range req.GetDelete() {
		full, err := joinDeletePath(prefix, p)
		if err != nil {
			return nil, err
		}
		ops = append(ops, &journal.Op{Kind: journal.OpDelete, Path: full, OriginOnPath: originOnPath(prefix, p)})
	}
	for _, group := range []struct {
		kind journal.OpKind
		name string
		ups  []*gpb.Update
	}{{journal.OpReplace, "replace", req.GetReplace()}, {journal.OpUnionReplace, "union_replace", req.GetUnionReplace()},
		{journal.OpUpdate, "update", req.GetUpdate()}} {
		for _, u := range group.ups {
			full, err := joinPath(prefix, u.GetPath())
			if err != nil {
				return nil, err
			}
			//lint:ignore SA1019 the deprecated field is read only to refuse it
			if u.GetValue() != nil {
				return nil, status.Errorf(codes.InvalidArgument, "%s of %s uses the deprecated value field; send val (a TypedValue)", group.name, gnmipath.Short(full))
			}
			if u.GetVal().GetValue() == nil {
				return nil, status.Errorf(codes.InvalidArgument, "%s of %s has no value", group.name, gnmipath.Short(full))
			}
			if err := checkJSON(u.GetVal()); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "%s of %s: %v", group.name, gnmipath.Short(full), err)
			}
			ops = append(ops, &journal.Op{Kind: group.kind, Path: full, OriginOnPath: originOnPath(prefix, u.GetPath()),
				Values: []*journal.Leaf{{Path: full, Value: u.GetVal()}}})
		}
	}
	if len(ops) == 0 {
		return nil, status.Error(codes.InvalidArgument, "SetRequest has no operations (a rollback needs the sidecar extension, see docs/extension.md)")
	}
	return ops, nil
}

// joinPath joins a prefix and a path into one full path, refusing what
// the journal cannot key.
func joinPath(prefix, p *gpb.Path) (*gpb.Path, error) {
	return joinValidated(prefix, p, journal.ValidatePath)
}

// joinDeletePath is joinPath for a delete's path, which may hold "*"
// wildcards (journal.ValidateDeletePath).
func joinDeletePath(prefix, p *gpb.Path) (*gpb.Path, error) {
	return joinValidated(prefix, p, journal.ValidateDeletePath)
}

func joinValidated(prefix, p *gpb.Path, validate func(*gpb.Path) error) (*gpb.Path, error) {
	if p == nil {
		return nil, status.Error(codes.InvalidArgument, "operation without a path")
	}
	//lint:ignore SA1019 the deprecated field is read only to refuse it
	if len(p.GetElement()) > 0 || len(prefix.GetElement()) > 0 {
		return nil, status.Error(codes.InvalidArgument, "path uses the deprecated element field; send elem")
	}
	if err := noPathTargets(p); err != nil {
		return nil, err
	}
	if o, po := p.GetOrigin(), prefix.GetOrigin(); o != "" && po != "" && o != po {
		return nil, status.Errorf(codes.InvalidArgument, "path origin %q contradicts prefix origin %q", o, po)
	}
	full := gnmipath.Join(prefix, p)
	if full.GetOrigin() == IntrospectionOrigin {
		return nil, status.Errorf(codes.InvalidArgument, "origin %q is the sidecar's read-only journal tree: it cannot be Set", IntrospectionOrigin)
	}
	if err := validate(full); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return full, nil
}

// checkJSON refuses a JSON value that is not JSON (RFC 8259: UTF-8 text):
// no device takes it, and an ASYNC client would learn only from the
// journal that the device refused it.
func checkJSON(v *gpb.TypedValue) error {
	var field string
	var b []byte
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_JsonVal:
		field, b = "json_val", x.JsonVal
	case *gpb.TypedValue_JsonIetfVal:
		field, b = "json_ietf_val", x.JsonIetfVal
	default:
		return nil
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("%s is not UTF-8, as JSON must be", field)
	}
	if !json.Valid(b) {
		return fmt.Errorf("%s is not valid JSON", field)
	}
	return nil
}

// inClientTerms rewrites the device's answer to the sidecar's southbound
// Set (full paths, no prefix) in the terms of the client's request: its
// prefix and its paths. The southbound Set carries the client's operations
// in the client's order, so when the device answered one result per
// operation of the same kinds, result k is about the client's operation k.
// Otherwise the device's answer is left as it is.
func inClientTerms(resp *gpb.SetResponse, req *gpb.SetRequest) {
	mine := updateResults(req)
	if len(resp.GetResponse()) != len(mine) || resp.GetPrefix() != nil {
		return
	}
	for k, r := range resp.GetResponse() {
		if r.GetOp() != mine[k].GetOp() {
			return
		}
	}
	for k, r := range resp.GetResponse() {
		r.Path = mine[k].GetPath()
	}
	resp.Prefix = req.GetPrefix()
}

// clientResponse is the device's response dev made the client's: the
// sidecar's extension left out, and the message and its results copied,
// not what they point to, so that inClientTerms can rewrite the copy's
// prefix and result paths while the batch's other proposals share dev's
// parts. Unknown fields (a newer gNMI's) are kept, as proto.Clone would.
func clientResponse(dev *gpb.SetResponse) *gpb.SetResponse {
	//lint:ignore SA1019 the deprecated field is copied as it came
	out := &gpb.SetResponse{Prefix: dev.GetPrefix(), Message: dev.GetMessage(), Timestamp: dev.GetTimestamp(),
		Extension: withoutSidecarExtension(dev.GetExtension())}
	copyUnknown(out, dev)
	if rs := dev.GetResponse(); len(rs) > 0 {
		out.Response = make([]*gpb.UpdateResult, len(rs))
		for k, r := range rs {
			//lint:ignore SA1019 the deprecated fields are copied as they came
			out.Response[k] = &gpb.UpdateResult{Timestamp: r.GetTimestamp(), Path: r.GetPath(), Message: r.GetMessage(), Op: r.GetOp()}
			copyUnknown(out.Response[k], r)
		}
	}
	return out
}

// copyUnknown gives dst src's unknown fields.
func copyUnknown(dst, src proto.Message) {
	if u := src.ProtoReflect().GetUnknown(); len(u) > 0 {
		dst.ProtoReflect().SetUnknown(slices.Clone(u))
	}
}

// updateResults describes a Set's operations as UpdateResults, for when
// the device's own response is not at hand.
func updateResults(req *gpb.SetRequest) []*gpb.UpdateResult {
	var out []*gpb.UpdateResult
	for _, p := range req.GetDelete() {
		out = append(out, &gpb.UpdateResult{Path: p, Op: gpb.UpdateResult_DELETE})
	}
	for _, u := range req.GetReplace() {
		out = append(out, &gpb.UpdateResult{Path: u.GetPath(), Op: gpb.UpdateResult_REPLACE})
	}
	for _, u := range req.GetUnionReplace() {
		out = append(out, &gpb.UpdateResult{Path: u.GetPath(), Op: gpb.UpdateResult_UNION_REPLACE})
	}
	for _, u := range req.GetUpdate() {
		out = append(out, &gpb.UpdateResult{Path: u.GetPath(), Op: gpb.UpdateResult_UPDATE})
	}
	return out
}

// changeResponse is the sidecar's Response about proposal p's change.
func changeResponse(p *journal.Proposal) *sidecarpb.Response {
	return &sidecarpb.Response{Index: p.GetIndex(), Phase: sidecarpb.Phase_PHASE_CHANGE,
		Commit: statusOf(p.GetChange().GetCommit()), Apply: statusOf(p.GetChange().GetApply())}
}

// rollbackResponse is the sidecar's Response about proposal p's rollback.
func rollbackResponse(p *journal.Proposal) *sidecarpb.Response {
	return &sidecarpb.Response{Index: p.GetIndex(), Phase: sidecarpb.Phase_PHASE_ROLLBACK,
		Commit: statusOf(p.GetRollback().GetCommit()), Apply: statusOf(p.GetRollback().GetApply())}
}

func responseExtension(r *sidecarpb.Response) *gnmi_ext.Extension {
	msg, err := proto.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("proxy: encode response extension: %v", err)) // a plain message always encodes
	}
	return &gnmi_ext.Extension{Ext: &gnmi_ext.Extension_RegisteredExt{RegisteredExt: &gnmi_ext.RegisteredExtension{Id: ExtensionID, Msg: msg}}}
}

// statusOf maps a journal status to the extension's (same numbering).
func statusOf(s journal.Status) sidecarpb.Status {
	return sidecarpb.Status(s)
}

// plainly is err's message as a person reads it: without the package's
// "journal: " prefix or the category the gRPC code says already
// (sentinel's text at the end: "...: not found").
func plainly(err, sentinel error) string {
	msg := strings.TrimPrefix(err.Error(), "journal: ")
	if sentinel != nil {
		msg = strings.TrimSuffix(msg, ": "+sentinel.Error())
	}
	return msg
}

// JournalError maps an error of the journal or the agent to the gRPC
// status a client gets for it.
func JournalError(err error) error {
	var guard *journal.GuardError
	var value *leaves.Error
	switch {
	case errors.Is(err, agent.ErrFenced):
		return status.Error(codes.FailedPrecondition,
			"this sidecar is fenced: another client is master on the device (gnmi-sidecar status); stop the other writer and restart this sidecar to take over")
	case errors.As(err, &guard):
		return status.Error(codes.FailedPrecondition, guard.Reason)
	case errors.As(err, &value) && errors.Is(err, leaves.ErrNeedSchema):
		// Nothing was journaled: the Set's rollback or re-push would not
		// be exact (docs/values.md).
		return status.Error(codes.FailedPrecondition, value.Error())
	case errors.As(err, &value):
		return status.Error(codes.InvalidArgument, value.Error())
	case errors.Is(err, journal.ErrGuard):
		return status.Error(codes.FailedPrecondition, plainly(err, journal.ErrGuard))
	case errors.Is(err, journal.ErrCompacted):
		return status.Error(codes.FailedPrecondition, plainly(err, nil))
	case errors.Is(err, journal.ErrNotFound):
		return status.Error(codes.NotFound, plainly(err, journal.ErrNotFound))
	case errors.Is(err, journal.ErrExists):
		return status.Error(codes.AlreadyExists, plainly(err, journal.ErrExists))
	case errors.Is(err, journal.ErrInvalid):
		return status.Error(codes.InvalidArgument, plainly(err, journal.ErrInvalid))
	case errors.Is(err, journal.ErrTooLarge):
		return status.Error(codes.ResourceExhausted, err.Error())
	// The journal's disk: the sidecar's log says which directory and why.
	case errors.Is(err, journal.ErrNoSpace):
		return status.Error(codes.ResourceExhausted, "the sidecar's journal is short of disk space: nothing was journaled; retry once its operator has freed space")
	case errors.Is(err, journal.ErrUnwritable):
		return status.Error(codes.Unavailable, "the sidecar's journal cannot be written (its filesystem is read-only): nothing was journaled; retry later")
	case errors.Is(err, journal.ErrFailed):
		return status.Error(codes.Unavailable, "the sidecar's journal failed a write to its disk and the sidecar stops to recover: "+
			"what was being journaled may or may not be; once the sidecar runs again, check (gnmi-sidecar journal list) before retrying")
	case errors.Is(err, journal.ErrCorrupt):
		return status.Error(codes.DataLoss, "the sidecar's journal is damaged (its log names the file): its operator must restore it")
	case errors.Is(err, journal.ErrClosed):
		return status.Error(codes.Unavailable, "the sidecar is shutting down")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Internal, "journal: %v", err)
}
