package journal

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// untar extracts a gzipped tar into a new temporary directory.
func untar(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		out, err := os.OpenFile(filepath.Join(dir, filepath.Base(h.Name)), os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
}

func metaFormat(t *testing.T, j *Journal) uint32 {
	t.Helper()
	var m journalpb.Meta
	if err := j.view(context.Background(), func(txn *badger.Txn) error {
		_, err := getRecord(txn, keyMeta, &m)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return m.GetFormat()
}

// TestUpgradeFormat1 opens a journal written by the last format-1 build
// (testdata/format1-journal.tar.gz: the sidecar in front of the simulated
// device, then these Sets, then a clean stop):
//
//  1. update /system/config/hostname = "h0"
//  2. update /system/config = {"hostname":"h1","domain-name":"d1"} (JSON_IETF)
//  3. update /system/config = {"login-banner":"b2"} (JSON_IETF)
//  4. update /interfaces = {"interface":[{"name":"eth0","config":{"name":"eth0","mtu":1500}}]}
//  5. update /interfaces/interface[name=eth1]/config/description = "uplink"
//  6. replace /interfaces/interface[name=eth0]/config = {"name":"eth0","description":"core"} (JSON)
//  7. delete /system/config/domain-name
//  8. update /system/config/motd-banner = "m8", then rolled back
//  9. update /system/config/login-banner = "b10"
//
// Format 1 recorded proposal 3's JSON at /system/config over proposal 2's,
// so its record had hostname "h0": the device held "h1". The upgrade
// replays the proposals leaf by leaf and gets what the device held.
func TestUpgradeFormat1(t *testing.T) {
	dir := untar(t, "testdata/format1-journal.tar.gz")
	j := openTest(t, dir, Options{NoSync: true})
	if f := metaFormat(t, j); f != formatVersion {
		t.Fatalf("format %d after the upgrade, want %d", f, formatVersion)
	}
	want := []string{
		"/interfaces/interface[name=eth0]={}@4",
		"/interfaces/interface[name=eth0]/config=deleted@6",
		`/interfaces/interface[name=eth0]/config/description="core"@6`,
		"/interfaces/interface[name=eth0]/config/mtu=deleted@6",
		`/interfaces/interface[name=eth0]/config/name="eth0"@6`,
		"/interfaces/interface[name=eth1]={}@5",
		"/interfaces/interface[name=eth1]/config/description=uplink@5",
		"/system/config/domain-name=deleted@7",
		`/system/config/hostname="h1"@2`,
		"/system/config/login-banner=b10@9",
		"/system/config/motd-banner=deleted@0",
	}
	if got := appliedList(t, j); !slices.Equal(got, want) {
		t.Fatalf("applied after the upgrade:\n got %v\nwant %v", got, want)
	}
	if got := committedList(t, j, nil); !slices.Equal(got, want) {
		t.Fatalf("committed after the upgrade:\n got %v\nwant %v", got, want)
	}
	checkInvariants(t, j)
	// The proposals carry their units, and the newest change rolls back
	// exactly (proposal 3's value of login-banner, leaf by leaf).
	p, err := j.Proposal(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if units := Units(p.GetChange().GetOps()[0]); len(units) != 1 || gnmipath.String(units[0].GetPath()) != "/system/config/login-banner" {
		t.Fatalf("proposal 3's units: %v", units)
	}
	m, err := j.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.StartReconcile(context.Background(), m.Term); err != nil {
		t.Fatal(err)
	}
	if _, err := j.CompleteReconcile(context.Background(), m.Term, 0); err != nil {
		t.Fatal(err)
	}
	rollback(t, j, m.Term, 9)
	if got := committedList(t, j, mustPath(t, "/system/config/login-banner")); !slices.Equal(got, []string{`/system/config/login-banner="b2"@3`}) {
		t.Fatalf("login-banner after rolling back proposal 9: %v", got)
	}
	// Reopened, the journal is format 2 as it is, with nothing of format 1.
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openTest(t, dir, Options{NoSync: true})
	if err := j.view(context.Background(), func(txn *badger.Txn) error {
		for _, ns := range format1Namespaces {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: ns})
			it.Rewind()
			valid := it.Valid()
			it.Close()
			if valid {
				t.Errorf("keys of format 1 left under %q", ns)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := committedList(t, j, mustPath(t, "/system/config/hostname")); !slices.Equal(got, []string{`/system/config/hostname="h1"@2`}) {
		t.Fatalf("hostname after reopening: %v", got)
	}
	// The list keys learned from the proposals are kept.
	if lists := j.Keys().Lists(); len(lists) != 1 || gnmipath.String(lists[0].Path) != "/interfaces/interface" {
		t.Fatalf("learned lists %v", lists)
	}
}

// format1 writes a format-1 journal into a new directory: the records as
// given, values under format 1's namespaces.
type format1 struct {
	config    *Configuration
	proposals []*Proposal
	values    []*PathValue // applied = committed
}

func (f format1) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := badger.Open(Options{NoSync: true}.withDefaults().badgerOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(txn *badger.Txn) error {
		set := func(key []byte, m proto.Message) {
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := txn.Set(key, b); err != nil {
				t.Fatal(err)
			}
		}
		set(keyMeta, &journalpb.Meta{Format: 1})
		set(keyConfiguration, f.config)
		set(keyMastership, &Mastership{Term: 1, Conn: 1})
		for _, p := range f.proposals {
			set(proposalKey(p.GetIndex()), p)
		}
		for _, pv := range f.values {
			key := PathKey(pv.GetPath())
			set(valueKey([]byte("cv/"), key), pv)
			set(valueKey([]byte("av/"), key), pv)
			if err := txn.Set(append(uint64Key([]byte("ai/"), pv.GetIndex()), key...), nil); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func appliedProposal(t *testing.T, i uint64, at time.Time, ops ...*Op) *Proposal {
	return &Proposal{Index: i, Phase: PhaseChange, Change: &Change{Ops: ops,
		Commit: StatusComplete, Apply: StatusComplete, Applied: timestamppb.New(at)}}
}

func TestUpgradeFormat1Refusals(t *testing.T) {
	now := time.Now()
	config := func(first, last uint64) *Configuration {
		return &Configuration{Committed: &journalpb.Committed{Proposal: last, Index: last},
			Applied: &journalpb.Applied{Proposal: last, Index: last, Term: 1}, Status: StatusComplete,
			FirstIndex: first, LastIndex: last}
	}
	jsonList := update(t, "/interfaces", `{"interface":[{"name":"e0","config":{"mtu":1}}]}`)
	tests := []struct {
		name    string
		journal format1
		schema  bool
		want    string // in the error; "" for success
		applied []string
	}{
		{
			name: "a proposal in progress",
			journal: format1{config: config(1, 1), proposals: []*Proposal{{Index: 1, Phase: PhaseChange,
				Change: &Change{Ops: []*Op{update(t, "/a", "1")}, Commit: StatusComplete, Apply: StatusInProgress}}}},
			want: "proposal 1 is not finished",
		},
		{
			name:    "a JSON list whose keys nothing tells",
			journal: format1{config: config(1, 1), proposals: []*Proposal{appliedProposal(t, 1, now, jsonList)}},
			want:    "--yang",
		},
		{
			name:    "the same with the schema",
			journal: format1{config: config(1, 1), proposals: []*Proposal{appliedProposal(t, 1, now, jsonList)}},
			schema:  true,
			applied: []string{"/interfaces/interface[name=e0]={}@1", "/interfaces/interface[name=e0]/config/mtu=1@1"},
		},
		{
			name: "values of proposals retention dropped, decomposed under the kept ones",
			journal: format1{
				config: config(3, 3),
				proposals: []*Proposal{appliedProposal(t, 3, now,
					update(t, "/interfaces/interface[name=e1]/config/mtu", "9"))},
				values: []*PathValue{
					{Path: mustPath(t, "/system/config"), Index: 1, Value: jsonVal(`{"hostname":"a","login-banner":"b"}`)},
					{Path: mustPath(t, "/system/config/hostname"), Index: 2, Value: strVal("c")},
					{Path: mustPath(t, "/interfaces/interface[name=e1]/config/mtu"), Index: 3, Value: strVal("9")},
				},
			},
			applied: []string{
				"/interfaces/interface[name=e1]={}@3", "/interfaces/interface[name=e1]/config/mtu=9@3",
				"/system/config/hostname=c@2", `/system/config/login-banner="b"@1`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.journal.write(t)
			opts := Options{NoSync: true}
			if tt.schema {
				s, err := leaves.LoadYANG([]string{"testdata/upgrade.yang"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				opts.Schema = s
			}
			j, err := Open(dir, opts)
			if tt.want != "" {
				if err == nil {
					j.Close()
					t.Fatal("opened")
				}
				if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want ErrFormat saying %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if got := appliedList(t, j); !slices.Equal(got, tt.applied) {
				t.Fatalf("applied:\n got %v\nwant %v", got, tt.applied)
			}
		})
	}
}

// TestUpgradeFormat2And3 opens a format-2 and a format-3 journal: their
// records are kept as they are and the format becomes 4, which older
// builds refuse.
func TestUpgradeFormat2And3(t *testing.T) {
	for _, from := range []uint32{2, 3} {
		t.Run(fmt.Sprint(from), func(t *testing.T) {
			dir := t.TempDir()
			j := openTest(t, dir, Options{NoSync: true})
			term := synced(t, j)
			applyChange(t, j, term, update(t, "/a", "1"))
			if err := j.submit(context.Background(), func(w *writeTxn) error {
				return w.put(keyMeta, &journalpb.Meta{Format: from})
			}); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			j = openTest(t, dir, Options{NoSync: true})
			if f := metaFormat(t, j); f != formatVersion {
				t.Fatalf("format %d after opening a format-%d journal, want %d", f, from, formatVersion)
			}
			if got := committedList(t, j, nil); !slices.Equal(got, []string{"/a=1@1"}) {
				t.Errorf("committed after the upgrade: %v", got)
			}
			checkInvariants(t, j)
		})
	}
}
