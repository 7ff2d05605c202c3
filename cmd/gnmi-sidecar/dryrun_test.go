package main

// Tests of set --dry-run and rollback --dry-run through the real commands
// against a whole sidecar in front of the simulated device: what they
// print, what they refuse, and that they journal and send nothing.

import (
	"slices"
	"strings"
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
	"github.com/gnmi-sidecar/gnmi-sidecar/testbed"
)

// deviceYANG is the simulated device's own YANG, as make run gives it to
// the sidecar (--yang).
func deviceYANG(t *testing.T) *leaves.Schema { return testbed.SchemaT(t) }

// unchanged runs fn and checks that it journaled nothing and sent the
// device no Set.
func unchanged(t *testing.T, s *sidecartest.Sidecar, fn func()) {
	t.Helper()
	last, sets := s.LastIndex(t), s.Dev.SetCount()
	fn()
	if got := s.LastIndex(t); got != last {
		t.Errorf("a dry run journaled: newest proposal %d, was %d", got, last)
	}
	if got := s.Dev.SetCount(); got != sets {
		t.Errorf("a dry run sent the device %d Sets", got-sets)
	}
}

const (
	eth0Config = `/interfaces/interface[name=eth0]/config={"description":"up","mtu":1500}`
	sysConfig  = `/system/config={"hostname":"h1","login-banner":"b1","motd-banner":"m1","domain-name":"d1"}`
	unknownAt  = ": (whatever the device holds there; the journal holds nothing here)"
)

// TestOpsSetDryRunRemoves: set --dry-run of a Delete or a Replace prints
// every leaf it removes, with its value, and a path the journal holds
// nothing under as removing whatever the device holds there; without
// --yang it notes that values were not checked.
func TestOpsSetDryRunRemoves(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup []string // --update arguments, one Set each
		args  []string
		want  string
	}{{
		name:  "delete of a leaf",
		setup: []string{sysConfig},
		args:  []string{"--delete", "/system/config/login-banner"},
		want:  "- /system/config/login-banner: \"b1\"\n",
	}, {
		name:  "delete of a container",
		setup: []string{sysConfig},
		args:  []string{"--delete", "/system/config"},
		want: "- /system/config/domain-name: \"d1\"\n" +
			"- /system/config/hostname: \"h1\"\n" +
			"- /system/config/login-banner: \"b1\"\n" +
			"- /system/config/motd-banner: \"m1\"\n",
	}, {
		name:  "delete of a list entry",
		setup: []string{eth0Config},
		args:  []string{"--delete", "/interfaces/interface[name=eth0]"},
		want: "- /interfaces/interface[name=eth0]: (exists)\n" +
			"- /interfaces/interface[name=eth0]/config/description: \"up\"\n" +
			"- /interfaces/interface[name=eth0]/config/mtu: 1500\n",
	}, {
		name:  "replace of a container holding several leaves",
		setup: []string{sysConfig},
		args:  []string{"--replace", `/system/config={"hostname":"r"}`},
		want: "- /system/config/domain-name: \"d1\"\n" +
			"- /system/config/hostname: \"h1\"\n" +
			"+ /system/config/hostname: \"r\"\n" +
			"- /system/config/login-banner: \"b1\"\n" +
			"- /system/config/motd-banner: \"m1\"\n",
	}, {
		name: "delete of a leaf the journal holds nothing at",
		args: []string{"--delete", "/system/config/login-banner"},
		want: "- /system/config/login-banner" + unknownAt + "\n",
	}, {
		name: "replace of a container the journal holds nothing under",
		args: []string{"--replace", `/system/config={"hostname":"r"}`},
		want: "- /system/config" + unknownAt + "\n" +
			"+ /system/config/hostname: \"r\"\n",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			s := sidecartest.Start(t, sidecartest.Options{})
			for _, u := range tt.setup {
				mustOps(t, s.Addr, "set", "--update", u)
			}
			unchanged(t, s, func() {
				r := runOpsAt(t, s.Addr, append([]string{"set", "--dry-run"}, tt.args...)...)
				r.wantCode(t, 0)
				if r.stdout != tt.want {
					t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, tt.want)
				}
				if !strings.Contains(r.stderr, "not checked against the device's YANG") {
					t.Errorf("stderr %q: want the note that values were not checked (no --yang)", r.stderr)
				}
				var res dryRunJSON
				decodeJSON(t, mustOps(t, s.Addr, append([]string{"set", "--dry-run", "-o", "json"}, tt.args...)...), &res)
				var paths []string
				for _, e := range res.Diff {
					paths = append(paths, e.Path)
				}
				if !res.DryRun || res.SchemaChecked || !slices.Equal(paths, linePaths(tt.want)) {
					t.Errorf("JSON %+v does not match %q", res, tt.want)
				}
			})
		})
	}
}

// dryRunJSON is DryRunResult as a test reads it.
type dryRunJSON struct {
	DryRun        bool `json:"dry_run"`
	SchemaChecked bool `json:"schema_checked"`
	Diff          []struct {
		Path string `json:"path"`
	} `json:"diff"`
}

// linePaths returns the paths of "- PATH: ..." and "+ PATH: ..." lines,
// each once, in order.
func linePaths(out string) []string {
	var paths []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		p, _, _ := strings.Cut(l[2:], ": ")
		if len(paths) == 0 || paths[len(paths)-1] != p {
			paths = append(paths, p)
		}
	}
	return paths
}

