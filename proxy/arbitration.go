package proxy

import (
	"context"
	"fmt"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// Master arbitration among the sidecar's own clients, as the gNMI master
// arbitration specification (v0.1.0) describes it for a target: per role,
// the highest election id seen is master; a Set with a lower one is refused
// with PermissionDenied naming the master's id; an equal or higher one
// proceeds (a higher one becomes the master's); a Set without the
// extension proceeds. The highest ids are journaled, so a restart does not
// let a stale master write. The client's extension is not forwarded: the
// sidecar is the device's only writer and fences its own Sets
// (--master-arbitration).

// masterArbitration returns the MasterArbitration extension of a Set (nil
// if none), refusing two of them or one without an election id.
func masterArbitration(exts []*gnmi_ext.Extension) (*gnmi_ext.MasterArbitration, error) {
	var out *gnmi_ext.MasterArbitration
	for _, e := range exts {
		ma := e.GetMasterArbitration()
		if ma == nil {
			continue
		}
		if out != nil {
			return nil, status.Error(codes.InvalidArgument, "more than one MasterArbitration extension in one SetRequest")
		}
		if ma.GetElectionId() == nil {
			return nil, status.Error(codes.InvalidArgument, "MasterArbitration extension without election_id")
		}
		out = ma
	}
	return out, nil
}

// arbitrate applies master arbitration to a Set carrying ma.
func (s *Server) arbitrate(ctx context.Context, ma *gnmi_ext.MasterArbitration) error {
	if ma == nil {
		return nil
	}
	role, id := ma.GetRole().GetId(), ma.GetElectionId()
	s.electionMu.Lock()
	defer s.electionMu.Unlock()
	master, known := s.elections[role]
	if !known {
		var err error
		if master, err = s.opts.Journal.ElectionID(ctx, role); err != nil {
			return JournalError(err)
		}
	}
	if master == nil || journal.ElectionLess(master, id) {
		// A new master: journaled before its Set proceeds. An equal id,
		// the usual case, costs no journal write.
		var err error
		if master, err = s.opts.Journal.RaiseElectionID(ctx, role, id); err != nil {
			return JournalError(err)
		}
	}
	s.elections[role] = master
	if journal.ElectionLess(id, master) {
		return status.Errorf(codes.PermissionDenied, "election_id %s is lower than the current master's election_id %s for %s: not the master",
			electionString(ma.GetElectionId()), electionString(master), roleName(role))
	}
	return nil
}

func electionString(id *gnmi_ext.Uint128) string {
	if id.GetHigh() == 0 {
		return fmt.Sprint(id.GetLow())
	}
	return fmt.Sprintf("{high:%d low:%d}", id.GetHigh(), id.GetLow())
}

func roleName(role string) string {
	if role == "" {
		return "the default role"
	}
	return fmt.Sprintf("role %q", role)
}

// onlyArbitration reports whether req is the empty Set a client sends,
// with its election id only, when it becomes master.
func onlyArbitration(req *gpb.SetRequest, ma *gnmi_ext.MasterArbitration) bool {
	if ma == nil || hasOps(req) {
		return false
	}
	for _, e := range req.GetExtension() {
		// Besides the arbitration, at most an empty sidecar extension
		// (asking for the receipt).
		if e.GetMasterArbitration() == nil && (e.GetRegisteredExt().GetId() != ExtensionID || len(e.GetRegisteredExt().GetMsg()) > 0) {
			return false
		}
	}
	return true
}

// masterResponse answers the empty Set of a new master.
func masterResponse(req *gpb.SetRequest) *gpb.SetResponse {
	return &gpb.SetResponse{Prefix: req.GetPrefix(), Timestamp: time.Now().UnixNano()}
}
