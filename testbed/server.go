package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// gnmiServer is the gNMI service of a Device for one run (Start to Stop).
type gnmiServer struct {
	gpb.UnimplementedGNMIServer
	d *Device
}

// gnmiVersion is the gNMI specification version of the compiled proto.
func gnmiVersion() string {
	if v, ok := proto.GetExtension(gpb.File_github_com_openconfig_gnmi_proto_gnmi_gnmi_proto.Options(), gpb.E_GnmiService).(string); ok && v != "" {
		return v
	}
	return "0.10.0"
}

func (s *gnmiServer) Capabilities(ctx context.Context, req *gpb.CapabilityRequest) (*gpb.CapabilityResponse, error) {
	return &gpb.CapabilityResponse{
		SupportedModels:    s.d.model.Models(),
		SupportedEncodings: s.d.encodings(),
		GNMIVersion:        gnmiVersion(),
		Extension:          s.d.echoed(req.GetExtension()),
	}, nil
}

func (s *gnmiServer) Get(ctx context.Context, req *gpb.GetRequest) (*gpb.GetResponse, error) {
	if s.d.opts.RefuseGet {
		return nil, status.Error(codes.Unimplemented, "Get is not supported by this device; use Subscribe ONCE")
	}
	if s.d.opts.RefuseGetConfig && req.GetType() == gpb.GetRequest_CONFIG {
		return nil, status.Errorf(codes.Unimplemented, "unsupported request type: %s", req.GetType())
	}
	enc := req.GetEncoding()
	switch enc {
	case gpb.Encoding_JSON, gpb.Encoding_JSON_IETF, gpb.Encoding_PROTO:
	default:
		return nil, status.Errorf(codes.Unimplemented, "encoding %v is not supported; use JSON, JSON_IETF or PROTO", enc)
	}
	if err := s.d.refusedEncoding(enc); err != nil {
		return nil, err
	}
	dt := req.GetType()
	if _, ok := gpb.GetRequest_DataType_name[int32(dt)]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown Get data type %d (ALL, CONFIG, STATE or OPERATIONAL)", dt)
	}
	depth, err := checkExtensions(rpcGet, req.GetExtension())
	if err != nil {
		return nil, err
	}
	schema := s.d.model.RootSchema()
	paths := req.GetPath()
	if len(paths) == 0 {
		paths = []*gpb.Path{{}}
	}
	ts := time.Now().UnixNano()
	resp := &gpb.GetResponse{Extension: s.d.echoed(req.GetExtension())}
	joined := make([]*gpb.Path, len(paths)) // per path: its full path, or nil
	joinErrs := make([]error, len(paths))   // per path: why it has none
	var fulls []*gpb.Path                   // what the Get reads (a bad path is refused below)
	for i, p := range paths {
		joined[i], joinErrs[i] = joinPath(req.GetPrefix(), p)
		if joinErrs[i] == nil {
			fulls = append(fulls, joined[i])
		}
	}
	err = s.d.readAt(fulls, func(root ygot.ValidatedGoStruct) error {
		for i, p := range paths {
			full := joined[i]
			if err := joinErrs[i]; err != nil {
				return status.Errorf(codes.InvalidArgument, "%s: %v", pathString(p), err)
			}
			updates, err := resolveGet(schema, root, full, len(req.GetPrefix().GetElem()), enc, dt)
			if err != nil {
				return err
			}
			if updates, err = limitDepth(schema, req.GetPrefix(), full, updates, depth); err != nil {
				return err
			}
			if len(updates) == 0 && depth > 0 {
				return pathError(codes.NotFound, full, "no %v data within Depth %d of this path", dt, depth)
			}
			if len(updates) == 0 {
				return pathError(codes.NotFound, full, "no %v data at this path", dt)
			}
			resp.Notification = append(resp.Notification, &gpb.Notification{Timestamp: ts, Prefix: req.GetPrefix(), Update: updates})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *gnmiServer) Set(ctx context.Context, req *gpb.SetRequest) (*gpb.SetResponse, error) {
	defer trace.StartRegion(ctx, "device.handle").End() // hack/setstages
	d := s.d
	d.mu.Lock()
	d.setCount++
	d.mu.Unlock()

	select {
	case d.setSem <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	defer func() { <-d.setSem }()

	operations := len(req.GetDelete()) + len(req.GetReplace()) + len(req.GetUnionReplace()) + len(req.GetUpdate())
	if err := d.injectSetFaults(ctx, operations); err != nil {
		return nil, err
	}
	if _, err := checkExtensions(rpcSet, req.GetExtension()); err != nil {
		return nil, err
	}
	if err := d.arbitrate(req.GetExtension()); err != nil {
		return nil, err
	}
	if err := d.checkUnionReplace(req); err != nil {
		return nil, err
	}

	// gNMI order: deletes, replaces, the union_replaces, updates. The
	// union_replaces act as one (gNMI 0.10, gnmi-union_replace.md): every
	// one of their paths is cleared first, then their values are written
	// in request order, so their union replaces the data at each path
	// (where two overlap, the later value wins). results holds one
	// UpdateResult per operation, in the order they are applied.
	var ops []setOp
	var results []*gpb.UpdateResult
	add := func(op gpb.UpdateResult_Operation, p *gpb.Path, v *gpb.TypedValue, clear, write bool) error {
		full, err := joinPath(req.GetPrefix(), p)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "%s %s: %v", opName(op), pathString(p), err)
		}
		switch names, keys := wildcards(full); {
		case (names || keys) && op != gpb.UpdateResult_DELETE:
			return pathError(codes.InvalidArgument, full, "%s of a path with a wildcard: it needs a concrete path (wildcards are for delete, Get and Subscribe)", opName(op))
		case names:
			return pathError(codes.Unimplemented, full, "delete of a path with a wildcard element name (* or ...) is not supported by this device; use wildcard keys ([name=*])")
		}
		ops = append(ops, setOp{op: op, path: p, full: full, val: v, clear: clear, write: write})
		if clear || op != gpb.UpdateResult_UNION_REPLACE {
			results = append(results, &gpb.UpdateResult{Path: p, Op: op})
		}
		return nil
	}
	for _, p := range req.GetDelete() {
		if err := add(gpb.UpdateResult_DELETE, p, nil, true, false); err != nil {
			return nil, err
		}
	}
	for _, u := range req.GetReplace() {
		if err := add(gpb.UpdateResult_REPLACE, u.GetPath(), u.GetVal(), true, true); err != nil {
			return nil, err
		}
	}
	for _, u := range req.GetUnionReplace() {
		if err := add(gpb.UpdateResult_UNION_REPLACE, u.GetPath(), nil, true, false); err != nil {
			return nil, err
		}
	}
	for _, u := range req.GetUnionReplace() {
		if err := add(gpb.UpdateResult_UNION_REPLACE, u.GetPath(), u.GetVal(), false, true); err != nil {
			return nil, err
		}
	}
	for _, u := range req.GetUpdate() {
		if err := add(gpb.UpdateResult_UPDATE, u.GetPath(), u.GetVal(), false, true); err != nil {
			return nil, err
		}
	}

	if err := d.refused(ctx, ops); err != nil {
		return nil, err
	}
	lost, err := d.injectPathFaults(ctx, ops)
	if err != nil {
		return nil, err
	}

	// This Set is the only writer: reading the tree needs no lock.
	old := d.current()
	saved := d.opts.Persistent && d.opts.StateFile != ""
	ch, err := applyOps(d.model.RootSchema(), d.model.NewRoot, old, ops, !saved, d.fast)
	if err != nil {
		d.log.Info("set rejected", "err", err)
		return nil, err
	}
	if ch.next != nil {
		// A Set cannot change state: restore boot-time if a replace or
		// delete of the root or of /system dropped it. Only a /system the
		// Set rebuilt can differ, and that one is not shared with the
		// served tree.
		if boot := uint64(d.BootTime().UnixNano()); d.model.BootTime(ch.next) != boot {
			d.model.SetBootTime(ch.next, boot)
		}
	}
	// A Set whose RPC ended (cancelled, past its deadline, its connection
	// gone) is not applied: a real device aborts the commit.
	if err := ctx.Err(); err != nil {
		d.log.Info("set abandoned by its client before it was applied", "err", err)
		return nil, status.FromContextError(err).Err()
	}
	if ch.next != nil {
		if saved {
			if err := d.saveState(ch.next); err != nil {
				return nil, status.Errorf(codes.Internal, "saving configuration to %s: %v", d.opts.StateFile, err)
			}
		}
	}
	ts := time.Now().UnixNano()
	d.commit(old, ch, ts)
	d.noteApplied(ctx)

	d.log.Debug("set applied", "ops", len(results))
	if lost != codes.OK {
		d.noteFault(ctx, "answer lost: "+codeName(lost))
		return nil, status.Errorf(lost, "answer lost after the set was applied (injected fault, %v)", lost)
	}
	return &gpb.SetResponse{Prefix: req.GetPrefix(), Response: results, Timestamp: ts, Extension: d.echoed(req.GetExtension())}, nil
}

// checkUnionReplace refuses, with the device's own Unimplemented, a Set
// with union_replace operations it cannot model: any at all with
// Options.NoUnionReplace; otherwise one whose union_replaces name an
// origin other than openconfig (the only one this device has), such as
// a CLI origin, or several origins (a union of OpenConfig with a native
// or CLI configuration, which this device does not have).
func (d *Device) checkUnionReplace(req *gpb.SetRequest) error {
	if len(req.GetUnionReplace()) == 0 {
		return nil
	}
	if d.opts.NoUnionReplace {
		return status.Error(codes.Unimplemented, "union_replace is not supported by this device")
	}
	var origins []string
	for _, u := range req.GetUnionReplace() {
		o, po := u.GetPath().GetOrigin(), req.GetPrefix().GetOrigin()
		if o != "" && po != "" && o != po {
			continue // joinPath refuses the contradiction
		}
		if o == "" {
			o = po
		}
		if o == "" {
			o = "openconfig"
		}
		if !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
	}
	switch {
	case len(origins) > 1:
		slices.Sort(origins)
		return status.Errorf(codes.Unimplemented,
			"union_replace of several origins (%s) is not implemented: this device models only the openconfig origin, so it cannot join it with a native or CLI configuration",
			strings.Join(quoted(origins), ", "))
	case len(origins) == 1 && origins[0] != "openconfig":
		return status.Errorf(codes.Unimplemented,
			"union_replace of origin %q is not implemented: this device has no CLI or native configuration and models only the openconfig origin; send OpenConfig paths",
			origins[0])
	}
	return nil
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// commit installs a Set's change in the running configuration and tells
// subscribers what changed, both under the tree lock, so that a new
// subscription (watch) sees either the tree before the change and then
// the change, or the tree after it.
func (d *Device) commit(old ygot.ValidatedGoStruct, ch *change, ts int64) {
	d.tree.Lock()
	defer d.tree.Unlock()
	var before ygot.GoStruct
	watching := false
	d.mu.Lock()
	for w := range d.watchers {
		if w.cares(reflect.TypeOf(old).Elem(), ch.touched) {
			watching = true
			break
		}
	}
	d.mu.Unlock()
	if watching && ch.fast == nil {
		before = ch.touched.restrict(old)
	}
	after := ch.install(old)
	d.mu.Lock()
	d.root = after
	d.mu.Unlock()
	if !watching {
		return
	}
	var diff *gpb.Notification
	var err error
	if ch.fast != nil {
		diff, err = ch.fast.notification()
	} else {
		afterView := ch.scratch
		if afterView == nil {
			afterView = ch.touched.restrict(after)
		}
		diff, err = ygot.Diff(before, afterView)
	}
	if err != nil {
		d.log.Error("computing change notification", "err", err)
		return
	}
	diff.Timestamp = ts
	d.broadcast(diff)
}

// injectSetFaults applies the armed Set faults to a Set of operations
// operations: delay (per Set and per operation), hang, reject.
func (d *Device) injectSetFaults(ctx context.Context, operations int) error {
	d.mu.Lock()
	delay, hang := d.faults.delay+time.Duration(operations)*d.faults.perUpdate, d.faults.hangNext
	d.faults.hangNext = false
	var reject codes.Code
	if d.faults.rejectN > 0 {
		d.faults.rejectN--
		reject = d.faults.rejectCode
	}
	d.mu.Unlock()

	if delay > 0 {
		d.noteFault(ctx, "delay "+delay.String())
		if err := sleepCtx(ctx, delay); err != nil {
			return err
		}
	}
	if hang {
		d.noteFault(ctx, "hang")
		d.log.Info("set hanging until its RPC ends")
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	if reject != codes.OK {
		d.noteFault(ctx, "reject "+codeName(reject))
		return status.Errorf(reject, "set rejected by injected fault (%v)", reject)
	}
	return nil
}

// sleepCtx waits for d or until ctx ends, and then returns ctx's error as
// a status.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// injectPathFaults applies the faults armed for paths (ArmSetFault) that
// ops meet: their delays, then a hang, then the first refusal. lost is the
// code of an AnswerLost fault met: the Set is applied, then answered so.
func (d *Device) injectPathFaults(ctx context.Context, ops []setOp) (lost codes.Code, err error) {
	d.mu.Lock()
	if len(d.faults.atPath) == 0 {
		d.mu.Unlock()
		return codes.OK, nil
	}
	var delay time.Duration
	var hang bool
	var refusal *pathFault
	kept := d.faults.atPath[:0]
	for _, f := range d.faults.atPath {
		if meets(ops, f.path) {
			delay += f.Delay
			hang = hang || f.Hang
			if refusal == nil && f.Code != codes.OK {
				refusal = f
			}
			if lost == codes.OK {
				lost = f.AnswerLost
			}
			if f.Times > 0 {
				if f.left--; f.left == 0 {
					continue
				}
			}
		}
		kept = append(kept, f)
	}
	clear(d.faults.atPath[len(kept):])
	d.faults.atPath = kept
	d.mu.Unlock()

	if delay > 0 {
		d.noteFault(ctx, "delay "+delay.String())
		if err := sleepCtx(ctx, delay); err != nil {
			return codes.OK, err
		}
	}
	if hang {
		d.noteFault(ctx, "hang")
		d.log.Info("set hanging until its RPC ends")
		<-ctx.Done()
		return codes.OK, status.FromContextError(ctx.Err()).Err()
	}
	if refusal == nil {
		return lost, nil
	}
	d.noteFault(ctx, fmt.Sprintf("refuse %s at %s", codeName(refusal.Code), refusal.Path))
	msg := fmt.Sprintf("%s: refused by injected fault (%v)", refusal.Path, refusal.Code)
	st := status.New(refusal.Code, msg)
	if refusal.Details {
		withDetails, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: refusal.Path, Description: msg}}})
		if err == nil {
			st = withDetails
		}
	}
	return codes.OK, st.Err()
}

