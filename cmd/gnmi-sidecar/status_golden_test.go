package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/ with what the code prints now")

// TestStatusGolden: status's text and JSON, for a sidecar with something
// to say in every section, as testdata/status.{txt,json} hold them (go
// test -run TestStatusGolden -update rewrites them; review the diff).
func TestStatusGolden(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	u := func(n uint64) *uint64 { return &n }
	i := func(n int64) *int64 { return &n }
	readable := true
	v := &StatusView{
		Configuration: ConfigurationState{CommittedIndex: 7, CommittedProposal: 7, AppliedIndex: 6, AppliedProposal: 6, AppliedTerm: 3,
			AppliedTarget: uint64(at.Add(-time.Hour).UnixNano()), Status: "COMPLETE", FirstIndex: 1, LastIndex: 7, OutOfSync: 1,
			Resolutions: 1, BaselineIndex: u(1)},
		Device: DeviceState{Address: "10.0.0.1:57400", Connected: true, Term: u(3), LastRepushTime: at.Add(-time.Hour),
			LastRepushValues: u(120), LastRepushDuration: i(int64(850 * time.Millisecond)), LastRepushDeviceDuration: i(int64(600 * time.Millisecond)),
			ReadState: ReadState{ReadMethod: "get-config/JSON_IETF", Readable: &readable}},
		CommitConfirm: &CommitConfirmState{ID: "maint-42", Proposal: 7, Started: at.Add(-2 * time.Minute), Deadline: at.Add(8 * time.Minute), Author: "alice"},
		OutOfSync: []OutOfSyncState{{Path: "/system/config/hostname", Value: newValue(&gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "core-1"}}), Cause: "ROLLBACK", Proposal: u(5),
			ErrorCode: "INVALID_ARGUMENT", ErrorMessage: "hostname is locked", Since: at.Add(-30 * time.Minute)}},
		Resolutions: []ResolutionState{{Seq: 1, Time: at.Add(-20 * time.Minute), Author: "bob", Action: "RETRY", Settled: []string{"/a"}, StillOutOfSync: []string{}}},
		Drifted:     u(2),
	}
	v.Summary = statusSummary(v)
	var text bytes.Buffer
	if err := printStatus(&text, v, at); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"status.txt": text.Bytes(), "status.json": append(js, '\n')} {
		path := filepath.Join("testdata", name)
		if *updateGolden {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -run TestStatusGolden -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what status prints now (go test -run TestStatusGolden -update, then review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
		}
	}
}
