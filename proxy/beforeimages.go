package proxy

import (
	"context"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// beforeImages reads what the device holds where a change's operations
// write and the journal does not know the device's configuration
// (journal.Covered): the before-images of docs/design.md §4, journaled
// with the change (journal.Sender.Read). Each path is read at its first
// list entry, so that an entry the device holds is known to exist (a
// rollback of a change inside it never deletes it). It returns nil when
// the journal knows every path. Where the device cannot be read, the
// paths are recorded as unread: the change still goes ahead, and an undo
// that would delete what is there is refused.
func (s *Server) beforeImages(ctx context.Context, target string, ops []*journal.Op) *journal.DeviceRead {
	scopes := s.uncovered(ops)
	if len(scopes) == 0 {
		return nil
	}
	values, wide, err := s.reader.ReadCoalesced(s.outgoing(ctx), target, scopes)
	if err != nil {
		names := make([]string, len(scopes))
		for n, p := range scopes {
			names[n] = gnmipath.String(p)
		}
		s.log.Warn("cannot read the device's configuration before a change: what it holds there is unknown, and a rollback that would delete it will be refused",
			"paths", names, "err", err)
		return &journal.DeviceRead{Unread: scopes}
	}
	read := &journal.DeviceRead{Values: values, Wide: wide}
	for _, p := range scopes {
		if !journal.IsWildcard(p) {
			read.Scopes = append(read.Scopes, p)
		}
	}
	return read
}

// uncovered returns the subtrees to read for ops' paths outside the
// journal's read scopes: each path up to its first list entry (a path
// without one whole), none under another.
func (s *Server) uncovered(ops []*journal.Op) []*gpb.Path {
	j := s.opts.Journal
	var out []*gpb.Path
	for _, op := range ops {
		p := op.GetPath()
		if j.Covered(p) {
			continue
		}
		out = append(out, entryScope(p))
	}
	return journal.Outermost(out)
}

// entryScope returns p up to its first keyed element (a list entry), or p
// itself when it names none or has a wildcard before it.
func entryScope(p *gpb.Path) *gpb.Path {
	for n, e := range p.GetElem() {
		if journal.IsWildcard(&gpb.Path{Elem: p.GetElem()[:n+1]}) {
			return p
		}
		if len(e.GetKey()) > 0 {
			return &gpb.Path{Origin: p.GetOrigin(), Elem: p.GetElem()[:n+1]}
		}
	}
	return p
}

// readTarget is the gNMI target of a change's device reads: its prefix's,
// else Options.DeviceTarget.
func (s *Server) readTarget(prefix *gpb.Path) string {
	if t := prefix.GetTarget(); t != "" {
		return t
	}
	return s.opts.DeviceTarget
}
