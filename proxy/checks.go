package proxy

import (
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// checkRequest runs, before anything is recorded (master arbitration
// included: docs/security.md, "A refused RPC did nothing"), every check of
// a Set that depends on the request alone: its operations (paths and
// values), its commit-confirmed action, id and rollback_duration, a tag's
// name, a rollback's point and a resolve's paths and action. What depends
// on the journal's state (a tag that exists, nothing to roll back, another
// commit-confirmed outstanding) is decided later, by the action itself.
// It returns the request's operations (requestOps; nil if it has none).
func (s *Server) checkRequest(req *gpb.SetRequest, ext *sidecarpb.Request, commit *gnmi_ext.Commit) ([]*journal.Op, error) {
	var ops []*journal.Op
	if hasOps(req) {
		var err error
		if ops, err = requestOps(req); err != nil {
			return nil, err
		}
	}
	if err := s.checkActions(req, ext, commit); err != nil {
		return nil, err
	}
	return ops, nil
}

// checkActions is checkRequest of all but the operations.
func (s *Server) checkActions(req *gpb.SetRequest, ext *sidecarpb.Request, commit *gnmi_ext.Commit) error {
	if commit != nil {
		if err := s.checkCommit(req, commit); err != nil {
			return err
		}
	}
	if t := ext.GetTag(); t != nil {
		if t.GetName() == journal.BaselineTag {
			return status.Errorf(codes.InvalidArgument,
				"the tag %q is the sidecar's own: it names the device's configuration as read by the newest baseline (gnmi-sidecar sync-from moves it); choose another name",
				journal.BaselineTag)
		}
		if t.GetDelete() && t.Index != nil {
			return status.Error(codes.InvalidArgument, "sidecar extension: a tag is deleted by its name alone; leave index unset")
		}
		if err := journal.ValidateTagName(t.GetName()); err != nil {
			return JournalError(err)
		}
	}
	if rb := ext.GetRollback(); rb != nil && rb.GetToTag() != "" {
		if _, err := restorePoint(rb); err != nil {
			return err
		}
	}
	if r := ext.GetResolve(); r != nil {
		if _, err := resolvePaths(r); err != nil {
			return err
		}
		switch r.GetAction() {
		case sidecarpb.Resolve_ACTION_RETRY, sidecarpb.Resolve_ACTION_SKIP:
		case sidecarpb.Resolve_ACTION_ADOPT:
			if len(r.GetPaths()) == 0 {
				return status.Error(codes.InvalidArgument, "resolve adopt: name the paths whose device values the journal takes")
			}
		case sidecarpb.Resolve_ACTION_REVERT:
			if len(r.GetPaths()) == 0 {
				return status.Error(codes.InvalidArgument, "resolve revert: name the paths to put the journal's values back at (gnmi-sidecar drift lists the drifted ones)")
			}
		default:
			return status.Errorf(codes.InvalidArgument, "resolve: unknown action %v (RETRY, SKIP, ADOPT or REVERT)", r.GetAction())
		}
	}
	return nil
}

// checkCommit checks a commit-confirmed extension against its Set: an id,
// a known action, operations with commit and none with the others, and a
// rollback_duration within Options.MaxRollbackDuration.
func (s *Server) checkCommit(req *gpb.SetRequest, c *gnmi_ext.Commit) error {
	if c.GetId() == "" {
		return status.Error(codes.InvalidArgument, "commit-confirmed extension: id is required")
	}
	switch action := c.GetAction().(type) {
	case *gnmi_ext.Commit_Commit:
		if _, err := s.rollbackDuration(action.Commit.GetRollbackDuration(), true); err != nil {
			return err
		}
		if !hasOps(req) {
			return status.Error(codes.InvalidArgument, "commit-confirmed commit carries no operations: it commits the Set's configuration")
		}
	case *gnmi_ext.Commit_Confirm:
		return noOps(req, "confirm")
	case *gnmi_ext.Commit_Cancel:
		return noOps(req, "cancel")
	case *gnmi_ext.Commit_SetRollbackDuration:
		if err := noOps(req, "set_rollback_duration"); err != nil {
			return err
		}
		if _, err := s.rollbackDuration(action.SetRollbackDuration.GetRollbackDuration(), false); err != nil {
			return err
		}
	case nil:
		return status.Error(codes.InvalidArgument, "commit-confirmed extension: no action (commit, confirm, cancel or set_rollback_duration)")
	default:
		return status.Errorf(codes.InvalidArgument, "commit-confirmed extension: unknown action %T", action)
	}
	return nil
}

// resolvePaths parses and validates the paths of a resolve.
func resolvePaths(r *sidecarpb.Resolve) ([]*gpb.Path, error) {
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
	return paths, nil
}

// DefaultMaxRollbackDuration is the longest rollback_duration a
// commit-confirmed may ask for (commit or set_rollback_duration) unless
// Options.MaxRollbackDuration (serve --max-rollback-duration) says
// otherwise: a commit-confirmed blocks every other change, an admin's
// included, until it is confirmed, cancelled or rolled back.
const DefaultMaxRollbackDuration = time.Hour

// maxRollbackDuration is Options.MaxRollbackDuration, or its default.
func (s *Server) maxRollbackDuration() time.Duration {
	if s.opts.MaxRollbackDuration > 0 {
		return s.opts.MaxRollbackDuration
	}
	return DefaultMaxRollbackDuration
}