// meets reports whether one of ops meets the path p: an operation at or
// under it, or a replace or update above it whose JSON value holds it.
func meets(ops []setOp, p *gpb.Path) bool {
	for _, o := range ops {
		if under(o.full, p) || o.write && under(p, o.full) && jsonHolds(o.val, p.GetElem()[len(o.full.GetElem()):]) {
			return true
		}
	}
	return false
}

// refused returns the error of a RefuseSetsAt fault that one of ops meets,
// nil if none does: an operation at or under a refused path, or a replace
// or update above it whose JSON value holds it.
func (d *Device) refused(ctx context.Context, ops []setOp) error {
	d.mu.Lock()
	refuse := d.faults.refuse
	d.mu.Unlock()
	for _, r := range refuse {
		if meets(ops, r.path) {
			d.noteFault(ctx, fmt.Sprintf("refuse %s at %s", codeName(r.code), pathString(r.path)))
			return status.Errorf(r.code, "%s: refused by injected fault (%v)", pathString(r.path), r.code)
		}
	}
	return nil
}

// under reports whether a is at or under b (same element names and keys;
// origins ignored).
func under(a, b *gpb.Path) bool {
	ae, be := a.GetElem(), b.GetElem()
	if len(ae) < len(be) {
		return false
	}
	for n := range be {
		if ae[n].GetName() != be[n].GetName() || !maps.Equal(ae[n].GetKey(), be[n].GetKey()) {
			return false
		}
	}
	return true
}

