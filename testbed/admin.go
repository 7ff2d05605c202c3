package testbed

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
)

// ParseCode turns a gRPC code name ("UNAVAILABLE", "Unavailable",
// "unavailable") or number into a codes.Code.
func ParseCode(s string) (codes.Code, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil && n <= uint64(codes.Unauthenticated) {
		return codes.Code(n), nil
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
//	POST /faults/delay?d=20ms                  delay every Set (0 = off)
//	POST /faults/delay?update=1ms              delay every Set by this much per operation
//	                                           (both may be given; a missing one is left as is)
//	POST /faults/hang                          hang the next Set
//	POST /faults/drop                          drop all client connections
//	POST /faults/clear                         disarm all faults
//	POST /restart                              Stop, then Start on the same address
//	GET  /config                               config leaves, path → value (JSON)
//	GET  /status                               running, address, boot time, set count
//	GET  /requests                             the last request of each RPC with its metadata
//	                                           (RPC name → RecordedRequest, JSON)
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
		code, err := ParseCode(r.URL.Query().Get("code"))
		if err != nil || code == codes.OK {
			http.Error(w, "code must name a gRPC error code, e.g. INVALID_ARGUMENT", http.StatusBadRequest)
			return
		}
		path := r.URL.Query().Get("path")
		if err := d.RefuseSetsAt(path, code); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ok(w, "refusing every set writing at or under %s with %v", path, code)
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

// RecordedRequest is one RPC's entry in the admin endpoint's GET
// /requests: a Request with its message in protobuf JSON.
type RecordedRequest struct {
	Time     time.Time           `json:"time"`
	Metadata map[string][]string `json:"metadata"`
	Request  json.RawMessage     `json:"request"`
}
