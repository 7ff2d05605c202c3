package devread

import (
	"context"
	"maps"
	"slices"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// CoalesceAt is the number of paths with the same parent (the entries of
// one list, as /interfaces/interface[name=…] under /interfaces) from which
// ReadCoalesced reads the parent once instead of each path: a Get each is
// a round trip apiece (1.4 s for 3,000 entries on loopback), a Get of
// their parent one.
const CoalesceAt = 16

// ReadCoalesced is Read of paths, except that CoalesceAt or more of them
// sharing a parent of at least one element are read as that parent, in
// one read. Wide are the parents read so: of what they hold, only what
// lies in paths was asked for, and the caller leaves the rest out (the
// values may hold the parent's other entries). A path with a wildcard is
// read as it is. A device that refuses a parent's read (an account
// limited to some entries, say) is read path by path, and wide is then
// nil.
func (r *Reader) ReadCoalesced(ctx context.Context, target string, paths []*gpb.Path) (values []*gpb.Update, wide []*gpb.Path, err error) {
	plan, wide := readPlan(paths)
	if len(wide) == 0 {
		values, err = r.Read(ctx, target, paths...)
		return values, nil, err
	}
	values, err = r.Read(ctx, target, plan...)
	if err != nil && refusal(err) {
		if r.log != nil {
			r.log.Info("the device refused a read of the parent of many paths: reading each path", "paths", len(paths), "err", err.Error())
		}
		values, err = r.Read(ctx, target, paths...)
		return values, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	return values, wide, nil
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

// readPlan returns the paths to read so as to know the device's
// configuration at paths (see ReadCoalesced), and the parents among them.
func readPlan(paths []*gpb.Path) (plan, wide []*gpb.Path) {
	sorted := slices.Clone(paths)
	slices.SortFunc(sorted, func(a, b *gpb.Path) int { return slices.Compare(journal.PathKey(a), journal.PathKey(b)) })
	for n := 0; n < len(sorted); {
		parent := parentOf(sorted[n])
		end := n + 1
		for parent != nil && end < len(sorted) && sameParent(sorted[end], parent) {
			end++
		}
		if parent != nil && end-n >= CoalesceAt {
			plan = append(plan, parent)
			wide = append(wide, parent)
		} else {
			plan = append(plan, sorted[n:end]...)
		}
		n = end
	}
	return journal.Outermost(plan), wide
}

// parentOf returns p without its last element, nil when that leaves no
// element (the origin's root is never read in place of its paths) or p has
// a wildcard.
func parentOf(p *gpb.Path) *gpb.Path {
	elems := p.GetElem()
	if len(elems) < 2 || journal.IsWildcard(p) {
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
