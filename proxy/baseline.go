package proxy

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// The onboarding baseline (docs/design.md §4, as Cisco NSO's sync-from):
// the device's configuration in the managed paths, read from the device
// and journaled as proposals authored "device", adopted (applied without a
// device Set) and tagged journal.BaselineTag. Until the baseline of a new
// journal is taken, no other write is journaled: a client's change waits
// for it, so that its rollback finds what the device held.

// BaselineAuthor is the author of a baseline's proposals.
const BaselineAuthor = "device"

// baselineChunk bounds the units of one baseline proposal: one journal
// transaction holds it (a larger baseline takes several proposals).
const baselineChunk = 4096

// largeBaseline is the number of units from which a baseline returns the
// memory it used to the operating system.
const largeBaseline = 10_000

// SyncResult describes a baseline journaled by SyncFrom.
type SyncResult struct {
	// First and Last are the baseline's proposals.
	First, Last uint64
	// Units counts the leaves, list entries and leaf-lists read.
	Units int
	// Scopes are the paths read (the managed paths).
	Scopes []*gpb.Path
	// Read is how long reading the device took; Took, the whole sync.
	Read, Took time.Duration
}

// managedPaths returns Options.ManagedPaths, or the whole tree.
func (s *Server) managedPaths() []*gpb.Path {
	if len(s.opts.ManagedPaths) > 0 {
		return s.opts.ManagedPaths
	}
	return []*gpb.Path{{}}
}

