module github.com/gnmi-sidecar/gnmi-sidecar/hack/gnmitarget

go 1.26.0

tool github.com/google/gnxi/gnmi_target

require (
	github.com/golang/glog v1.1.0 // indirect
	github.com/golang/protobuf v1.5.3 // indirect
	github.com/google/gnxi v0.0.0-20231026134436-d82d9936af15 // indirect
	github.com/google/go-cmp v0.5.9 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/openconfig/gnmi v0.0.0-20220503232738-6eb133c65a13 // indirect
	github.com/openconfig/goyang v1.0.0 // indirect
	github.com/openconfig/ygot v0.20.0 // indirect
	golang.org/x/net v0.17.0 // indirect
	golang.org/x/sys v0.13.0 // indirect
	golang.org/x/text v0.13.0 // indirect
	google.golang.org/genproto v0.0.0-20230410155749-daa745c078e1 // indirect
	google.golang.org/grpc v1.56.3 // indirect
	google.golang.org/protobuf v1.30.0 // indirect
)
