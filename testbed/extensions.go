package testbed

import (
	"encoding/json"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/goyang/pkg/yang"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The gNMI extensions (gnmi_ext) as the device treats them, per RPC:
//
//	extension           Get              Set              Subscribe
//	RegisteredExtension ignored (¹)      ignored (¹)      ignored (¹)
//	MasterArbitration   ignored          enforced         ignored
//	History             Unimplemented    InvalidArgument  Unimplemented
//	Commit              InvalidArgument  Unimplemented    InvalidArgument
//	Depth               honoured         InvalidArgument  honoured
//	ConfigSubscription  InvalidArgument  InvalidArgument  Unimplemented
//
// (¹) The device understands no RegisteredExtension, whatever its id, and
// ignores it, as a real target does; with Options.EchoExtensions it sends
// each back unchanged in the response's extensions (Subscribe: with each
// sync_response), so that a proxy's relaying of response extensions can
// be checked. Not by default: a client that tells a gnmi-sidecar by its
// extension (id 999) in a SetResponse would take the echo for one.
// Capabilities ignores the other extensions (and echoes the same way). An
// extension of a kind the device's gNMI does not know (an empty oneof) is
// ignored, as protobuf ignores unknown fields.

// rpc names the RPC an extension arrives with, for messages.
type rpc string

const (
	rpcGet       rpc = "Get"
	rpcSet       rpc = "Set"
	rpcSubscribe rpc = "Subscribe"
)

// checkExtensions refuses the extensions of a request that the device
// does not support or that do not belong to the RPC, and returns the
// Depth extension's level (0: none).
func checkExtensions(r rpc, exts []*gnmi_ext.Extension) (depth uint32, err error) {
	seenDepth := false
	for _, e := range exts {
		switch x := e.GetExt().(type) {
		case *gnmi_ext.Extension_History:
			if r == rpcSet {
				return 0, status.Error(codes.InvalidArgument, "the History extension applies to Get and Subscribe, not to Set")
			}
			return 0, status.Error(codes.Unimplemented, "the History extension is not supported by this device: it serves its current data only")
		case *gnmi_ext.Extension_Commit:
			if r != rpcSet {
				return 0, status.Errorf(codes.InvalidArgument, "the commit-confirmed extension (Commit) applies to Set, not to %s", r)
			}
			return 0, status.Error(codes.Unimplemented, "the commit-confirmed extension (Commit) is not supported by this device")
		case *gnmi_ext.Extension_Depth:
			if r == rpcSet {
				return 0, status.Error(codes.InvalidArgument, "the Depth extension applies to Get and Subscribe, not to Set")
			}
			if seenDepth {
				return 0, status.Error(codes.InvalidArgument, "more than one Depth extension in one request")
			}
			seenDepth, depth = true, x.Depth.GetLevel()
		case *gnmi_ext.Extension_ConfigSubscription:
			if r != rpcSubscribe {
				return 0, status.Errorf(codes.InvalidArgument, "the ConfigSubscription extension applies to Subscribe, not to %s", r)
			}
			return 0, status.Error(codes.Unimplemented, "the ConfigSubscription extension is not supported by this device")
		}
	}
	return depth, nil
}

// echoed returns, with Options.EchoExtensions, the RegisteredExtensions
// among exts, copied: the device then answers a request with the
// registered extensions it carried. Without it, none.
func (d *Device) echoed(exts []*gnmi_ext.Extension) []*gnmi_ext.Extension {
	if !d.opts.EchoExtensions {
		return nil
	}
	var out []*gnmi_ext.Extension
	for _, e := range exts {
		if e.GetRegisteredExt() != nil {
			out = append(out, proto.CloneOf(e))
		}
	}
	return out
}

// The Depth extension (gnmi_ext.Depth, OpenConfig gnmi-depth.md v0.1.0):
// level N > 0 keeps the leaves and leaf-lists up to N levels below the
// requested node. Its own leaves are level 1; those of a container or list
// entry right below it level 2, and so on; the entries of a requested list
// (a path ending at a list without keys) count as the list itself. In
// terms of full paths, a leaf at path L under a requested path R is kept
// when len(L) - len(R) <= N (a leaf requested itself is always kept).

// depthAllows reports whether leaf is within depth levels of the
// requested path req (depth 0: no limit). A trailing "..." of req is not
// a level.
func depthAllows(depth uint32, req, leaf *gpb.Path) bool {
	if depth == 0 {
		return true
	}
	n := len(req.GetElem())
	if n > 0 && req.GetElem()[n-1].GetName() == "..." {
		n--
	}
	return len(leaf.GetElem())-n <= int(depth)
}

// limitDepth applies depth to the updates a Get of the full path req
// returned (paths relative to prefix): scalar leaves by depthAllows, JSON
// values by pruning what lies deeper (pruneJSON). Updates left with
// nothing are dropped.
func limitDepth(schema *yang.Entry, prefix, req *gpb.Path, ups []*gpb.Update, depth uint32) ([]*gpb.Update, error) {
	if depth == 0 {
		return ups, nil
	}
	var out []*gpb.Update
	for _, u := range ups {
		full := &gpb.Path{Elem: append(append([]*gpb.PathElem{}, prefix.GetElem()...), u.GetPath().GetElem()...)}
		raw, ietf := u.GetVal().GetJsonIetfVal(), true
		if raw == nil {
			raw, ietf = u.GetVal().GetJsonVal(), false
		}
		if raw == nil {
			if depthAllows(depth, req, full) {
				out = append(out, u)
			}
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, pathError(codes.Internal, full, "re-reading the encoded value: %v", err)
		}
		entry := schemaEntry(schema, full)
		listNode := entry != nil && entry.IsList() && len(full.GetElem()) > 0 && len(full.GetElem()[len(full.GetElem())-1].GetKey()) == 0
		base := len(full.GetElem()) - len(req.GetElem()) + 1 // the level of the node's own leaves
		var kept any
		var ok bool
		if listNode {
			kept, ok = pruneEntries(v, entry, base, int(depth))
		} else {
			kept, ok = pruneJSON(v, entry, base, int(depth))
		}
		if !ok {
			continue
		}
		b, err := json.Marshal(kept)
		if err != nil {
			return nil, pathError(codes.Internal, full, "encoding the value: %v", err)
		}
		tv := &gpb.TypedValue{Value: &gpb.TypedValue_JsonVal{JsonVal: b}}
		if ietf {
			tv = &gpb.TypedValue{Value: &gpb.TypedValue_JsonIetfVal{JsonIetfVal: b}}
		}
		out = append(out, &gpb.Update{Path: u.GetPath(), Val: tv})
	}
	return out, nil
}

// schemaEntry is the schema node at p (element names; keys ignored), nil
// if the schema has none.
func schemaEntry(root *yang.Entry, p *gpb.Path) *yang.Entry {
	e := root
	for _, el := range p.GetElem() {
		if e == nil {
			return nil
		}
		e = e.Dir[el.GetName()]
	}
	return e
}

// pruneJSON keeps, of the JSON value v of the node entry whose own leaves
// are at level, what lies within depth levels: leaves and leaf-lists at
// level <= depth, containers and lists only if their leaves are. ok is
// false when nothing is left. entry may be nil (a node the schema walk
// did not find): then JSON objects count as containers, arrays of objects
// as lists.
func pruneJSON(v any, entry *yang.Entry, level, depth int) (any, bool) {
	obj, isObj := v.(map[string]any)
	if !isObj {
		return v, level <= depth // a leaf or leaf-list value
	}
	out := map[string]any{}
	for k, member := range obj {
		var child *yang.Entry
		if entry != nil {
			child = entry.Dir[localName(k)]
		}
		switch {
		case child != nil && (child.IsLeaf() || child.IsLeafList()), child == nil && !isStructured(member):
			if level <= depth {
				out[k] = member
			}
		case child != nil && child.IsList(), child == nil && isList(member):
			if kept, ok := pruneEntries(member, child, level+1, depth); ok {
				out[k] = kept
			}
		default: // a container
			if kept, ok := pruneJSON(member, child, level+1, depth); ok {
				out[k] = kept
			}
		}
	}
	return out, len(out) > 0
}

// pruneEntries prunes each entry of a JSON list, whose entries' leaves
// are at level: an array of entries (RFC 7951) or, in the JSON encoding,
// an object of entries by key.
func pruneEntries(v any, entry *yang.Entry, level, depth int) (any, bool) {
	switch x := v.(type) {
	case []any:
		var out []any
		for _, e := range x {
			if kept, ok := pruneJSON(e, entry, level, depth); ok {
				out = append(out, kept)
			}
		}
		return out, len(out) > 0
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if kept, ok := pruneJSON(e, entry, level, depth); ok {
				out[k] = kept
			}
		}
		return out, len(out) > 0
	}
	return v, level <= depth
}

func isStructured(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return true
	case []any:
		return isList(x)
	}
	return false
}

// isList reports whether v is a JSON array of objects (a list, not a
// leaf-list).
func isList(v any) bool {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return false
	}
	_, obj := arr[0].(map[string]any)
	return obj
}
