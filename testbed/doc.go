// Package testbed is a simulated gNMI device for tests, demos and
// benchmarks of the sidecar: a strict gNMI target serving an OpenConfig
// configuration tree (ygot's generated exampleoc schema, behind the small
// model interface in model_exampleoc.go) on a real gRPC server.
//
// A Device answers
//
//   - Capabilities: the schema's YANG modules (names only: exampleoc carries
//     no revisions), encodings JSON, JSON_IETF and PROTO, gNMI version.
//   - Get of any path (root, container, list entry, leaf, "*" keys) in JSON,
//     JSON_IETF or PROTO (scalar leaves), data type CONFIG, STATE,
//     OPERATIONAL or ALL. Missing data is NotFound.
//   - Set with gNMI semantics: deletes, then replaces, then the
//     union_replaces, then updates; one UpdateResult per operation, in
//     that order; atomic (the operations run on a copy that replaces the
//     running tree only if all of them and schema validation pass). An
//     unknown path is NotFound, a wrongly typed or invalid value or a
//     malformed path (an empty name, only the deprecated element field, a
//     target outside the prefix) InvalidArgument; messages name the path.
//     Deleting a missing path succeeds; a delete expands wildcard keys
//     ([name=*]) to the entries there are (a wildcard element name is
//     Unimplemented), and a replace or update of a path with a wildcard
//     is InvalidArgument. MasterArbitration is enforced as in the
//     OpenConfig reference.
//   - union_replace (gNMI 0.10) for the one schema the device has: the
//     union of the request's union_replace values replaces the data at
//     each of their paths (every path is cleared, then the values are
//     written in request order; where they overlap the later value wins).
//     It may come with deletes, replaces and updates, applied in the
//     order above. A union_replace of another origin than openconfig (a
//     CLI or native one), or of several origins, is Unimplemented, and so
//     is any union_replace with Options.NoUnionReplace (a device older
//     than gNMI 0.10).
//   - Subscribe ONCE, POLL (as many Polls as the client sends) and STREAM
//     (ON_CHANGE, TARGET_DEFINED as ON_CHANGE, SAMPLE), several
//     subscriptions per request, updates_only, with sync_response; the
//     prefix's target (else Options.Target) and origin come back in the
//     notifications' prefix. Sets show up on ON_CHANGE streams as updates
//     and leaf deletes. Values are scalar TypedValues, whatever the
//     subscription's encoding: a Set of a JSON or JSON_IETF value at a
//     container or list reaches a stream as one update per changed leaf
//     (full paths with list keys; unchanged leaves are not sent), and
//     leaves a Replace or Delete removed as one delete each.
//     allow_aggregation changes nothing: no schema node is marked
//     eligible for aggregation.
//   - heartbeat_interval: an ON_CHANGE subscription gets every value again
//     once per heartbeat interval, changed or not. suppress_redundant: a
//     SAMPLE subscription sends only the values that changed since it last
//     sent them (the initial state counts as sent, also with updates_only;
//     a leaf deleted and set again counts as changed; SAMPLE sends no
//     deletes); with a heartbeat_interval as well it sends every value once
//     per heartbeat interval. A STREAM subscription's sample_interval and
//     heartbeat_interval must be at least MinInterval (100 ms), else
//     InvalidArgument; ONCE and POLL ignore them.
//   - Extensions (gnmi_ext; extensions.go has the table): the Depth
//     extension on Get and Subscribe (gnmi-depth.md: level N keeps the
//     leaves up to N levels below the requested node); History,
//     commit-confirmed and ConfigSubscription are Unimplemented (and
//     InvalidArgument on an RPC they do not belong to, as Depth on Set);
//     RegisteredExtensions are ignored, or with Options.EchoExtensions
//     come back unchanged in the response (Subscribe: with each
//     sync_response), whatever their id, so that a proxy's relay of
//     response extensions can be checked.
//
// WriteYANG (and Device.WriteYANG, into a directory; the command
// "gnmi-testbed yang --out DIR") writes the schema as YANG source, for tools
// that load YANG at run time: one self-contained YANG 1.1 module,
// gnmi-testbed (namespace urn:gnmi-sidecar:testbed, prefix tb), describing
// the whole uncompressed data tree: containers (with presence), lists with
// their keys, leaf-lists, leaves, choice/case and "config false" at the top
// of read-only subtrees. Leaves have their builtin type (string, boolean,
// intN, uintN, decimal64, empty, binary) or else string (enumeration,
// identityref, leafref, union, ...). goyang reads it with no other module.
// exampleoc has no presence containers and no choice/case.
//
// Like real devices, it can refuse some kinds of read, for tests of the
// sidecar's reader (package devread): Options.RefuseGetConfig answers a Get
// of type CONFIG with Unimplemented "unsupported request type: CONFIG", as
// gnxi's gnmi_target does; Options.RefuseGet refuses every Get (a device
// read only with Subscribe); Options.RefuseEncodings refuses Get and
// Subscribe in the given encodings, each with its code ("unsupported
// encoding: PROTO", as gnxi's), and Capabilities no longer lists them.
//
// Like a device that routes and authenticates each request, it can insist
// (Options.RequireTarget, Options.Users): a Get, Set or Subscribe whose
// prefix does not name the one target it serves is NotFound, and any RPC
// without matching username and password metadata Unauthenticated.
// LastRequest (admin: GET /requests) returns the last request of each RPC
// with its metadata, recorded before those checks, so tests can compare
// what reached the device directly and through a proxy.
//
// Stop and Start restart it on the same address: a non-persistent device
// comes back empty, a persistent one with its configuration (in memory, or
// in Options.StateFile so it survives the process). /system/state/boot-time
// changes on every start. Faults are injected from Go (RejectNextSets,
// SetDelay, SetUpdateDelay, HangNextSet, DropConnections) or over HTTP
// (AdminHandler). SetDelay makes every Set cost the same; SetUpdateDelay
// adds a cost per operation, for a device whose commit grows with what a
// Set carries. Faults can also be armed for the Sets that touch one path,
// once, n times or always (ArmSetFault, RefuseNextSetsAt, HangNextSetAt,
// DelayNextSetsAt): a refusal with a code (and optionally a
// google.rpc.BadRequest naming the path), a delay, a hang. Every fault
// honours the Set's context: a Set whose RPC ends while it is held
// (client cancel, deadline, dropped connection) answers with the
// context's error, and a Set whose context has ended is never applied,
// as a real device aborts the commit of a cancelled RPC.
//
// SetLog (admin: GET /setlog) records every Set RPC, the last SetLogSize:
// when it arrived, the deadline the device saw (the time its context had
// left), its metadata and request, the injected faults that met it, its
// answer's code, whether its context had ended when it was answered, and
// whether it was applied; so tests see how often a Set reached the device,
// with which deadline and metadata, and whether a client's cancel did.
// ConfigLeaves, SetCount, ElectionID and BootTime let tests look inside.
//
// Paths are the full, uncompressed OpenConfig paths clients send, e.g.
// /interfaces/interface[name=eth0]/config/description. The schema is
// compressed with config preferred: containers such as /interfaces and
// …/config have no struct of their own and config-mirrored state leaves
// (…/state/description) do not exist in it. The device still serves them:
// Get of a compressed container is cut from its nearest ancestor, Set of a
// JSON value there is wrapped into that ancestor, Get of a state leaf
// returns the config value, STATE data mirrors config into state, and Set
// of any path through a "state" container is refused as read-only.
//
// A Set costs what it writes, not the size of the configuration: it works
// on copies of the list entries it touches and puts them into the running
// tree in place. A Set of scalar values at leaves of entries of top-level
// lists (a re-push, a preload, most one-leaf Sets) skips ytypes' per-field
// schema lookups: the route to each leaf is resolved once and cached, and
// only the leaves written (and a new entry's key) are validated, with the
// schema ytypes uses (fastset.go; about 5 µs a leaf, against 0.6 ms); any
// other Set, and any such Set a check fails, takes the general path,
// which answers with its own error. A Get, or a subscription's initial
// state, that reads whole lists works on a copy of the lists' maps, so it
// does not hold up Sets while it encodes.
//
// Not modelled: leafref integrity (ygot checks leafrefs only by walking the
// whole schema, over 100 ms per Set), schema checks of Subscribe paths (an
// unknown path just never matches), aliases, and origins other than
// openconfig.
//
// Tests usually start a device with StartT:
//
//	dev := testbed.StartT(t, testbed.Options{})
//	conn, err := grpc.NewClient(dev.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
package testbed
