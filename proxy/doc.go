// Package proxy is the sidecar's northbound gNMI server. To a client it is
// the device: Capabilities, Get and Subscribe are passed through unchanged
// (request metadata and deadlines forwarded, responses and errors returned
// as the device sent them); every Set is intercepted, journaled as a
// proposal and answered once the agent has applied it (SYNC, the default)
// or once it is durably committed (ASYNC). The sidecar's own extension
// (RegisteredExtension id 999, messages in sidecarpb, documented in
// docs/extension.md) selects the mode, requests rollbacks, and reports the
// proposal's index and statuses in every Set response. Get and Subscribe
// of origin gnmi-sidecar go to Options.Introspection (the introspection
// package), those with the History extension are answered from the journal.
package proxy
