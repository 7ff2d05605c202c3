// Package drift owns drift detection and remediation (docs/drift.md): it
// notices configuration changed on the device behind the sidecar's back —
// a value that differs from the journal's applied configuration, a leaf or
// list entry the journal holds that the device lost, one the journal
// deleted that the device holds again — reports it, and, as the operator
// chose (--drift-policy), reverts it or adopts it.
//
// # Core and driver
//
// As the agent, in the style of etcd raft: a pure core and a thin driver.
//
//   - Compare (compare.go) takes the journal's applied values of a subtree,
//     the device's answer to a Get of it (any shape: JSON or JSON_IETF
//     containers, lists and leaves, decomposed with package leaves) and the
//     out-of-sync records, and returns the Diffs. It decides what drift is:
//     a leaf the journal holds that the device lacks or holds with another
//     value (compared by meaning, leaves.Equal), a list entry or presence
//     container the journal holds of which the device holds nothing, a
//     device leaf or list entry at or under a journal tombstone; never the
//     device's own data (defaults, configuration the journal did not write,
//     state) nor paths already out of sync.
//   - Filter (filter.go) is the cheap first look at a device notification:
//     whether the journal's values at and above its path already explain
//     it (the sidecar's own Sets), so that only the rest costs a Get.
//   - Tracker (track.go) keeps the drifted paths (memory: the drifted paths
//     and the recent reverts, never the configuration) and decides, under
//     the Policy, what each new comparison means: paths newly drifted and
//     back in sync, to revert (at most RevertLimit times within
//     RevertWindow), to adopt.
//
// The Watcher (watcher.go) is the driver. It subscribes (STREAM, ON_CHANGE)
// to the subtrees the applied configuration lies in
// (journal.AppliedRoots), or, when the device refuses, polls them with a
// Get every Options.Interval. A notification only makes its path suspect;
// suspects and whole subtrees are compared only while the pipeline is at
// rest (agent.Rest: nothing being sent to the device, nothing waiting to
// be), and the comparison counts only if the pipeline stayed so, unchanged,
// across it: the sidecar's own Sets are never drift. Reverts go through
// the agent (agent.RevertDrift), adoptions are journaled as adopted
// proposals authored "device" (proxy.AdoptionOps, agent.ProposeAdoption).
package drift