// TestOpsSetDryRunSchema: with --yang, set --dry-run refuses what the
// device refuses for its schema, with the exit code the real Set gets.
func TestOpsSetDryRunSchema(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{Schema: deviceYANG(t)})
	for _, tt := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"a string for mtu", []string{"--update", `/interfaces/interface[name=eth0]/config/mtu="abc"`}, exitDeviceRefused, `"abc" is a string, not a number`},
		{"mtu out of range", []string{"--update", `/interfaces/interface[name=eth0]/config/mtu=70000`}, exitDeviceRefused, "out of its range"},
		{"an unknown leaf", []string{"--update", `/system/config/no-such-leaf="x"`}, exitDeviceRefused, `no node "no-such-leaf"`},
		{"an unknown member", []string{"--update", `/system/config={"no-such-leaf":"x"}`}, exitDeviceRefused, `member "no-such-leaf"`},
		{"valid", []string{"--update", `/interfaces/interface[name=eth0]/config={"mtu":9000,"description":"x"}`}, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			unchanged(t, s, func() {
				r := runOpsAt(t, s.Addr, append([]string{"set", "--dry-run"}, tt.args...)...)
				if tt.code == 0 {
					r.wantCode(t, 0)
					if strings.Contains(r.stderr, "not checked") {
						t.Errorf("stderr %q: the values were checked (--yang)", r.stderr)
					}
					var res dryRunJSON
					decodeJSON(t, mustOps(t, s.Addr, append([]string{"set", "--dry-run", "-o", "json"}, tt.args...)...), &res)
					if !res.SchemaChecked {
						t.Error("JSON: schema_checked false with --yang")
					}
					return
				}
				r.wantCode(t, tt.code, tt.msg, "the device would refuse this Set")
			})
			// The real Set: the device refuses it with the same code.
			runOpsAt(t, s.Addr, append([]string{"set"}, tt.args...)...).wantCode(t, tt.code)
		})
	}
}

// TestOpsRollbackDryRun: rollback --dry-run and rollback --to X --dry-run
// print the change the rollback would make, leaf by leaf, and journal and
// send nothing; a rollback that would be refused is refused alike.
func TestOpsRollbackDryRun(t *testing.T) {
	s := sidecartest.Start(t, sidecartest.Options{})
	mustOps(t, s.Addr, "set", "--update", `/interfaces/interface[name=eth0]/config/description="d1"`) // 1
	mustOps(t, s.Addr, "journal", "tag", "t1")
	mustOps(t, s.Addr, "set", "--update", `/interfaces/interface[name=eth0]/config/description="d2"`) // 2
	mustOps(t, s.Addr, "set", "--update", `/interfaces/interface[name=eth0]/config/mtu=1400`)         // 3
	const (
		desc = "/interfaces/interface[name=eth0]/config/description"
		mtu  = "/interfaces/interface[name=eth0]/config/mtu"
	)
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string // stdout, or a part of stderr for a refusal
	}{{
		name: "the newest change",
		args: []string{"rollback", "--dry-run"},
		want: "rolling back proposal 3 would change (dry run: nothing was journaled):\n- " + mtu + ": 1400\n",
	}, {
		name: "to a tag",
		args: []string{"rollback", "--to", "t1", "--dry-run"},
		want: "rolling back to tag t1 (proposal 1) would change (dry run: nothing was journaled):\n" +
			"- " + desc + ": \"d2\"\n+ " + desc + ": \"d1\"\n- " + mtu + ": 1400\n",
	}, {
		name: "to a proposal index",
		args: []string{"rollback", "--to", "2", "--dry-run"},
		want: "rolling back to proposal 2 would change (dry run: nothing was journaled):\n- " + mtu + ": 1400\n",
	}, {
		name: "to the newest change",
		args: []string{"rollback", "--to", "3", "--dry-run"},
		want: "rolling back to proposal 3 would change nothing: the committed configuration is as it would leave it (dry run: nothing was journaled)\n",
	}, {
		name: "a change a later one follows",
		args: []string{"rollback", "2", "--dry-run"},
		code: exitPrecondition,
		want: "roll back proposal 3 first",
	}, {
		name: "a tag that does not exist",
		args: []string{"rollback", "--to", "nope", "--dry-run"},
		code: exitNotFound,
		want: `no tag "nope"`,
	}, {
		name: "with --async",
		args: []string{"rollback", "--dry-run", "--async"},
		code: exitUsage,
		want: "--async means nothing",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			unchanged(t, s, func() {
				r := runOpsAt(t, s.Addr, tt.args...)
				if tt.code != 0 {
					r.wantCode(t, tt.code, tt.want)
					return
				}
				r.wantCode(t, 0)
				if r.stdout != tt.want {
					t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, tt.want)
				}
			})
		})
	}
	var out string
	unchanged(t, s, func() {
		out = mustOps(t, s.Addr, "rollback", "--to", "t1", "--dry-run", "-o", "json")
	})
	got := compact([]byte(out))
	const want = `{"dry_run":true,"tag":"t1","point_index":1,"unchanged":false,"diff":[` +
		`{"path":"` + desc + `","old":"d2","new":"d1"},{"path":"` + mtu + `","old":1400,"new":null}]}`
	if string(got) != want {
		t.Errorf("rollback --to t1 --dry-run -o json:\n%s\nwant:\n%s", got, want)
	}
	// What the dry run showed is what the rollback does.
	mustOps(t, s.Addr, "rollback", "--to", "t1")
	s.WantDeviceLeaf(t, desc, sidecartest.StringVal("d1"))
	s.WantDeviceLeaf(t, mtu, nil)
}
