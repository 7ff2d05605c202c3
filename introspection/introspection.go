package introspection

// This file checks requests and answers Get; subscribe.go answers
// Subscribe. The tree is rendered by render.go, from its tables of leaves
// under the names schema.go spells, out of what view.go reads.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/agent"
	"github.com/gnmi-sidecar/gnmi-sidecar/drift"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
)

// Origin is the gNMI origin of the tree, which the proxy routes here.
const Origin = proxy.IntrospectionOrigin

// Options configures a Tree.
type Options struct {
	// Journal and Agent are the sidecar's journal and the agent driving
	// it: the tree shows their state.
	Journal *journal.Journal
	Agent   *agent.Agent
	// Address is the device's gNMI address, shown as device/state/address.
	Address string
	// Drift is the drift watcher (package drift), shown as drift/ and
	// compared on request as diff/; nil: neither is served.
	Drift DriftSource
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// DriftSource is what the tree shows of drift detection: a
// *drift.Watcher.
type DriftSource interface {
	// Status and Records are the watcher's state and drifted paths
	// (drift/).
	Status() drift.Status
	Records() []drift.Record
	// Diff compares the device with the journal now (diff/).
	Diff(ctx context.Context, paths []*gpb.Path) ([]drift.Diff, time.Time, error)
}

// Tree answers Get and Subscribe requests of origin gnmi-sidecar: it
// implements proxy.Introspection.
type Tree struct {
	agent *agent.Agent
	src   treeSource
	log   *slog.Logger
}

var _ proxy.Introspection = (*Tree)(nil)

// New returns the Tree of opts.Journal and opts.Agent.
func New(opts Options) (*Tree, error) {
	if opts.Journal == nil || opts.Agent == nil {
		return nil, errors.New("introspection: Journal and Agent are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Tree{
		agent: opts.Agent,
		src:   treeSource{journal: opts.Journal, status: opts.Agent.Status, address: opts.Address, drift: opts.Drift},
		log:   opts.Logger.With("component", "introspection"),
	}, nil
}

// settle waits until the journal records every Set already acknowledged
// (agent.Settle), so that what a client reads next includes its own
// acknowledged Sets.
func (t *Tree) settle(ctx context.Context) error {
	if err := t.agent.Settle(ctx); err != nil {
		return proxy.JournalError(err)
	}
	return nil
}

// Get answers a Get of origin gnmi-sidecar: one notification per
// request path, with the request's prefix and update paths relative to it.
// A path that matches no leaf is NotFound; type CONFIG matches nothing
// (the tree is all state) and answers empty notifications.
func (t *Tree) Get(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	if err := noExtensions(req.GetExtension()); err != nil {
		return nil, err
	}
	if _, ok := gpb.GetRequest_DataType_name[int32(req.GetType())]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown Get data type %d", req.GetType())
	}
	if err := checkEncoding(req.GetEncoding()); err != nil {
		return nil, err
	}
	if err := t.settle(ctx); err != nil {
		return nil, err
	}
	patterns, err := requestPatterns(req.GetPrefix(), req.GetPath())
	if err != nil {
		return nil, err
	}
	resp := &gpb.GetResponse{}
	for _, p := range patterns {
		n := &gpb.Notification{Prefix: req.GetPrefix()}
		if req.GetType() != gpb.GetRequest_CONFIG {
			leaves, err := t.read(ctx, p)
			if err != nil {
				return nil, err
			}
			n.Update = updatesOf(leaves, req.GetPrefix())
		}
		n.Timestamp = time.Now().UnixNano()
		resp.Notification = append(resp.Notification, n)
	}
	return resp, nil
}

// read renders the leaves p selects, NotFound if there are none.
func (t *Tree) read(ctx context.Context, p treePattern) ([]treeLeaf, error) {
	v := newView(t.src, []treePattern{p})
	if _, err := v.refresh(ctx); err != nil {
		return nil, readError(err)
	}
	leaves := v.all()
	if len(leaves) > 0 {
		return leaves, nil
	}
	if len(v.missing) > 0 {
		return nil, status.Errorf(codes.NotFound, "%s: no such proposal (kept: %s)", p, keptRange(v.conf))
	}
	return nil, status.Errorf(codes.NotFound, "%s: no such element", p)
}

// readError is the status of a failed read of the tree: a gRPC status as
// it is (a comparison of the device, diff/), else the journal's.
func readError(err error) error {
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	return proxy.JournalError(err)
}

// keptRange describes the proposals retention keeps: "3-42" or "none".
func keptRange(c *journal.Configuration) string {
	if c.GetLastIndex() == 0 || c.GetLastIndex() < c.GetFirstIndex() {
		return "none"
	}
	return fmt.Sprintf("%d-%d", c.GetFirstIndex(), c.GetLastIndex())
}

// requestPatterns checks a request's prefix and paths and returns one
// pattern per path (the prefix alone if there is no path). The prefix must
// be concrete (no wildcard, every list entry named by its key), so that
// update paths can be relative to it.
func requestPatterns(prefix *gpb.Path, paths []*gpb.Path) ([]treePattern, error) {
	pp, err := newPattern(prefix, nil)
	if err != nil {
		return nil, err
	}
	if !pp.concrete() {
		return nil, status.Errorf(codes.InvalidArgument, "prefix %s has a wildcard: put wildcards in the paths", pp)
	}
	if list, ok := pp.keylessList(); ok {
		// It stands for every entry, and the updates, relative to the
		// prefix, could not say which one they belong to.
		return nil, status.Errorf(codes.InvalidArgument, "prefix %s names list %s without its key: put the list in the paths", pp, list)
	}
	if len(paths) == 0 {
		return []treePattern{pp}, nil
	}
	out := make([]treePattern, 0, len(paths))
	for _, path := range paths {
		p, err := newPattern(prefix, path)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// noExtensions refuses extensions: none applies to this tree (History is
// refused by the caller with its own message).
func noExtensions(exts []*gnmi_ext.Extension) error {
	if len(exts) > 0 {
		return status.Errorf(codes.InvalidArgument, "origin %q takes no extensions (got %T)", Origin, exts[0].GetExt())
	}
	return nil
}

// checkEncoding accepts the encodings a scalar tree answers the same way:
// every leaf is a scalar TypedValue whatever the request asks for.
func checkEncoding(e gpb.Encoding) error {
	if _, ok := gpb.Encoding_name[int32(e)]; !ok {
		return status.Errorf(codes.InvalidArgument, "unknown encoding %d", e)
	}
	if e == gpb.Encoding_BYTES {
		return status.Errorf(codes.Unimplemented, "encoding BYTES is not supported by origin %q: its leaves are scalars (use JSON, JSON_IETF, PROTO or ASCII)", Origin)
	}
	return nil
}

// updatesOf turns leaves into updates relative to prefix.
func updatesOf(leaves []treeLeaf, prefix *gpb.Path) []*gpb.Update {
	out := make([]*gpb.Update, len(leaves))
	for n, l := range leaves {
		out[n] = &gpb.Update{Path: relativePath(l.path, prefix), Val: l.val}
	}
	return out
}

// relativePath is the path of a leaf relative to a request's (concrete)
// prefix; it names the origin when the prefix does not.
func relativePath(path []*gpb.PathElem, prefix *gpb.Path) *gpb.Path {
	out := gnmipath.Relative(&gpb.Path{Elem: path}, prefix)
	if prefix.GetOrigin() == "" {
		out.Origin = Origin
	}
	return out
}
