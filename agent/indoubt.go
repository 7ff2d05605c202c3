package agent

import (
	"context"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// inDoubtPaths are the paths written by the proposals the device may have
// taken without the journal recording it: committed proposals after the
// last applied one, up to the newest a Set may have carried (Agent.reached;
// after a start, every proposal). Their clients may have been answered
// already (completeBatch answers before recording), so the re-push must
// not put an older value back over what they wrote: the proposals
// themselves are sent again right after the re-push, and a rejected one
// gets its paths restored (Agent.restore).
type inDoubtPaths struct {
	// at holds the keys of the written paths; covering the keys of the
	// written paths and of every path above them.
	at, covering map[string]bool
}

// inDoubt returns the paths of the proposals in doubt (see inDoubtPaths).
func (a *Agent) inDoubt(ctx context.Context) (*inDoubtPaths, error) {
	d := &inDoubtPaths{at: map[string]bool{}, covering: map[string]bool{}}
	c, err := a.j.Configuration(ctx)
	if err != nil {
		return nil, err
	}
	from, through := c.GetApplied().GetIndex()+1, min(a.reached, c.GetLastIndex())
	if from > through {
		return d, nil
	}
	err = a.j.Proposals(ctx, from, through, func(p *journal.Proposal) error {
		ch := p.GetChange()
		if p.GetPhase() != journal.PhaseChange || ch.GetCommit() != journal.StatusComplete || journal.Finished(ch.GetApply()) ||
			ch.GetAbortedBy() != 0 {
			// Not in doubt; an aborted one was restored (Agent.restore)
			// before the failure it depends on was recorded.
			return nil
		}
		for _, v := range ch.GetValues() {
			d.at[string(journal.PathKey(v.GetPath()))] = true
			for key := range coveringKeys(v.GetPath()) {
				d.covering[string(key)] = true
			}
		}
		return nil
	})
	return d, err
}

// holds reports whether the re-push must leave applied value pv out: pv is
// at or below a path in doubt, or is a delete at or above one. (A value
// above one, a JSON value holding the path, is re-pushed: leaving it out
// would lose it on a device that restarted empty.)
func (d *inDoubtPaths) holds(pv *journal.PathValue) bool {
	if len(d.at) == 0 {
		return false
	}
	if pv.GetDeleted() && d.covering[string(journal.PathKey(pv.GetPath()))] {
		return true
	}
	return d.coversPath(pv.GetPath())
}

// coversPath reports whether p is at or below a path in doubt.
func (d *inDoubtPaths) coversPath(p *gpb.Path) bool {
	for key := range coveringKeys(p) {
		if d.at[string(key)] {
			return true
		}
	}
	return false
}
