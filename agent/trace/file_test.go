package trace

import (
	"path/filepath"
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

func TestFromEnvAppendsAcrossRuns(t *testing.T) {
	t.Setenv(Env, "")
	if tr, c, err := FromEnv(); tr != nil || c != nil || err != nil {
		t.Fatalf("FromEnv with %s unset = %v, %v, %v; want the trace off", Env, tr, c, err)
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	t.Setenv(Env, path)
	for run := uint64(1); run <= 2; run++ {
		tr, c, err := FromEnv()
		if err != nil || tr == nil {
			t.Fatalf("FromEnv: %v, %v", tr, err)
		}
		tr.Begin(&journal.Mastership{Term: run, Conn: run})
		tr.Observe(journal.Event{Action: journal.ActionConnect, Mastership: &journal.Mastership{Term: run + 1, Conn: run + 1}})
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 4 || lines[0].Action != ActionOpen || lines[2].Action != ActionOpen || lines[3].Term != 3 {
		t.Errorf("trace of two runs = %+v, want Open, Connect, Open, Connect(term 3)", lines)
	}
	if _, _, err := OpenFile(filepath.Join(t.TempDir(), "missing", "dir", "trace")); err == nil {
		t.Error("OpenFile in a missing directory succeeded")
	}
}
