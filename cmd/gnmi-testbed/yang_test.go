package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openconfig/goyang/pkg/yang"

	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// execute runs the command line args and returns its stdout and error.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := newRootCommand(&stdout, &stderr)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if stderr.Len() > 0 {
		t.Logf("stderr: %s", stderr.String())
	}
	return stdout.String(), err
}

func TestYANGCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "yang")
	out, err := execute(t, "yang", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, testbed.YANGFile)
	if out != want+"\n" {
		t.Fatalf("printed %q, want the file's path %q", out, want+"\n")
	}
	var direct bytes.Buffer
	if err := testbed.WriteYANG(&direct); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, direct.Bytes()) {
		t.Error("the written file differs from testbed.WriteYANG's module")
	}

	// goyang reads it with no other module.
	ms := yang.NewModules()
	if err := ms.Read(out[:len(out)-1]); err != nil {
		t.Fatal(err)
	}
	if errs := ms.Process(); len(errs) > 0 {
		t.Fatal(errs)
	}
	mod, ok := ms.Modules[testbed.YANGModule]
	if !ok {
		t.Fatalf("no module %s in the file", testbed.YANGModule)
	}
	e := yang.ToEntry(mod)
	if l := e.Dir["interfaces"].Dir["interface"]; l == nil || !l.IsList() || l.Key != "name" {
		t.Errorf("/interfaces/interface in the written module: %+v, want a list keyed by name", l)
	}
}

func TestYANGCommandErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
	}{
		{name: "no --out", args: []string{"yang"}},
		{name: "extra argument", args: []string{"yang", "--out", t.TempDir(), "extra"}},
		{name: "--out is a file", args: []string{"yang", "--out", file}},
		{name: "root flag", args: []string{"yang", "--out", t.TempDir(), "--listen", "127.0.0.1:0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := execute(t, tc.args...); err == nil {
				t.Errorf("%v succeeded (output %q), want an error", tc.args, out)
			}
		})
	}
}

func TestRootHelpMentionsYANG(t *testing.T) {
	out, err := execute(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--listen", "yang", "gnmi-testbed.yang"} {
		if !strings.Contains(out, want) {
			t.Errorf("root --help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "completion") {
		t.Errorf("root --help offers a completion command:\n%s", out)
	}
}
