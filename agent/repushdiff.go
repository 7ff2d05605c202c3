package agent

import (
	"context"
	"log/slog"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// deviceHolds reads what the device holds in the journal's read scopes
// before a re-push (docs/values.md, before-images): a device that came
// back with its startup configuration, or that a sidecar restart finds as
// it was, is then sent only the applied values it does not hold. Nil when
// the journal has no read scopes or the device cannot be read: everything
// is re-pushed, as always.
//
// The scopes are read coalesced (devread.ReadCoalesced): a journal filled
// by Sets of many list entries has a scope per entry, and a Get each was
// most of the re-push. What a parent read in their place holds outside
// them, ReadDeviceConfig leaves out.
func (a *Agent) deviceHolds(ctx context.Context, s *session, log *slog.Logger) *journal.DeviceConfig {
	scopes, err := a.j.ReadScopes(ctx)
	if err != nil || len(scopes) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(s.ctx, a.opts.ApplyTimeout)
	defer cancel()
	values, _, err := s.reader.ReadCoalesced(rctx, a.opts.DeviceTarget, scopes)
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
