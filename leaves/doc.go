// Package leaves turns what a gNMI Set writes into the leaf-level units the
// journal records (docs/design.md §4, "Value model"), so that a rollback restores
// exactly the leaves a change touched and a re-push restores exactly the
// union of what was applied, whatever shape the Set had.
//
// # Units
//
// A Set's Update or Replace carries one value at one path: a scalar
// TypedValue at a leaf, or a JSON / JSON_IETF tree at any level. Decompose
// breaks it into units, each a path and a value the device can take on its
// own:
//
//   - a leaf: a scalar TypedValue exactly as sent, or, from a JSON tree, the
//     leaf's JSON text in the client's encoding (so no type is guessed);
//   - a leaf-list, as a whole: gNMI replaces a leaf-list an Update names;
//   - a marker: the JSON object {} at a list entry (keys in the path) or a
//     presence container. It records that the entry or container exists,
//     so a re-push recreates an entry whose other leaves were deleted and a
//     rollback of the change that created it deletes it, key leaves
//     included. Every unit under a list entry or a presence container
//     implies the marker of each one above it.
//   - an opaque value (ASCII, bytes, a protobuf message), at its path.
//
// Key leaves of an entry (the members named as keys) are the entry itself:
// they fold into its marker, and a value that contradicts the path's key is
// refused.
//
// # Schema
//
// With the device's YANG (a Schema, from LoadYANG) decomposition is exact
// for keyed lists (multi-key too), leaf-lists, presence containers and
// choice/case: a write into one case of a choice deletes the other cases
// (Writes.Deletes). Without one, containers still decompose exactly; a JSON
// array of list entries needs the list's key names, which Keys learns from
// the keyed paths the sidecar sees (a path element with keys names a list
// entry). Where neither tells the key names, or an empty JSON array or
// object could be a list, a leaf-list or a presence container, Decompose
// refuses with an error wrapping ErrNeedSchema that names the path and the
// --yang option: the sidecar never records a value it could not roll back
// or re-push exactly.
//
// Element names are normalized as devices do: a module prefix
// ("openconfig-system:config") is dropped. Unit paths carry no prefixes.
package leaves
