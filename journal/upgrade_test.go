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
	"github.com/klauspost/compress/s2"
	"github.com/openconfig/gnmi/proto/gnmi"
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
	db, err := badger.Open(Options{NoSync: true}.withDefaults().badgerOptions(dir, 4<<20))
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

// TestUpgradeFormat2And3 opens a format-2 to -7 journal, its records
// written plain (uncompressed) as those formats did (but format 6) and with
// the applied values' write-order index they kept: the records are kept as
// they are, the index is dropped, and the format becomes the current one,
// which older builds refuse.
func TestUpgradeFormat2And3(t *testing.T) {
	for _, from := range []uint32{2, 3, 4, 5, 6, 7} {
		t.Run(fmt.Sprint(from), func(t *testing.T) {
			dir := t.TempDir()
			j := openTest(t, dir, Options{NoSync: true})
			term := synced(t, j)
			applyChange(t, j, term, update(t, "/a", "1"), update(t, "/b", incompressible(200)))
			if from < 6 {
				if plain := asPlainRecords(t, j); plain == 0 {
					t.Fatal("no record was stored compressed")
				}
			}
			if err := j.submit(context.Background(), func(w *writeTxn) error {
				for _, leaf := range []string{"/a", "/b"} {
					if err := w.putEmpty(append(uint64Key(nsRetiredAppliedIndex, 1), PathKey(mustPath(t, leaf))...)); err != nil {
						return err
					}
				}
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
			if got := committedList(t, j, nil); !slices.Equal(got, []string{"/a=1@1", "/b=" + incompressible(200) + "@1"}) {
				t.Errorf("committed after the upgrade: %v", got)
			}
			if p, err := j.Proposal(context.Background(), 1); err != nil || len(p.GetChange().GetValues()) != 2 {
				t.Errorf("proposal 1 after the upgrade: %v, %v", p, err)
			}
			applyChange(t, j, term, update(t, "/a", "2"))
			checkInvariants(t, j)
		})
	}
}

// asPlainRecords rewrites every record of j that is stored compressed as
// its plain encoding, as format 5 and older stored them, and returns how
// many it rewrote.
func asPlainRecords(t *testing.T, j *Journal) int {
	t.Helper()
	n := 0
	err := j.db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		plain := map[string][]byte{}
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				it.Close()
				return err
			}
			if len(v) > 0 && v[0] == compressedRecord {
				b, err := s2.Decode(nil, v[1:])
				if err != nil {
					it.Close()
					return err
				}
				plain[string(it.Item().Key())] = b
			}
		}
		it.Close()
		for k, v := range plain {
			if err := txn.Set([]byte(k), v); err != nil {
				return err
			}
		}
		n = len(plain)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	j.forgetHeads() // written behind the writer's back
	return n
}

// asFormat4 makes PathKey key paths as format 4 did (the origin as
// written) until the test ends: what the test writes meanwhile is a
// format-4 journal. Not for parallel tests.
func asFormat4(t *testing.T) {
	t.Helper()
	keyOrigin = (*gnmi.Path).GetOrigin
	t.Cleanup(func() { keyOrigin = gnmipath.Origin })
}

