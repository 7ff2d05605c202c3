package testbed_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// TestAdminDelayParsesBeforeApplying pins /faults/delay: the response text
// for each combination, and that a bad value refuses the request without
// arming the other, valid, delay.
func TestAdminDelayParsesBeforeApplying(t *testing.T) {
	d, c := startDevice(t, testbed.Options{})
	srv := httptest.NewServer(d.AdminHandler())
	defer srv.Close()
	post := func(path string) (int, string) { return adminPost(t, srv.URL+path) }
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/faults/delay?d=5s&update=bad", http.StatusBadRequest, "update must be a non-negative duration, e.g. 1ms\n"},
		{"/faults/delay?d=-1s&update=5s", http.StatusBadRequest, "d must be a non-negative duration, e.g. 20ms\n"},
		{"/faults/delay?d=0", http.StatusOK, "delaying every set by 0s\n"},
		{"/faults/delay?update=0", http.StatusOK, "delaying every set by 0s per operation\n"},
		{"/faults/delay?d=0&update=0", http.StatusOK, "delaying every set by 0s; delaying every set by 0s per operation\n"},
		{"/faults/delay?d=5s&update=bad", http.StatusBadRequest, "update must be a non-negative duration, e.g. 1ms\n"},
	} {
		if code, body := post(tc.path); code != tc.code || body != tc.body {
			t.Errorf("POST %s: HTTP %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
		}
	}
	start := time.Now()
	setLeaf(t, c, eth0Desc, str("not delayed"))
	if took := time.Since(start); took >= 5*time.Second {
		t.Errorf("a Set took %v: a refused /faults/delay armed a delay", took)
	}
}
