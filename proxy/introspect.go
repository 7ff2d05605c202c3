package proxy

// Introspection: the journal's state as a read-only gNMI tree under origin
// gnmi-sidecar (docs/introspection.md). This file checks requests and
// answers Get; introspect_subscribe.go answers Subscribe. The tree is
// rendered by introspect_render.go from what introspect_view.go reads.

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

// introspectGet answers a Get of origin gnmi-sidecar: one notification per
// request path, with the request's prefix and update paths relative to it.
// A path that matches no leaf is NotFound; type CONFIG matches nothing
// (the tree is all state) and answers empty notifications.
func (s *Server) introspectGet(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	if err := noExtensions(req.GetExtension()); err != nil {
		return nil, err
	}
	if _, ok := gpb.GetRequest_DataType_name[int32(req.GetType())]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown Get data type %d", req.GetType())
	}
	if err := checkEncoding(req.GetEncoding()); err != nil {
		return nil, err
	}
	if err := s.settle(ctx); err != nil {
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
			leaves, err := s.introspectRead(ctx, p)
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

// introspectRead renders the leaves p selects, NotFound if there are none.
func (s *Server) introspectRead(ctx context.Context, p treePattern) ([]treeLeaf, error) {
	v := newView(s.introspectSource(), []treePattern{p})
	if _, err := v.refresh(ctx); err != nil {
		return nil, journalError(err)
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

// introspectSource reads the sidecar's journal and agent.
func (s *Server) introspectSource() treeSource {
	return treeSource{journal: s.opts.Journal, status: s.opts.Agent.Status, address: s.opts.Target}
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
		return status.Errorf(codes.InvalidArgument, "origin %q takes no extensions (got %T)", IntrospectionOrigin, exts[0].GetExt())
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
		return status.Errorf(codes.Unimplemented, "encoding BYTES is not supported by origin %q: its leaves are scalars (use JSON, JSON_IETF, PROTO or ASCII)", IntrospectionOrigin)
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
	out := relativeTo(&gpb.Path{Elem: path}, prefix)
	if prefix.GetOrigin() == "" {
		out.Origin = IntrospectionOrigin
	}
	return out
}