// SyncFrom reads the device's configuration in the managed paths and
// journals it as a new baseline, moving the tag journal.BaselineTag to it:
// from then on the journal holds exactly what the device holds there
// (values the journal held that the device no longer does are deleted
// from it). It waits for the device to be connected and synced, and for
// the pipeline to be at rest. Errors are gRPC statuses.
func (s *Server) SyncFrom(ctx context.Context, by journal.Sender) (*SyncResult, error) {
	start := time.Now()
	if err := s.waitSynced(ctx); err != nil {
		return nil, err
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := s.atRest(ctx); err != nil {
		return nil, err
	}
	// No drift comparison between the read and the last proposal.
	defer s.opts.Agent.Busy()()
	scopes := s.managedPaths()
	target := s.opts.DeviceTarget
	values, err := s.reader.Read(s.outgoing(ctx), target, scopes...)
	if err != nil {
		if errors.Is(err, devread.ErrUnreadable) {
			return nil, status.Errorf(status.Code(err), "cannot read the device's configuration for a baseline; nothing was journaled: %s", status.Convert(err).Message())
		}
		return nil, err
	}
	read := time.Since(start)
	j := s.opts.Journal
	chunks, err := j.BaselineChunks(values, baselineChunk)
	if err != nil {
		return nil, JournalError(fmt.Errorf("the device's configuration: %w", err))
	}
	units := 0
	for _, ops := range chunks {
		units += len(ops)
	}
	if units == 0 {
		c, err := j.Configuration(ctx)
		if err != nil {
			return nil, JournalError(err)
		}
		if c.GetLastIndex() == 0 {
			// A new journal in front of a device that holds nothing: the
			// journal already holds exactly what the device does there.
			if err := j.RecordReadScopes(ctx, scopes); err != nil {
				return nil, JournalError(err)
			}
			s.log.Info("the device holds no configuration in the managed paths: no baseline to journal", "scopes", len(scopes))
			return &SyncResult{Scopes: scopes, Read: read, Took: time.Since(start)}, nil
		}
	}
	by.Author = BaselineAuthor
	by.Prefix = gnmipath.TargetPrefix(target)
	res := &SyncResult{Scopes: scopes, Read: read, Units: units}
	var last *journal.Proposal
	for n, ops := range chunks {
		p, err := s.opts.Agent.ProposeBaseline(ctx, by, scopes, ops, journal.BaselinePart{First: res.First, Final: n == len(chunks)-1})
		if err != nil {
			return nil, JournalError(err)
		}
		if res.First == 0 {
			res.First = p.GetIndex()
		}
		last = p
	}
	res.Last = last.GetIndex()
	wctx, cancel := s.waitContext(ctx)
	defer cancel()
	p, err := s.opts.Agent.Wait(wctx, res.Last, func(p *journal.Proposal) bool { return journal.Finished(p.GetChange().GetApply()) })
	if err != nil {
		return nil, s.waitError(wctx, res.Last, err)
	}
	if e := changeError(p); e != nil {
		return nil, e
	}
	if _, err := j.DeleteTag(ctx, journal.BaselineTag); err != nil && !errors.Is(err, journal.ErrNotFound) {
		return nil, JournalError(err)
	}
	tagged := by
	tagged.Comment = "the device's configuration as read by sync-from"
	if _, err := j.CreateTag(ctx, journal.BaselineTag, journal.Point{Index: res.Last}, tagged); err != nil {
		return nil, JournalError(err)
	}
	res.Took = time.Since(start)
	if res.Units >= largeBaseline {
		// The device's answer and its units are garbage now, hundreds of
		// MB for a large device: give them back at once.
		debug.FreeOSMemory()
	}
	s.log.Info("baseline journaled: the device's configuration as read from it", "first", res.First, "last", res.Last,
		"units", res.Units, "scopes", len(scopes), "read", res.Read, "took", res.Took)
	return res, nil
}

// syncFrom answers a sync-from Set.
func (s *Server) syncFrom(ctx context.Context, req *gpb.SetRequest, by journal.Sender) (*gpb.SetResponse, error) {
	res, err := s.SyncFrom(ctx, by)
	if err != nil {
		return nil, err
	}
	r := &sidecarpb.Response{Index: res.Last, Phase: sidecarpb.Phase_PHASE_CHANGE,
		Commit: sidecarpb.Status_STATUS_COMPLETE, Apply: sidecarpb.Status_STATUS_COMPLETE,
		SyncFrom: &sidecarpb.SyncFromResult{FirstIndex: res.First, LastIndex: res.Last, Units: uint64(res.Units), ReadNanos: res.Read.Nanoseconds()}}
	for _, p := range res.Scopes {
		r.SyncFrom.Scopes = append(r.SyncFrom.Scopes, gnmipath.String(p))
	}
	resp := &gpb.SetResponse{Prefix: req.GetPrefix(), Timestamp: time.Now().UnixNano()}
	resp.Extension = append(resp.Extension, responseExtension(r))
	return resp, nil
}

// NeedsBaseline reports whether the journal wants an onboarding baseline:
// nothing was ever journaled but baseline proposals (a baseline cut short
// by a stop), no baseline is tagged, and the device was never found
// holding nothing (read scopes recorded without a proposal).
func NeedsBaseline(ctx context.Context, j *journal.Journal) (bool, error) {
	c, err := j.Configuration(ctx)
	if err != nil {
		return false, err
	}
	if c.GetLastIndex() == 0 {
		scopes, err := j.ReadScopes(ctx)
		if err != nil || len(scopes) > 0 {
			return false, err
		}
	}
	tags, err := j.Tags(ctx)
	if err != nil {
		return false, err
	}
	for _, t := range tags {
		if t.GetName() == journal.BaselineTag {
			return false, nil
		}
	}
	need := true
	err = j.ProposalStatuses(ctx, c.GetFirstIndex(), c.GetLastIndex(), func(p *journal.Proposal) error {
		if !p.GetChange().GetBaseline() {
			need = false
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return need, err
}

var errStop = errors.New("stop")

// Onboard takes the onboarding baseline of a new journal (NeedsBaseline),
// once the device is connected: Sets wait for it (awaitBaseline). Where
// the device cannot be read, it gives up after one attempt per session,
// logging why, and lets Sets through: their paths are then read before
// each change (beforeImages). It returns when the baseline is taken, not
// needed, or ctx ends.
func (s *Server) Onboard(ctx context.Context) {
	defer s.baselineDone()
	for {
		need, err := NeedsBaseline(ctx, s.opts.Journal)
		if err != nil || !need {
			if err != nil && ctx.Err() == nil {
				s.log.Error("cannot tell whether the journal needs a baseline", "err", err)
			}
			return
		}
		_, err = s.SyncFrom(ctx, journal.Sender{Comment: "onboarding: the device's configuration before the sidecar changed it"})
		if err == nil || ctx.Err() != nil {
			return
		}
		s.log.Warn("no onboarding baseline: the device's configuration could not be journaled; each change's paths will be read from the device before it is journaled instead (gnmi-sidecar sync-from retries)",
			"err", err)
		if status.Code(err) != codes.Unavailable {
			return
		}
		// The connection was lost meanwhile: try again on the next one.
	}
}

// awaitBaseline holds a write until the onboarding baseline is decided
// (Onboard), while the device is connected or the agent's first session
// is being set up (bounded by its dial timeout): a Set that reaches a
// starting sidecar must not be journaled before the baseline, which would
// then hold the change as the device's own configuration. A Set to a
// device found disconnected is refused or queued as usual, its paths read
// before its change.
func (s *Server) awaitBaseline(ctx context.Context) error {
	select {
	case <-s.baselineDecided:
		return nil
	default:
	}
	for {
		changes := s.opts.Agent.Changes()
		if st := s.opts.Agent.Status(); !st.Connected && (st.Connects > 0 || st.LastError != "" || st.Fenced) {
			return nil
		}
		select {
		case <-s.baselineDecided:
			return nil
		case <-changes:
		case <-ctx.Done():
			st := status.FromContextError(ctx.Err())
			return status.Errorf(st.Code(), "%s while the Set waited for the onboarding baseline of device %s (the device's configuration, journaled before any change); nothing was journaled",
				st.Message(), s.opts.Target)
		case <-s.waits.Done():
			return status.Error(codes.Unavailable, "the sidecar is shutting down; nothing was journaled")
		}
	}
}

// waitSynced waits until the device is connected and holds the journal's
// applied configuration under the current term (re-pushed or adopted).
func (s *Server) waitSynced(ctx context.Context) error {
	for {
		changes := s.opts.Agent.Changes()
		rest, err := s.opts.Agent.Rest(ctx)
		if err != nil {
			return JournalError(err)
		}
		if rest.Synced {
			return nil
		}
		if st := s.opts.Agent.Status(); st.Fenced {
			return s.refuseIfDisconnected(true)
		}
		t := time.NewTimer(time.Second)
		select {
		case <-changes:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return status.Errorf(codes.Unavailable, "device %s is not connected and synced; nothing was journaled: %v", s.opts.Target, ctx.Err())
		case <-s.waits.Done():
			t.Stop()
			return status.Error(codes.Unavailable, "the sidecar is shutting down; nothing was journaled")
		}
		t.Stop()
	}
}
