// Module gnmitarget pins a third-party gNMI target the tests run the
// sidecar against: gnmi_target of github.com/google/gnxi (OpenConfig
// interfaces, system, platform and openflow; Set, Get, Subscribe). It is a
// module of its own so that its old dependencies stay out of the
// sidecar's go.mod; make tools builds it into ./bin:
//
//	cd hack/gnmitarget && go build -o ../../bin/gnmi_target github.com/google/gnxi/gnmi_target
package gnmitarget
