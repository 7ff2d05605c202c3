package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Point reads of the applied configuration, for drift detection (package
// drift): which subtrees the sidecar manages, and what the journal holds at
// exactly a few paths, without scanning the configuration.

// AppliedAt returns the applied values at exactly each of paths (nil where
// the journal holds none; tombstones included), read in one snapshot.
func (j *Journal) AppliedAt(ctx context.Context, paths []*gnmi.Path) ([]*PathValue, error) {
	out := make([]*PathValue, len(paths))
	err := j.view(ctx, func(txn *badger.Txn) error {
		for n, p := range paths {
			pv := &PathValue{}
			found, err := getRecord(txn, valueKey(nsApplied, PathKey(p)), pv)
			if err != nil {
				return fmt.Errorf("journal: %w", err)
			}
			if found {
				out[n] = pv
			}
		}
		return nil
	})
	return out, err
}

// errLive stops AppliedLiveUnder's scan at the first live value.
var errLive = errors.New("live value found")

// AppliedLiveUnder reports whether the journal holds an applied value that
// is not a tombstone at or under p. It stops at the first one.
func (j *Journal) AppliedLiveUnder(ctx context.Context, p *gnmi.Path) (bool, error) {
	err := j.Applied(ctx, p, func(pv *PathValue) error {
		if !pv.GetDeleted() {
			return errLive
		}
		return nil
	})
	if errors.Is(err, errLive) {
		return true, nil
	}
	return false, err
}

// AppliedRoots returns the subtrees the applied configuration lies in, in
// path-key order: for each origin, the first element of the paths of its
// applied values (tombstones included), without list keys, or the origin's
// root itself (a path without elements) when a value is recorded there. It
// seeks once per subtree instead of reading every value.
func (j *Journal) AppliedRoots(ctx context.Context) ([]*gnmi.Path, error) {
	var out []*gnmi.Path
	err := j.view(ctx, func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = nsApplied
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(nsApplied); it.ValidForPrefix(nsApplied); {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			key := item.Key()[len(nsApplied):]
			pv := &PathValue{}
			if err := readValue(item, func(v []byte) error { return decodeRecord(v, pv) }); err != nil {
				return fmt.Errorf("journal: decode %q: %w", item.Key(), err)
			}
			var next []byte // the first key past the subtree
			p := &gnmi.Path{Origin: pv.GetPath().GetOrigin()}
			if i := bytes.IndexByte(key, sepElem); i < 0 {
				// A value at the origin's root: every path of the origin,
				// whose keys continue the origin's with sepElem.
				next = append(valueKey(nsApplied, key), sepKey)
			} else {
				end := i + 1
				for end < len(key) && key[end] != sepElem && key[end] != sepKey {
					end++
				}
				// The subtree's own key is key[:end]; the keys under it
				// continue it with sepElem or sepKey, another name with a
				// byte at or above escapeByte.
				next = append(valueKey(nsApplied, key[:end]), sepKey+1)
				if elems := pv.GetPath().GetElem(); len(elems) > 0 {
					p.Elem = []*gnmi.PathElem{{Name: leaves.Name(elems[0].GetName())}}
				}
			}
			out = append(out, p)
			it.Seek(next)
		}
		return nil
	})
	return out, err
}