// writeFormat4 writes, as format 4 did, a journal in dir in which
// /system/config/hostname was written with origin openconfig and
// without, alternately (the leaf of issue 33), and other leaves with
// one spelling, then closes it.
func writeFormat4(t *testing.T, dir string, clock *fakeClock) {
	t.Helper()
	asFormat4(t)
	ctx := context.Background()
	j, err := Open(dir, Options{NoSync: true, Clock: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	term := synced(t, j)
	const host = "/system/config/hostname"
	for n, ops := range [][]*Op{
		{update(t, "openconfig:"+host, "a"), update(t, "openconfig:/interfaces/interface[name=eth0]/config/mtu", "1500")}, // 1
		{update(t, host, "b"), update(t, "/system/config/domain-name", "d")},                                              // 2
		{update(t, "openconfig:"+host, "c")},                                                                              // 3
		{update(t, "/interfaces/interface[name=eth0]/config/mtu", "9000")},                                                // 4
		{update(t, host, "e"), update(t, "openconfig:"+host, "f")},                                                        // 5, rolled back
	} {
		clock.sec.Store(int64(10 * (n + 1)))
		applyChange(t, j, term, ops...)
	}
	clock.sec.Store(60)
	rollback(t, j, term, 5)
	// Both spellings of one leaf out of sync.
	oos := func(origin string) *PathValue {
		p := mustPath(t, "/interfaces/interface[name=eth0]/config/mtu")
		p.Origin = origin
		return &PathValue{Path: p, Index: 4, Value: strVal("9000")}
	}
	if _, err := j.MarkOutOfSync(ctx, []*PathValue{oos(""), oos("openconfig")}, CauseRepush, 0, 3, "refused"); err != nil {
		t.Fatal(err)
	}
	if err := j.submit(ctx, func(w *writeTxn) error {
		return w.put(keyMeta, &journalpb.Meta{Format: 4})
	}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	keyOrigin = gnmipath.Origin
}

// TestUpgradeFormat4Origins opens a format-4 journal holding one leaf
// under both spellings (issue 33: rolled back, it put back an older
// value) and checks that it is one leaf afterwards, with the history and
// the rollback values format 5 would have recorded; also when the
// upgrade was interrupted after rewriting the history.
func TestUpgradeFormat4Origins(t *testing.T) {
	const host = "/system/config/hostname"
	for _, interrupted := range []bool{false, true} {
		t.Run(fmt.Sprintf("interrupted=%v", interrupted), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			clock := &fakeClock{}
			writeFormat4(t, dir, clock)
			if interrupted {
				db, err := badger.Open(Options{NoSync: true}.withDefaults().badgerOptions(dir, 4<<20))
				if err != nil {
					t.Fatal(err)
				}
				u := &originUpgrade{j: &Journal{db: db, opts: Options{Clock: clock.now}.withDefaults()}}
				if err := u.lastSpellings(); err != nil {
					t.Fatal(err)
				}
				if _, err := u.mergeSpellings(); err != nil {
					t.Fatal(err)
				}
				if _, err := u.moveOpenconfigKeys(nsCommitted); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
			clock.sec.Store(100)
			j := openTest(t, dir, Options{NoSync: true, Clock: clock.now})
			if f := metaFormat(t, j); f != formatVersion {
				t.Fatalf("format %d after the upgrade, want %d", f, formatVersion)
			}
			want := []string{
				// Proposal 4 created the entry again for format 4: the
				// later write.
				`/interfaces/interface[name=eth0]={}@4`,
				`/interfaces/interface[name=eth0]/config/mtu=9000@4`,
				`/system/config/domain-name=d@2`,
				`openconfig:` + host + `=c@3`,
			}
			if got := committedList(t, j, nil); !slices.Equal(got, want) {
				t.Fatalf("committed after the upgrade:\n got %v\nwant %v", got, want)
			}
			if got := appliedList(t, j); !slices.Equal(got, want) {
				t.Fatalf("applied after the upgrade:\n got %v\nwant %v", got, want)
			}
			pushed := appliedReplayList(t, j)
			if !slices.Equal(pushed, want) {
				t.Errorf("re-push after the upgrade: %v", pushed)
			}
			recs, err := j.OutOfSync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c, err := j.Configuration(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || c.GetOutOfSync() != 1 {
				t.Errorf("%d out-of-sync records (configuration counts %d), want 1", len(recs), c.GetOutOfSync())
			}
			if n := len(j.Keys().Lists()); n != 1 {
				t.Errorf("%d lists known after the upgrade, want 1: %v", n, j.Keys().Lists())
			}
			// No record is left under a format-4 key, nor the marker.
			for k := range dump(t, j) {
				for _, ns := range [][]byte{nsCommitted, nsApplied, nsOutOfSync, nsListKeys} {
					if _, moved := format4Canonical([]byte(k)[min(len(k), len(ns)):]); moved && strings.HasPrefix(k, string(ns)) {
						t.Errorf("key %q left", k)
					}
				}
				if k == string(keyOriginsMerged) {
					t.Error("the upgrade's marker is left")
				}
			}
			checkInvariants(t, j)
			// History: each point in time reads the value the device held.
			for _, at := range []struct {
				sec  int64
				want string
			}{{15, `openconfig:` + host + `=a@1`}, {25, host + `=b@2`}, {35, `openconfig:` + host + `=c@3`},
				{55, `openconfig:` + host + `=f@5`}, {65, `openconfig:` + host + `=c@3`}} {
				got, err := committedAtList(t, j, at.sec, mustPath(t, host))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, []string{at.want}) {
					t.Errorf("hostname at %d: %v, want %s", at.sec, got, at.want)
				}
			}
			// Each rollback puts back what the device held before.
			term := synced(t, j)
			for _, step := range []struct {
				i    uint64
				want string
			}{{4, `openconfig:` + host + `=c@3`}, {3, host + `=b@2`}, {2, `openconfig:` + host + `=a@1`}, {1, `openconfig:` + host + `=deleted@0`}} {
				clock.sec.Add(10)
				rollback(t, j, term, step.i)
				if got := committedList(t, j, mustPath(t, host)); !slices.Equal(got, []string{step.want}) {
					t.Errorf("hostname after rolling back %d: %v, want %s", step.i, got, step.want)
				}
				checkInvariants(t, j)
			}
		})
	}
}
