package drift

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/gnmi-sidecar/gnmi-sidecar/devread"
	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Diff compares the device's configuration with the journal's now, fresh
// (not the watcher's records), in every managed subtree, or in paths (each
// a subtree; InvalidArgument for one the journal could not hold) when given, and returns the differences in path order with
// the time of the comparison. It reads only: nothing is logged, reverted
// or adopted. It works whatever the policy, off included. The comparison
// waits, within ctx, until the pipeline is at rest (as the watcher's do);
// when ctx ends first it returns Unavailable saying what is going on, and
// a device that cannot be read gives the device's code.
func (w *Watcher) Diff(ctx context.Context, paths []*gpb.Path) ([]Diff, time.Time, error) {
	if err := DiffPaths(paths); err != nil {
		return nil, time.Time{}, err
	}
	scopes := paths
	if len(scopes) == 0 {
		roots, err := w.opts.Journal.AppliedRoots(ctx)
		if err != nil {
			return nil, time.Time{}, err
		}
		scopes = roots
	}
	for {
		changes := w.opts.Agent.Changes()
		before, err := w.opts.Agent.Rest(ctx)
		if err != nil {
			return nil, time.Time{}, err
		}
		if before.AtRest {
			var all []Diff
			busy := false
			for _, scope := range scopes {
				diffs, _, err := w.compare(ctx, scope, before, nil)
				if errors.Is(err, errBusy) {
					busy = true
					break
				}
				if err != nil {
					return nil, time.Time{}, readError(err)
				}
				all = append(all, diffs...)
			}
			if !busy {
				return dedupe(all), time.Now(), nil
			}
		}
		t := time.NewTimer(w.opts.Debounce)
		select {
		case <-ctx.Done():
			t.Stop()
			why := before.Why
			if why == "" {
				why = "the sidecar is applying changes to the device"
			}
			return nil, time.Time{}, status.Errorf(codes.Unavailable,
				"cannot compare the device with the journal now: %s; nothing compared (try again)", why)
		case <-changes:
		case <-t.C:
		}
		t.Stop()
	}
}

// readError is a failed comparison's error: Unavailable when the device's
// configuration cannot be read (devread.ErrUnreadable: whatever the
// reason, nothing could be compared; gnmi-sidecar diff exits 3), else a
// gRPC status with the device's code, the journal's error as it is.
func readError(err error) error {
	if errors.Is(err, devread.ErrUnreadable) {
		return status.Errorf(codes.Unavailable, "%v; nothing compared", err)
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return status.Errorf(se.GRPCStatus().Code(), "%v", err)
	}
	return err
}

// dedupe drops the Diffs of a path already given (overlapping scopes).
func dedupe(diffs []Diff) []Diff {
	seen := map[string]bool{}
	out := diffs[:0]
	for _, d := range diffs {
		k := key(d.Path)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	return out
}

// Text renders a value compactly, for log lines and tables: strings as
// they are, a list entry's marker as "(exists)", numbers and booleans as
// text, JSON as its compact text, bytes in base64.
func Text(v *gpb.TypedValue) string {
	if leaves.IsMarker(v) {
		return "(exists)"
	}
	switch x := v.GetValue().(type) {
	case *gpb.TypedValue_StringVal:
		return x.StringVal
	case *gpb.TypedValue_AsciiVal:
		return x.AsciiVal
	case *gpb.TypedValue_UintVal:
		return strconv.FormatUint(x.UintVal, 10)
	case *gpb.TypedValue_IntVal:
		return strconv.FormatInt(x.IntVal, 10)
	case *gpb.TypedValue_BoolVal:
		return strconv.FormatBool(x.BoolVal)
	case *gpb.TypedValue_DoubleVal:
		return strconv.FormatFloat(x.DoubleVal, 'g', -1, 64)
	case *gpb.TypedValue_BytesVal:
		return base64.StdEncoding.EncodeToString(x.BytesVal)
	case *gpb.TypedValue_LeaflistVal:
		parts := make([]string, len(x.LeaflistVal.GetElement()))
		for n, e := range x.LeaflistVal.GetElement() {
			parts[n] = Text(e)
			if _, isString := e.GetValue().(*gpb.TypedValue_StringVal); isString {
				b, _ := json.Marshal(parts[n])
				parts[n] = string(b)
			}
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if raw, _ := jsonText(v); raw != nil {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			var s string
			if json.Unmarshal(buf.Bytes(), &s) == nil {
				return s
			}
			return buf.String()
		}
		return string(raw)
	}
	return prototext.MarshalOptions{}.Format(v)
}

// DiffPaths checks paths given to Diff: concrete paths the journal could
// key (InvalidArgument otherwise).
func DiffPaths(paths []*gpb.Path) error {
	for _, p := range paths {
		if err := journal.ValidatePath(p); err != nil {
			return status.Errorf(codes.InvalidArgument, "%s: %v", gnmipath.String(p), err)
		}
	}
	return nil
}
