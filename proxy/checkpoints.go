package proxy

import (
	"context"
	"errors"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// tag names (or, with delete, unnames) a point of the journal: the
// sidecar extension's Tag on a Set without operations.
func (s *Server) tag(ctx context.Context, t *sidecarpb.Tag, by journal.Sender) (*gpb.SetResponse, error) {
	j := s.opts.Journal
	if t.GetName() == journal.BaselineTag {
		return nil, status.Errorf(codes.InvalidArgument,
			"the tag %q is the sidecar's own: it names the device's configuration as read by the newest baseline (gnmi-sidecar sync-from moves it); choose another name",
			journal.BaselineTag)
	}
	var rec *journal.Tag
	var err error
	if t.GetDelete() {
		if t.Index != nil {
			return nil, status.Error(codes.InvalidArgument, "sidecar extension: a tag is deleted by its name alone; leave index unset")
		}
		rec, err = j.DeleteTag(journal.WithActor(ctx, by), t.GetName())
		if err != nil {
			return nil, JournalError(err)
		}
		s.log.Info("tag deleted", "tag", rec.GetName(), "author", by.Author)
	} else {
		at := journal.Point{Latest: true}
		if t.Index != nil {
			at = journal.Point{Index: t.GetIndex()}
		} else if err := s.settle(ctx); err != nil {
			// "Now" includes the Sets the client was already answered.
			return nil, err
		}
		rec, err = j.CreateTag(ctx, t.GetName(), at, by)
		if err != nil {
			return nil, JournalError(err)
		}
		s.log.Info("tag created", "tag", rec.GetName(), "index", rec.GetIndex(), "author", by.Author)
	}
	info, err := TagInfo(ctx, j, rec)
	if err != nil {
		return nil, JournalError(err)
	}
	resp := &gpb.SetResponse{Timestamp: time.Now().UnixNano()}
	resp.Extension = append(resp.Extension, responseExtension(&sidecarpb.Response{Tag: info}))
	return resp, nil
}

// TagInfo describes tag t for a client (the extension's TagInfo).
func TagInfo(ctx context.Context, j *journal.Journal, t *journal.Tag) (*sidecarpb.TagInfo, error) {
	ok, err := j.TagRestorable(ctx, t)
	if err != nil {
		return nil, err
	}
	return &sidecarpb.TagInfo{
		Name:       t.GetName(),
		Index:      t.GetIndex(),
		Time:       t.GetTime().AsTime().UnixNano(),
		Created:    t.GetCreated().AsTime().UnixNano(),
		Author:     t.GetAuthor(),
		Comment:    t.GetComment(),
		Restorable: ok,
	}, nil
}

// restorePoint is the point a rollback's to_tag or to_index names; a
// to_tag that is no tag name is refused.
func restorePoint(rb *sidecarpb.Rollback) (journal.Point, error) {
	pt := journal.Point{Tag: rb.GetToTag(), Index: rb.GetToIndex()}
	if pt.Tag != "" {
		if err := journal.ValidateTagName(pt.Tag); err != nil {
			return pt, JournalError(err)
		}
	}
	return pt, nil
}

// rollbackNotFound is the refusal of a rollback of proposal i, asked for
// as requested (0: the newest change), that found nothing to roll back.
func rollbackNotFound(requested, i uint64) error {
	if requested == 0 {
		return status.Error(codes.NotFound, "nothing to roll back: no change is in effect")
	}
	return status.Errorf(codes.NotFound, "cannot roll back proposal %d: it does not exist", i)
}

// restore goes back to the point a rollback's to_tag or to_index names:
// every change made since is undone by one new change, sent to the device
// as one SetRequest, and the Set is answered as a change is (the Response
// also names the point). When the configuration is as at the point
// already, nothing is journaled and the answer says so.
func (s *Server) restore(ctx context.Context, rb *sidecarpb.Rollback, sync bool, by journal.Sender) (*gpb.SetResponse, error) {
	pt, err := restorePoint(rb)
	if err != nil {
		return nil, err
	}
	if err := s.beforeRollback(ctx, sync); err != nil {
		return nil, err
	}
	restored := &sidecarpb.Restored{Tag: pt.Tag, PointIndex: pt.Index}
	unchanged := false
	resp, err := s.propose(ctx, &gpb.SetRequest{}, sync, func() (*journal.Proposal, error) {
		p, err := s.opts.Agent.ProposeRestore(ctx, by, pt)
		if errors.Is(err, journal.ErrNoChange) {
			unchanged = true
		}
		if err == nil {
			restored.PointIndex = p.GetChange().GetRestores().GetIndex()
			s.log.Info("going back to a point journaled", "proposal", p.GetIndex(), "point", pt.String(),
				"operations", len(p.GetChange().GetOps()), "author", by.Author)
		}
		return p, err
	}, func(r *sidecarpb.Response) { r.Restored = restored })
	if unchanged {
		restored.Unchanged = true
		resp = &gpb.SetResponse{Timestamp: time.Now().UnixNano()}
		resp.Extension = append(resp.Extension, responseExtension(&sidecarpb.Response{Restored: restored}))
		return resp, nil
	}
	return resp, err
}
