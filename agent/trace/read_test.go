package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// encode renders lines as a Tracer writes them.
func encode(t testing.TB, lines []Line) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestRead(t *testing.T) {
	want := lifecycle(t).lines
	b := encode(t, want)
	for name, in := range map[string][]byte{
		"trace":                     b,
		"last line without newline": bytes.TrimSuffix(b, []byte("\n")),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Read(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadMalformed(t *testing.T) {
	const open = `{"seq":1,"action":"Open","term":0,"conn":0}` + "\n"
	tests := []struct {
		name, in, want string
	}{
		{"not JSON", open + "{oops\n" + open, "trace: line 2: invalid character"},
		{"partial last line", open + open + `{"seq":3,"act`, "trace: line 3: unexpected end of JSON input"},
		{"empty line", open + "\n" + open, "trace: line 2: empty line"},
		{"no action", `{"seq":1}` + "\n", "trace: line 1: no action"},
		{"wrong type", open + `{"seq":"two","action":"Connect"}` + "\n", "trace: line 2: json: cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.in))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Read: %v, want an error starting with %q", err, tt.want)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if _, err := ReadFile(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v, want a not-exist error", err)
	}
	if err := os.WriteFile(path, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || err.Error() != "trace "+path+": line 1: no action" {
		t.Errorf("ReadFile of a malformed trace: %v, want one naming the file and the line", err)
	}
}
