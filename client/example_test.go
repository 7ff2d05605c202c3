package client_test

import (
	"context"
	"fmt"
	"log"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// A Set answered once the sidecar has durably committed it, and what the
// sidecar says about it.
func Example() {
	conn, err := grpc.NewClient("sidecar.example:9339", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	c := gpb.NewGNMIClient(conn)

	path, err := ygot.StringToStructuredPath("/interfaces/interface[name=eth0]/config/description")
	if err != nil {
		log.Fatal(err)
	}
	req := &gpb.SetRequest{Update: []*gpb.Update{{
		Path: path,
		Val:  &gpb.TypedValue{Value: &gpb.TypedValue_StringVal{StringVal: "uplink"}},
	}}}
	resp, err := c.Set(context.Background(), client.WithMode(req, sidecarpb.SetMode_SET_MODE_ASYNC))
	if err != nil {
		if r, ok := client.ResponseFromError(err); ok {
			log.Fatalf("proposal %d: commit %v, apply %v: %v", r.GetIndex(), r.GetCommit(), r.GetApply(), err)
		}
		log.Fatal(err)
	}
	r, ok, err := client.ResponseOf(resp)
	if err != nil || !ok {
		log.Fatalf("not a gnmi-sidecar answer (found: %v): %v", ok, err)
	}
	fmt.Printf("proposal %d committed; apply %v\n", r.GetIndex(), r.GetApply())
}

// Undoing the newest change, and telling why a rollback was refused.
func ExampleRollback() {
	conn, err := grpc.NewClient("sidecar.example:9339", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	r, _, err := client.Rollback(context.Background(), gpb.NewGNMIClient(conn), 0, sidecarpb.SetMode_SET_MODE_SYNC)
	switch status.Code(err) {
	case codes.OK:
		fmt.Printf("proposal %d rolled back; the device has the configuration from before it\n", r.GetIndex())
	case codes.NotFound:
		fmt.Println("nothing to roll back")
	case codes.FailedPrecondition:
		fmt.Println("cannot roll back now:", err) // names the proposal to roll back first, if that is why
	default:
		log.Fatal(err)
	}
}
