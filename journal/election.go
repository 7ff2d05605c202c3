package journal

import (
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
)

// The highest MasterArbitration election id the sidecar's own clients
// presented, per role (gNMI master arbitration, arbitrated by the proxy):
// kept under e/<role id> so that a restarted sidecar does not let a stale
// master write again.

var nsElection = []byte("e/")

// ElectionID returns the highest election id recorded for role ("" is the
// default role); nil if none.
func (j *Journal) ElectionID(ctx context.Context, role string) (*gnmi_ext.Uint128, error) {
	var out *gnmi_ext.Uint128
	err := j.view(ctx, func(txn *badger.Txn) error {
		id := &gnmi_ext.Uint128{}
		found, err := getRecord(txn, valueKey(nsElection, []byte(role)), id)
		if found {
			out = id
		}
		return err
	})
	return out, err
}

// RaiseElectionID records id for role if it is higher than the one
// recorded, and returns the highest one after it.
func (j *Journal) RaiseElectionID(ctx context.Context, role string, id *gnmi_ext.Uint128) (*gnmi_ext.Uint128, error) {
	var out *gnmi_ext.Uint128
	err := j.submit(ctx, func(w *writeTxn) error {
		cur := &gnmi_ext.Uint128{}
		found, err := w.get(valueKey(nsElection, []byte(role)), cur)
		if err != nil {
			return err
		}
		if found && !ElectionLess(cur, id) {
			out = cur
			return nil
		}
		if err := w.put(valueKey(nsElection, []byte(role)), id); err != nil {
			return fmt.Errorf("record election id: %w", err)
		}
		out = id
		return nil
	})
	return out, err
}

// ElectionLess reports whether election id a is lower than b.
func ElectionLess(a, b *gnmi_ext.Uint128) bool {
	return a.GetHigh() < b.GetHigh() || a.GetHigh() == b.GetHigh() && a.GetLow() < b.GetLow()
}