// jsonHolds reports whether the JSON or JSON_IETF value v holds something
// at the relative path rel: members by name (a module prefix ignored), list
// entries by their keys.
func jsonHolds(v *gpb.TypedValue, rel []*gpb.PathElem) bool {
	raw := v.GetJsonIetfVal()
	if raw == nil {
		raw = v.GetJsonVal()
	}
	var node any
	if raw == nil || json.Unmarshal(raw, &node) != nil {
		return false
	}
	for _, e := range rel {
		obj, ok := node.(map[string]any)
		if !ok {
			return false
		}
		node = nil
		for name, member := range obj {
			if name == e.GetName() || strings.HasSuffix(name, ":"+e.GetName()) {
				node = member
			}
		}
		if len(e.GetKey()) > 0 {
			node = entryWithKeys(node, e.GetKey())
		}
		if node == nil {
			return false
		}
	}
	return true
}

// entryWithKeys returns the entry of a JSON list whose key leaves have the
// values keys names (compared as text), nil if none.
func entryWithKeys(list any, keys map[string]string) any {
	entries, _ := list.([]any)
	for _, entry := range entries {
		obj, ok := entry.(map[string]any)
		if !ok {
			continue
		}
		match := true
		for k, want := range keys {
			if fmt.Sprint(obj[k]) != want {
				match = false
				break
			}
		}
		if match {
			return obj
		}
	}
	return nil
}

