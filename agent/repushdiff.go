package agent

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// deviceHolds reads what the device holds in the journal's read scopes
// before a re-push (docs/values.md, before-images): a device that came
// back with its startup configuration, or that a sidecar restart finds as
// it was, is then sent only the applied values it does not hold. Nil when
// the journal has no read scopes or the device cannot be read: everything
// is re-pushed, as always.
//
// The scopes are read coalesced (readPlan): a journal filled by Sets of
// many list entries has a scope per entry, and a Get each (one round trip
// apiece, 1.4 s for 3,000 entries on loopback) was most of the re-push.
func (a *Agent) deviceHolds(ctx context.Context, s *session, log *slog.Logger) *journal.DeviceConfig {
	scopes, err := a.j.ReadScopes(ctx)
	if err != nil || len(scopes) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(s.ctx, a.opts.ApplyTimeout)
	defer cancel()
	plan := readPlan(scopes)
	values, err := s.reader.Read(rctx, a.opts.DeviceTarget, plan...)
	if err != nil && len(plan) < len(scopes) && refusal(err) {
		// A device may refuse a read of the parent (an account limited to
		// some entries) and answer the scopes themselves.
		log.Info("the device refused a coalesced read before the re-push: reading each read scope", "err", err)
		values, err = s.reader.Read(rctx, a.opts.DeviceTarget, scopes...)
	}
	if err != nil {
		log.Info("cannot read the device before the re-push: re-pushing the whole applied configuration", "err", err)
		return nil
	}
	held, err := a.j.ReadDeviceConfig(ctx, values)
	if err != nil {
		log.Info("cannot record the device's configuration before the re-push: re-pushing the whole applied configuration", "err", err)
		return nil
	}
	return held
}

// refusal reports whether the device answered err to a read (rather than
// not answering, or the read being cancelled).
func refusal(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return true
}

// coalesceAt is the number of read scopes with the same parent from which
// the re-push reads the parent once instead of each scope.
const coalesceAt = 16

// readPlan returns the paths to read so as to know the device's
// configuration in scopes: each scope, except that coalesceAt or more
// sharing a parent of at least one element (the entries of one list, as
// /interfaces/interface[name=…] under /interfaces) are replaced by that
// parent. What the parent holds outside the scopes is left out by
// journal.ReadDeviceConfig. Scopes are in path-key order, so those of one
// parent are adjacent.
func readPlan(scopes []*gpb.Path) []*gpb.Path {
	var out []*gpb.Path
	for n := 0; n < len(scopes); {
		parent := parentOf(scopes[n])
		end := n + 1
		for parent != nil && end < len(scopes) && sameParent(scopes[end], parent) {
			end++
		}
		if parent != nil && end-n >= coalesceAt {
			out = append(out, parent)
		} else {
			out = append(out, scopes[n:end]...)
		}
		n = end
	}
	return journal.Outermost(out)
}

// parentOf returns p without its last element, nil when that leaves no
// element (the origin's root is never read in place of its scopes).
func parentOf(p *gpb.Path) *gpb.Path {
	elems := p.GetElem()
	if len(elems) < 2 {
		return nil
	}
	return &gpb.Path{Origin: p.GetOrigin(), Target: p.GetTarget(), Elem: elems[:len(elems)-1]}
}

func sameParent(p, parent *gpb.Path) bool {
	q := parentOf(p)
	return q != nil && q.GetOrigin() == parent.GetOrigin() && q.GetTarget() == parent.GetTarget() &&
		slices.EqualFunc(q.GetElem(), parent.GetElem(), func(a, b *gpb.PathElem) bool {
			return a.GetName() == b.GetName() && maps.Equal(a.GetKey(), b.GetKey())
		})
}
