package proxy

import gpb "github.com/openconfig/gnmi/proto/gnmi"

// originOnPath reports whether a client's path carries an origin as its
// prefix does (the same one: joinPath refuses two): the full path holds it
// once, and the change's device Set puts it on the path too, as sent.
func originOnPath(prefix, p *gpb.Path) bool {
	return prefix.GetOrigin() != "" && p.GetOrigin() != ""
}
