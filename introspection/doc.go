// Package introspection is the sidecar's own read-only gNMI tree under
// origin gnmi-sidecar (docs/introspection.md): the journal's
// configuration, proposals, out-of-sync paths and resolutions, and the
// agent's view of the device, answered to Get and to Subscribe (ONCE,
// POLL, and STREAM with ON_CHANGE or SAMPLE). A Tree implements
// proxy.Introspection; the proxy routes the requests of the origin to it.
package introspection
