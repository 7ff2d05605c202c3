package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// ErrCorrupt: a file of the journal is damaged, or a record does not
// decode. Open refuses the journal: the sidecar must not run on a journal
// that silently lacks part of what it acknowledged.
var ErrCorrupt = errors.New("journal is damaged")

// Open checks what Badger v4 does not: at a damaged block of a table its
// iterators end early without an error (records silently missing: a read
// of the configuration may even find an older version), a damaged table
// index crashes its Open, and a value it cannot read from its value log is
// logged and read as empty. verifyTables runs before Badger opens the
// directory, verifyRecords after.

// verifyTables checks every block of every table of dir's MANIFEST
// against its checksum. Tables the MANIFEST does not list are a crash's
// leftovers, which Badger deletes.
func verifyTables(dir string, bopts badger.Options) error {
	name := filepath.Join(dir, badger.ManifestFilename)
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a new journal
	}
	if err != nil {
		return err
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, bopts.ExternalMagicVersion, bopts)
	if err != nil {
		return fmt.Errorf("%s is damaged (%v): %w", name, err, ErrCorrupt)
	}
	// In parallel: a start-up waits for all of it (about 2 ms per MB).
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, id := range slices.Sorted(maps.Keys(m.Tables)) {
		g.Go(func() error {
			name := table.NewFilename(id, dir)
			if err := verifyTable(name, m.Tables[id].Compression, bopts); err != nil {
				return fmt.Errorf("table %s is damaged (%v): %w", name, firstLine(err.Error()), ErrCorrupt)
			}
			return nil
		})
	}
	return g.Wait()
}

func verifyTable(name string, compression options.CompressionType, bopts badger.Options) (err error) {
	mf, err := z.OpenMmapFile(name, os.O_RDONLY, 0)
	if errors.Is(err, z.NewFile) {
		return errors.New("the file is empty")
	}
	if err != nil {
		return err
	}
	// Badger panics on some damage (a table index that does not decode;
	// VerifyChecksum on a block that does not decompress).
	defer func() {
		if recover() != nil {
			err = errors.New("its index or one of its blocks does not decode")
		}
	}()
	t, err := table.OpenTable(mf, table.Options{
		ChkMode:              options.NoVerification, // VerifyChecksum checks each block itself
		BlockSize:            bopts.BlockSize,
		BloomFalsePositive:   bopts.BloomFalsePositive,
		Compression:          compression,
		ZSTDCompressionLevel: bopts.ZSTDCompressionLevel,
	})
	if err != nil {
		_ = mf.Close(-1)
		return err
	}
	defer func() { _ = t.MmapFile.Close(-1) }() // not DecrRef, which deletes the file
	return t.VerifyChecksum()
}

// verifyRecords checks the records every start reads: the configuration,
// mastership and commit-confirmed records, and the oldest and newest
// proposals. With valueLog, it also reads every value Badger keeps in its
// value log (values of valueThreshold bytes or more), so that their
// checksums are verified.
func verifyRecords(db *badger.DB, dir string, valueLog bool, valueThreshold int64) error {
	// A value readValue could not read: name the value log's files.
	where := func(err error) error {
		if errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("%s: %w", valueLogFile(dir), err)
		}
		return err
	}
	return db.View(func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return fmt.Errorf("the configuration record: %v: %w", where(err), ErrCorrupt)
		}
		for _, r := range []struct {
			name string
			key  []byte
			msg  proto.Message
		}{{"mastership", keyMastership, &journalpb.Mastership{}}, {"commit-confirmed", keyCommitConfirm, &journalpb.CommitConfirm{}}} {
			if _, err := getRecord(txn, r.key, r.msg); err != nil {
				return fmt.Errorf("the %s record: %v: %w", r.name, where(err), ErrCorrupt)
			}
		}
		if c.GetLastIndex() >= c.GetFirstIndex() {
			for _, i := range []uint64{c.GetFirstIndex(), c.GetLastIndex()} {
				if _, err := loadProposal(txn, c, i); err != nil {
					return fmt.Errorf("proposal %d (the journal keeps %d to %d): %v: %w", i, c.GetFirstIndex(), c.GetLastIndex(), where(err), ErrCorrupt)
				}
			}
		}
		if !valueLog {
			return nil
		}
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			if item.ValueSize() < valueThreshold {
				continue
			}
			if err := readValue(item, func([]byte) error { return nil }); err != nil {
				return where(err)
			}
		}
		return nil
	})
}

// vlogHeader is the size of a value log file without entries.
const vlogHeader = 20

// hasValueLog reports whether dir's value log holds entries, which only
// values of Options' valueThreshold bytes or more make.
func hasValueLog(dir string) bool {
	names, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	for _, name := range names {
		if fi, err := os.Stat(name); err == nil && fi.Size() > vlogHeader {
			return true
		}
	}
	return false
}

// valueLogFile names dir's value log files.
func valueLogFile(dir string) string {
	pattern := filepath.Join(dir, "*.vlog")
	names, err := filepath.Glob(pattern)
	switch {
	case err != nil || len(names) == 0:
		return pattern
	case len(names) == 1:
		return names[0]
	}
	return "one of " + strings.Join(names, ", ")
}

// namingFile names the damaged file in an error of badger.Open that does
// not: the journal is not encrypted, so a key mismatch is a damaged key
// registry.
func namingFile(dir string, err error) error {
	if strings.Contains(err.Error(), badger.ErrEncryptionKeyMismatch.Error()) {
		return fmt.Errorf("%s is damaged (%v): %w", filepath.Join(dir, badger.KeyRegistryFileName), err, ErrCorrupt)
	}
	return err
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// readValue is item.Value, except that a value Badger cannot read from its
// value log, which it logs and yields as empty, is an error wrapping
// ErrCorrupt.
func readValue(item *badger.Item, fn func([]byte) error) error {
	return item.Value(func(v []byte) error {
		if len(v) == 0 && item.ValueSize() > 0 {
			return fmt.Errorf("the value of key %q cannot be read from the value log (Badger's log says why): %w", item.Key(), ErrCorrupt)
		}
		return fn(v)
	})
}

// removeEmptyLogFiles removes the memtable logs (.mem) and value-log
// files (.vlog) of dir that are empty files. Badger creates such a file
// and then sizes it; a process killed in between leaves an empty file,
// which Badger's Open refuses ("Create a new file", Badger issue #2207)
// although it holds nothing: every entry is written after the sizing. The
// journal creates memtables often (small ones, and a reopen when a large
// transition grows one), so the window is hit in practice.
func removeEmptyLogFiles(dir string, log *slog.Logger) error {
	var names []string
	for _, pattern := range []string{"*.mem", "*.vlog"} {
		found, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		names = append(names, found...)
	}
	for _, name := range names {
		fi, err := os.Stat(name)
		if err != nil || fi.Size() != 0 {
			continue
		}
		if err := os.Remove(name); err != nil {
			return fmt.Errorf("removing the empty file %s a crash left: %w", name, err)
		}
		log.Info("removed an empty file a crash left", "file", name)
	}
	return nil
}
