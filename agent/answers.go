package agent

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// This file is the driver's side of "an answer is an answer" (docs/agent.md,
// "Answers"): reading an in-doubt Set back, and the bounded retries of an
// acknowledged change the operator configured (Options.RetryCodes).

// Retrying is a change the agent is sending again (Options.RetryCodes),
// for Status.
type Retrying struct {
	// Proposal is the change's index; Attempts the Sends so far; Since
	// when the first was sent; LastError the device's last answer.
	Proposal  uint64
	Attempts  int
	Since     time.Time
	LastError string
}

// retryState is the change being sent, attempt by attempt; only the
// applier goroutine uses it.
type retryState struct {
	proposal uint64
	attempts int
	since    time.Time
}

// attempted counts a send of the Set whose first proposal is first and
// returns the sends so far and the time since the first.
func (a *Agent) attempted(first uint64) (int, time.Duration) {
	if a.retry.proposal != first {
		a.retry = retryState{proposal: first, since: time.Now()}
	}
	a.retry.attempts++
	return a.retry.attempts, time.Since(a.retry.since)
}

// retried ends the sends of the Set whose first proposal is first: its
// outcome is decided.
func (a *Agent) retried(first uint64) {
	if a.retry.proposal == first {
		a.retry = retryState{}
	}
	a.mu.Lock()
	changed := a.status.Retrying != nil
	a.status.Retrying = nil
	a.mu.Unlock()
	if changed {
		a.broadcast()
	}
}

// retryAfter waits out the backoff before sending an acknowledged change
// the device refused with a code the operator configured to retry
// (ev.Attempt sends so far), reporting it meanwhile (Status.Retrying, the
// retries counter, a warning). It returns false if the session or ctx
// ended first.
func (a *Agent) retryAfter(ctx context.Context, s *session, ev Event, log *slog.Logger) bool {
	delay := a.opts.BackoffInitial << min(ev.Attempt-1, 20)
	delay = min(delay, a.opts.BackoffMax, max(a.opts.RetryFor-ev.Elapsed, 0))
	a.mu.Lock()
	a.status.SetRetries++
	a.status.LastError = ev.Err.Error()
	a.status.Retrying = &Retrying{Proposal: ev.Batch.First, Attempts: ev.Attempt, Since: a.retry.since, LastError: ev.Err.Error()}
	a.mu.Unlock()
	a.broadcast()
	log.Warn("device refused an acknowledged change with a code configured to retry; sending it again",
		"proposal", ev.Batch.First, "code", status.Code(ev.Err), "err", status.Convert(ev.Err).Message(),
		"attempt", ev.Attempt, "of", a.opts.RetryAttempts, "retry_in", delay)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
	case <-ctx.Done():
	}
	return false
}

// giveUp records an acknowledged change the device kept refusing past
// the retries' bounds applied, with its values out of sync
// (journal.CompleteApplyOutOfSync): its client was told it is committed;
// resolve settles it.
func (a *Agent) giveUp(ctx context.Context, step Step, ev Event, log *slog.Logger) error {
	st := status.Convert(ev.Err)
	msg := st.Message() + " (the device kept refusing this acknowledged change; retried " +
		pluralTimes(ev.Attempt-1) + " over " + ev.Elapsed.Round(time.Millisecond).String() + ")"
	if _, _, err := a.j.CompleteApplyOutOfSync(ctx, step.Index, step.Term, uint32(st.Code()), msg); err != nil {
		return err
	}
	a.noteApplied(step.Index)
	a.noteRefused(ev.Err)
	log.Error("the device kept refusing an acknowledged change: it is recorded applied with its paths out of sync until resolved (gnmi-sidecar status, gnmi-sidecar resolve)",
		"proposal", step.Index, "code", st.Code(), "err", st.Message(), "attempts", ev.Attempt, "for", ev.Elapsed)
	return nil
}

func pluralTimes(n int) string {
	if n == 1 {
		return "once"
	}
	return strconv.Itoa(n) + " times"
}

// readBack settles a Set in doubt (batch b, carrying proposals ps): it
// reads the device at the paths the proposals write and tells whether the
// device holds what they write (journal.DeviceHolds), within ApplyTimeout.
// A device that cannot be read is ReadFailed: the connection is treated as
// lost.
func (a *Agent) readBack(ctx context.Context, s *session, ps []*journal.Proposal, b *changeBatch, log *slog.Logger) ReadBack {
	var values []*journal.PathValue
	for _, p := range ps {
		values = append(values, p.GetChange().GetValues()...)
	}
	rctx, cancel := context.WithTimeout(s.ctx, a.opts.ApplyTimeout)
	defer cancel()
	if b.creds != nil {
		rctx = metadata.NewOutgoingContext(rctx, b.creds)
	}
	target := b.req.GetPrefix().GetTarget()
	if target == "" {
		target = a.opts.DeviceTarget
	}
	updates, err := s.reader.Read(rctx, target, readPaths(values)...)
	if err == nil {
		var held bool
		if held, err = a.j.DeviceHolds(updates, values); err == nil {
			log.Info("a Set's answer was in doubt; read back from the device", "first", b.first, "last", b.last, "applied", held)
			if held {
				return ReadApplied
			}
			return ReadNotApplied
		}
	}
	if ctx.Err() == nil {
		log.Warn("a Set's answer is in doubt and the device cannot be read back: treating the connection as lost",
			"first", b.first, "last", b.last, "err", err)
	}
	return ReadFailed
}

// readPaths returns the paths to read values back at: theirs, none under
// another, without wildcards (journal.DeviceHolds takes a wildcard delete
// as held).
func readPaths(values []*journal.PathValue) []*gpb.Path {
	var out []*gpb.Path
	for _, v := range values {
		if !journal.IsWildcard(v.GetPath()) {
			out = append(out, v.GetPath())
		}
	}
	return journal.Outermost(out)
}

// blame returns the proposal of ps, a batch the device refused with err,
// that the refusal names: the only one with an operation whose path the
// device's message or its BadRequest details mention. 0 if none or more
// than one does: the batch's proposals are then sent one at a time to
// find it. A blamed proposal gets the device's answer when its turn comes
// (Agent.refusedAt), as its client would have directly, and the device
// never sees its values again.
func blame(ps []*journal.Proposal, err error) uint64 {
	st := status.Convert(err)
	texts := []string{st.Message()}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, fv := range br.GetFieldViolations() {
				texts = append(texts, fv.GetField(), fv.GetDescription())
			}
		}
	}
	var found uint64
	for _, p := range ps {
		for _, op := range p.GetChange().GetOps() {
			name := gnmipath.String(op.GetPath())
			if !slices.ContainsFunc(texts, func(t string) bool { return name != "/" && strings.Contains(t, name) }) {
				continue
			}
			if found != 0 && found != p.GetIndex() {
				return 0
			}
			found = p.GetIndex()
		}
	}
	return found
}