// arbitrate implements MasterArbitration as in the OpenConfig reference:
// a lower election id than the highest seen is refused; an equal or higher
// one proceeds, and a higher one becomes the new highest.
func (d *Device) arbitrate(exts []*gnmi_ext.Extension) error {
	for _, e := range exts {
		ma := e.GetMasterArbitration()
		if ma == nil {
			continue
		}
		if ma.GetElectionId() == nil {
			return status.Error(codes.InvalidArgument, "MasterArbitration extension without election_id")
		}
		id := ElectionID{High: ma.GetElectionId().GetHigh(), Low: ma.GetElectionId().GetLow()}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.election != nil && id.less(*d.election) {
			return status.Errorf(codes.PermissionDenied, "election_id %s is lower than the current master's election_id %s", id, *d.election)
		}
		if d.election == nil || d.election.less(id) {
			d.election = &id
		}
		return nil
	}
	return nil
}

// encodings are the encodings the device supports: all but
// Options.RefuseEncodings.
func (d *Device) encodings() []gpb.Encoding {
	var out []gpb.Encoding
	for _, e := range []gpb.Encoding{gpb.Encoding_JSON, gpb.Encoding_JSON_IETF, gpb.Encoding_PROTO} {
		if _, refused := d.opts.RefuseEncodings[e]; !refused {
			out = append(out, e)
		}
	}
	return out
}

// refusedEncoding is the refusal of enc (Options.RefuseEncodings), nil if
// the device takes it.
func (d *Device) refusedEncoding(enc gpb.Encoding) error {
	if code, refused := d.opts.RefuseEncodings[enc]; refused {
		return status.Errorf(code, "unsupported encoding: %s", enc)
	}
	return nil
}
