package testbed

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
)

// ParseCode turns a gRPC code name ("UNAVAILABLE", "Unavailable",
// "unavailable") or number into a codes.Code.
func ParseCode(s string) (codes.Code, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil && n <= uint64(codes.Unauthenticated) {
		return codes.Code(n), nil
	}
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(strconv.Quote(strings.ToUpper(s)))); err == nil {
		return c, nil // the canonical names: CANCELLED, DEADLINE_EXCEEDED
	}
	want := strings.ReplaceAll(strings.ToUpper(s), "_", "")
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if strings.ToUpper(c.String()) == want {
			return c, nil
		}
	}
	return codes.Unknown, fmt.Errorf("unknown gRPC code %q", s)
}

// AdminHandler serves fault injection and introspection over HTTP, for a
// device running in another process. Endpoints (faults are POST):
//
//	POST /faults/reject?n=3&code=UNAVAILABLE   reject the next n Sets
//	POST /faults/refuse?path=/a/b&code=INVALID_ARGUMENT
//	                                           refuse every Set writing at or under /a/b
//	POST /faults/refuse?path=/a/b&code=RESOURCE_EXHAUSTED&n=1&details=1
//	                                           refuse the next n such Sets (n=0: every one),
//	                                           details=1: with a google.rpc.BadRequest naming the path
//	POST /faults/delay?d=20ms                  delay every Set (0 = off)
//	POST /faults/delay?update=1ms              delay every Set by this much per operation
//	                                           (both may be given; a missing one is left as is)
//	POST /faults/delay?d=2s&path=/a/b&n=1      delay the next n Sets writing at or under /a/b
//	                                           (n absent or 0: every one)
//	POST /faults/hang                          hang the next Set
//	POST /faults/hang?path=/a/b                hang the next Set writing at or under /a/b
//	POST /faults/drop                          drop all client connections
//	POST /faults/clear                         disarm all faults
//	POST /restart                              Stop, then Start on the same address
//	GET  /config                               config leaves, path → value (JSON)
//	GET  /status                               running, address, boot time, set count
//	GET  /requests                             the last request of each RPC with its metadata
//	                                           (RPC name → RecordedRequest, JSON)
//	GET  /setlog?since=SEQ&path=/a/b           the Set log ([]SetRecordJSON, oldest first):
//	                                           records after seq SEQ, of Sets with an
//	                                           operation at, under or above /a/b (both optional)
//	POST /setlog/clear                         empty the Set log
//
// Serve it on a loopback address only: it has no authentication.
func (d *Device) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, format string, args ...any) {
		fmt.Fprintf(w, format+"\n", args...)
	}
	mux.HandleFunc("POST /faults/reject", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 0 {
			http.Error(w, "n must be a non-negative integer", http.StatusBadRequest)
			return
		}
		code, err := ParseCode(r.URL.Query().Get("code"))
		if err != nil || code == codes.OK {
			http.Error(w, "code must name a gRPC error code, e.g. UNAVAILABLE", http.StatusBadRequest)
			return
		}
		d.RejectNextSets(n, code)
		ok(w, "rejecting the next %d sets with %v", n, code)
	})
	mux.HandleFunc("POST /faults/refuse", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code, err := ParseCode(q.Get("code"))
		if err != nil || code == codes.OK {
			http.Error(w, "code must name a gRPC error code, e.g. INVALID_ARGUMENT", http.StatusBadRequest)
			return
		}
		path := q.Get("path")
		n, err := optionalCount(q.Get("n"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !q.Has("n") && !q.Has("details") {
			if err := d.RefuseSetsAt(path, code); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ok(w, "refusing every set writing at or under %s with %v", path, code)
			return
		}
		details := q.Get("details") == "1" || q.Get("details") == "true"
		if err := d.ArmSetFault(SetFault{Path: path, Times: n, Code: code, Details: details}); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ok(w, "refusing %s set(s) writing at or under %s with %v%s", times(n), path, code, map[bool]string{true: " (with a BadRequest naming the path)"}[details])
	})
	mux.HandleFunc("POST /faults/delay", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("d") && !q.Has("update") {
			http.Error(w, "give d (per Set) or update (per operation), e.g. d=20ms or update=1ms", http.StatusBadRequest)
			return
		}
		var delay, perUpdate time.Duration
		if q.Has("d") {
			var err error
			if delay, err = time.ParseDuration(q.Get("d")); err != nil || delay < 0 {
				http.Error(w, "d must be a non-negative duration, e.g. 20ms", http.StatusBadRequest)
				return
			}
		}
		if q.Has("update") {
			var err error
			if perUpdate, err = time.ParseDuration(q.Get("update")); err != nil || perUpdate < 0 {
				http.Error(w, "update must be a non-negative duration, e.g. 1ms", http.StatusBadRequest)
				return
			}
		}
		if q.Has("path") {
			n, err := optionalCount(q.Get("n"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if err := d.DelayNextSetsAt(q.Get("path"), delay, n); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ok(w, "delaying %s set(s) writing at or under %s by %v", times(n), q.Get("path"), delay)
			return
		}
		var said []string
		if q.Has("d") {
			d.SetDelay(delay)
			said = append(said, fmt.Sprintf("delaying every set by %v", delay))
		}
		if q.Has("update") {
			d.SetUpdateDelay(perUpdate)
			said = append(said, fmt.Sprintf("delaying every set by %v per operation", perUpdate))
		}
		ok(w, "%s", strings.Join(said, "; "))
	})
	mux.HandleFunc("POST /faults/hang", func(w http.ResponseWriter, r *http.Request) {
		if path := r.URL.Query().Get("path"); path != "" {
			if err := d.HangNextSetAt(path); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ok(w, "the next set writing at or under %s hangs until its RPC ends", path)
			return
		}
		d.HangNextSet()
		ok(w, "the next set hangs until its connection drops")
	})
	mux.HandleFunc("POST /faults/drop", func(w http.ResponseWriter, r *http.Request) {
		d.DropConnections()
		ok(w, "dropped all client connections")
	})
	mux.HandleFunc("POST /faults/clear", func(w http.ResponseWriter, r *http.Request) {
		d.ClearFaults()
		ok(w, "faults cleared")
	})
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		d.Stop()
		if err := d.Start(r.Context(), ""); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		ok(w, "restarted on %s", d.Addr())
	})
	mux.HandleFunc("GET /config", func(w http.ResponseWriter, r *http.Request) {
		leaves, err := d.ConfigLeaves()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out := make(map[string]string, len(leaves))
		for p, v := range leaves {
			out[p] = v.String()
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"running":   d.Running(),
			"addr":      d.Addr(),
			"boot_time": d.BootTime().UnixNano(),
			"set_count": d.SetCount(),
		})
	})
	mux.HandleFunc("GET /setlog", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var since uint64
		if q.Has("since") {
			var err error
			if since, err = strconv.ParseUint(q.Get("since"), 10, 64); err != nil {
				http.Error(w, "since must be a record's seq", http.StatusBadRequest)
				return
			}
		}
		var at *gpb.Path
		if q.Has("path") {
			var err error
			if at, err = ygot.StringToStructuredPath(q.Get("path")); err != nil {
				http.Error(w, fmt.Sprintf("path: %v", err), http.StatusBadRequest)
				return
			}
		}
		out := []SetRecordJSON{}
		for _, rec := range d.SetLog() {
			if rec.Seq <= since || at != nil && !touches(rec.Paths, at) {
				continue
			}
			j, err := rec.JSON()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			out = append(out, j)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST /setlog/clear", func(w http.ResponseWriter, r *http.Request) {
		d.ClearSetLog()
		ok(w, "set log cleared")
	})
	mux.HandleFunc("GET /requests", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]RecordedRequest{}
		for _, rpc := range []string{"Capabilities", "Get", "Set", "Subscribe"} {
			req, ok := d.LastRequest(rpc)
			if !ok {
				continue
			}
			msg, err := protojson.Marshal(req.Message)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			out[rpc] = RecordedRequest{Time: req.Time, Metadata: req.Metadata, Request: msg}
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	})
	return mux
}

// optionalCount parses the n of a fault: absent is 0 (every matching Set).
func optionalCount(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("n must be a non-negative integer (0: every matching set)")
	}
	return n, nil
}

func times(n int) string {
	if n == 0 {
		return "every"
	}
	return fmt.Sprintf("the next %d", n)
}

// touches reports whether one of paths (path strings) is at, under or
// above p.
func touches(paths []string, p *gpb.Path) bool {
	for _, s := range paths {
		q, err := ygot.StringToStructuredPath(s)
		if err == nil && (under(q, p) || under(p, q)) {
			return true
		}
	}
	return false
}

// RecordedRequest is one RPC's entry in the admin endpoint's GET
// /requests: a Request with its message in protobuf JSON.
type RecordedRequest struct {
	Time     time.Time           `json:"time"`
	Metadata map[string][]string `json:"metadata"`
	Request  json.RawMessage     `json:"request"`
}
