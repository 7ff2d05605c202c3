package journal

import (
	"context"

	"github.com/dgraph-io/badger/v4"
)

// Records returns every record of the journal, key by key, as stored: a
// read-only snapshot for tests and diagnostics that must tell whether
// anything at all was written (a refused Set changes no record).
func (j *Journal) Records(ctx context.Context) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := j.view(ctx, func(txn *badger.Txn) error {
		return iteratePrefix(txn, nil, func(key, val []byte) error {
			out[string(key)] = append([]byte(nil), val...)
			return nil
		})
	})
	return out, err
}
