package agent

// Whose credentials a change's device Set carries (docs/security.md, "The
// credential model"): with a device account (Options.Username or
// Password), every RPC the agent makes carries it, and a client's change
// its client's custom headers still (its credentials removed:
// WithoutCredentials); without one, a client's change carries the client's
// own request metadata (credentials and custom headers). Either is held in
// memory from the proposal until its apply finishes, and never journaled. Proposals of different clients' metadata never share a
// device Set. A rollback a client asks for (ProposeRollback, CancelCommit)
// and an operator's resolve retry carry the client's metadata the same way.
// The sidecar's own Sets (re-push, drift revert, the revert of an expired
// commit-confirmed) and a change or rollback whose client's metadata a
// restart lost carry none.

import (
	"context"
	"reflect"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

type credentialsKey struct{}

// WithCredentials returns ctx carrying md, the request metadata a change
// proposed with ctx (ProposeChange, ProposeConfirmedChange) sends the
// device with: the client's, as a direct client would have sent them. It
// is ignored when the agent has a device account.
func WithCredentials(ctx context.Context, md metadata.MD) context.Context {
	return context.WithValue(ctx, credentialsKey{}, md)
}

func credentialsFrom(ctx context.Context) metadata.MD {
	md, _ := ctx.Value(credentialsKey{}).(metadata.MD)
	return md
}

// deviceAccount reports whether the agent speaks to the device with its own
// account.
func (a *Agent) deviceAccount() bool { return a.opts.Username != "" || a.opts.Password != "" }

// credentialKeys are the request metadata that authenticate a client: a
// device account replaces them.
var credentialKeys = []string{"username", "password", "authorization"}

// WithoutCredentials returns a copy of md without the client's credentials
// (username, password, authorization): the custom headers (trace ids,
// tenant headers) a device RPC made for the client carries along with a
// device account's credentials. Nil if nothing is left.
func WithoutCredentials(md metadata.MD) metadata.MD {
	var out metadata.MD
	for k, v := range md {
		if slices.Contains(credentialKeys, strings.ToLower(k)) {
			continue
		}
		if out == nil {
			out = metadata.MD{}
		}
		out[k] = slices.Clone(v)
	}
	return out
}

// clientMetadata is what of a client's request metadata md its device Sets
// carry: all of it, or, with a device account, all but its credentials.
func (a *Agent) clientMetadata(md metadata.MD) metadata.MD {
	if a.deviceAccount() {
		return WithoutCredentials(md)
	}
	return md
}

// holdCredentials keeps md for proposal i until its apply finishes.
func (a *Agent) holdCredentials(i uint64, md metadata.MD) {
	if len(md) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.creds[i] = md
}

// releaseCredentials forgets the metadata held for proposal i if it is
// still md itself (the same map, not an equal one): a proposal journaled
// again, or refused, after a shared transaction failed may have lost index
// i to another client's proposal, whose metadata it must not take away.
func (a *Agent) releaseCredentials(i uint64, md metadata.MD) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if held, ok := a.creds[i]; ok && reflect.ValueOf(held).UnsafePointer() == reflect.ValueOf(md).UnsafePointer() {
		delete(a.creds, i)
	}
}

// dropCredentials forgets the metadata of proposals up to i (finished).
func (a *Agent) dropCredentials(i uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	deleteThrough(a.creds, i)
}

// credentials returns the metadata proposal i's device Set carries (nil:
// none of its client's).
func (a *Agent) credentials(i uint64) metadata.MD {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.creds[i]
}

// sameCredentials reports whether two proposals' metadata are the same
// identity: only then may they share a device Set.
func sameCredentials(x, y metadata.MD) bool {
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if w, ok := y[k]; !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

// ProposeRollback journals a client's rollback of proposal i
// (journal.ProposeRollbackBy). Without a device account the rollback's
// device Sets carry the client's request metadata from ctx (WithCredentials),
// as its changes' do.
func (a *Agent) ProposeRollback(ctx context.Context, i uint64, by journal.Sender) (*journal.Proposal, error) {
	held := a.holdRollbackCredentials(i, credentialsFrom(ctx))
	p, _, err := a.j.ProposeRollbackBy(ctx, i, by)
	if err != nil {
		if held {
			a.dropRollbackCredentials(i)
		}
		return nil, err
	}
	a.Notify()
	return p, nil
}

// CancelCommit cancels the outstanding commit-confirmed id for a client
// (journal.CancelCommit): the rollback the agent then proposes carries the
// client's request metadata from ctx, as ProposeRollback's does.
func (a *Agent) CancelCommit(ctx context.Context, id string) (*journal.CommitConfirm, error) {
	// Held before the cancel is durable: the agent may propose and send
	// the rollback at once.
	var held uint64
	if out, err := a.j.CommitConfirm(ctx); err == nil && out.GetId() == id && a.holdRollbackCredentials(out.GetProposal(), credentialsFrom(ctx)) {
		held = out.GetProposal()
	}
	rec, err := a.j.CancelCommit(ctx, id)
	if err != nil {
		if held != 0 {
			a.dropRollbackCredentials(held)
		}
		return nil, err
	}
	a.Notify()
	return rec, nil
}

// holdRollbackCredentials keeps md for the rollback of proposal i until
// its apply is recorded, unless the agent has a device account or the
// rollback has a client's already (a second request for the same rollback
// is refused by the journal). It reports whether it kept them.
func (a *Agent) holdRollbackCredentials(i uint64, md metadata.MD) bool {
	if md = a.clientMetadata(md); len(md) == 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.rollbackCreds[i]; ok {
		return false
	}
	a.rollbackCreds[i] = md
	return true
}

func (a *Agent) dropRollbackCredentials(i uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.rollbackCreds, i)
}

// rollbackCredentials returns the metadata the rollback of proposal i
// carries (nil: none of its client's).
func (a *Agent) rollbackCredentials(i uint64) metadata.MD {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rollbackCreds[i]
}
