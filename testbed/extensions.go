package testbed

import (
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/protobuf/proto"
)

// echoed returns the RegisteredExtensions among exts, copied: the device
// answers every request with the registered extensions it carried (see
// the package documentation).
func echoed(exts []*gnmi_ext.Extension) []*gnmi_ext.Extension {
	var out []*gnmi_ext.Extension
	for _, e := range exts {
		if e.GetRegisteredExt() != nil {
			out = append(out, proto.CloneOf(e))
		}
	}
	return out
}

var _ = gpb.Encoding_JSON
