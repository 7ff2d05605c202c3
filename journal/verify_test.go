package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// A journal whose tables, value log, MANIFEST, key registry or records are
// damaged is refused by Open, with an error naming the file (or the
// record) and wrapping ErrCorrupt; before, most of these opened with
// records silently missing or empty, or crashed the process.
func TestOpenRefusesADamagedJournal(t *testing.T) {
	src := t.TempDir()
	j, err := Open(src, Options{NoSync: true, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	term := synced(t, j)
	var large string // the newest 100-KiB value
	for k := range 600 {
		value := incompressible(1000)
		if k%100 == 0 {
			value = incompressible(100<<10 + k) // 100 KiB: in the value log
			large = value
		}
		applyChange(t, j, term, update(t, fmt.Sprintf("/a/k%d", k), value))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	largest := func(pattern string) string {
		names, _ := filepath.Glob(filepath.Join(src, pattern))
		slices.SortFunc(names, func(a, b string) int { return int(size(t, b) - size(t, a)) })
		if len(names) == 0 {
			t.Fatalf("no %s in the journal: %v", pattern, names)
		}
		return filepath.Base(names[0])
	}
	table, vlog := largest("*.sst"), largest("*.vlog")
	// The value log keeps every version written until its GC, and reads
	// reach only the newest: the last copy of the newest large value
	// (stored as written, being incompressible) is the one to damage.
	needle := []byte(large[50<<10 : 50<<10+64])
	var liveFile string
	names, _ := filepath.Glob(filepath.Join(src, "*.vlog"))
	slices.Sort(names) // in the order written
	for _, name := range names {
		if b, err := os.ReadFile(name); err == nil && bytes.Contains(b, needle) {
			liveFile = filepath.Base(name)
		}
	}
	if liveFile == "" {
		t.Fatal("the newest large value is in no value-log file")
	}
	lastCopy := func(b []byte) []byte {
		at := bytes.LastIndex(b, needle)
		for k := at; k < at+len(needle); k++ {
			b[k] ^= 0x5a
		}
		return b
	}

	xor := func(at func(n int) int) func([]byte) []byte {
		return func(b []byte) []byte {
			for k := at(len(b)); k < at(len(b))+64 && k < len(b); k++ {
				b[k] ^= 0x5a
			}
			return b
		}
	}
	middle := xor(func(n int) int { return n / 2 })
	zeroAfter := func(n int) func([]byte) []byte {
		return func(b []byte) []byte { clear(b[min(n, len(b)):]); return b }
	}
	for _, tc := range []struct {
		name   string
		file   string                  // damaged with damage, or removed if nil
		damage func([]byte) []byte     // nil: remove file
		record func(*badger.Txn) error // or: a record written through Badger
		want   []string                // in the error, besides ErrCorrupt
	}{
		{name: "a block of a table", file: table, damage: middle, want: []string{table, "is damaged"}},
		{name: "a table's index", file: table, damage: xor(func(n int) int { return n - 80 }), want: []string{table, "checksum"}},
		{name: "a table zeroed", file: table, damage: zeroAfter(0), want: []string{table, "is damaged"}},
		{name: "a table missing", file: table, want: []string{table, "no such file"}},
		{name: "a value in the value log", file: liveFile, damage: lastCopy, want: []string{liveFile, "cannot be read"}},
		{name: "the value log zeroed after its header", file: vlog, damage: zeroAfter(20), want: []string{vlog, "cannot be read"}},
		// The last byte is in the last change set's data, whatever the
		// MANIFEST's layout (64 bytes from its middle may hit a length).
		{name: "the MANIFEST", file: "MANIFEST", damage: xor(func(n int) int { return n - 1 }), want: []string{"MANIFEST is damaged", "checksum mismatch"}},
		{name: "the MANIFEST zeroed", file: "MANIFEST", damage: zeroAfter(0), want: []string{"MANIFEST is damaged", "bad magic"}},
		{name: "the key registry", file: "KEYREGISTRY", damage: zeroAfter(0), want: []string{"KEYREGISTRY is damaged"}},
		{name: "the configuration record", record: func(txn *badger.Txn) error { return txn.Set(keyConfiguration, []byte{0xff, 0xff}) },
			want: []string{"the configuration record", "decode"}},
		{name: "the mastership record", record: func(txn *badger.Txn) error { return txn.Set(keyMastership, []byte{0x0a}) },
			want: []string{"the mastership record"}},
		{name: "the newest proposal record missing", record: func(txn *badger.Txn) error { return txn.Delete(proposalKey(600)) },
			want: []string{"proposal 600 (the journal keeps 1 to 600)", "record missing"}},
		{name: "the oldest proposal record", record: func(txn *badger.Txn) error { return txn.Set(proposalKey(1), []byte{0xff}) },
			want: []string{"proposal 1 (the journal keeps 1 to 600)", "decode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journal")
			copyDir(t, src, dir)
			switch {
			case tc.record != nil:
				db, err := badger.Open(Options{}.withDefaults().badgerOptions(dir, 4<<20).WithLogger(nil))
				if err != nil {
					t.Fatal(err)
				}
				err = db.Update(tc.record)
				if cerr := db.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
			case tc.damage == nil:
				if err := os.Remove(filepath.Join(dir, tc.file)); err != nil {
					t.Fatal(err)
				}
			default:
				name := filepath.Join(dir, tc.file)
				b, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(name, tc.damage(b), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil)) // Badger logs the values it cannot read
			j, err := Open(dir, Options{Logger: quiet})
			if err == nil {
				n := 0
				_ = j.Proposals(t.Context(), 1, 0, func(*Proposal) error { n++; return nil })
				_ = j.Close()
				t.Fatalf("Open of a journal with %s succeeded (%d proposals readable)", tc.name, n)
			}
			t.Log(err)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Open: %v; want ErrCorrupt", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open: %v; want it to say %q", err, want)
				}
			}
		})
	}

	// The undamaged journal opens.
	j = openTest(t, src, Options{})
	checkInvariants(t, j)
}

func size(t testing.TB, name string) int64 {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// copyDir copies the files of src into a new directory dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o750); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A value Badger cannot read from its value log (here damaged while the
// journal runs) is an error wrapping ErrCorrupt; Badger itself logs it and
// yields an empty value, which decodes as an empty record.
func TestUnreadableValueIsAnError(t *testing.T) {
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	j := openTest(t, dir, Options{NoSync: true, Logger: quiet})
	p, err := j.ProposeChange(t.Context(), []*Op{update(t, "/a", incompressible(100<<10))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Proposal(t.Context(), p.GetIndex()); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	slices.Sort(names)
	f, err := os.OpenFile(names[len(names)-1], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, 4096), 64) // into the first entry, after the file's header
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Proposal(t.Context(), p.GetIndex())
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "cannot be read from the value log") {
		t.Errorf("Proposal(%d) of a damaged value: %v, %v; want ErrCorrupt", p.GetIndex(), got, err)
	}
}
