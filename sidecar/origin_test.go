package sidecar_test

import (
	"context"
	"testing"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/sidecar/sidecartest"
)

// TestOriginOneLeaf is issue 33's reproduction: the same leaf written
// without origin and with origin openconfig, then a device restart, then
// a rollback. The journal holds the leaf once, the re-push sends it once
// (the later value) and the rollback puts back the first value.
func TestOriginOneLeaf(t *testing.T) {
	const host = "/system/config/hostname"
	s := sidecartest.Start(t, sidecartest.Options{})
	s.MustSet(t, sidecartest.UpdateRequest(t, host, sidecartest.StringVal("first")))
	second := sidecartest.UpdateRequest(t, host, sidecartest.StringVal("second"))
	second.Update[0].Path.Origin = "openconfig"
	s.MustSet(t, second)
	s.WantDeviceLeaf(t, host, sidecartest.StringVal("second"))
	s.Settle(t)

	var records []*journal.PathValue
	if err := s.Journal.ReplayApplied(context.Background(), func(pv *journal.PathValue) error {
		records = append(records, pv)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(records) != 1 || records[0].GetPath().GetOrigin() != "openconfig" || records[0].GetValue().GetStringVal() != "second" {
		t.Fatalf("the journal's applied values: %v, want the second write alone", records)
	}

	repushes := s.Agent.Status().Repushes
	s.Dev.Stop()
	if err := s.Dev.Start(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	sidecartest.Eventually(t, 20*time.Second, "the re-push", func() bool { return s.Agent.Status().Repushes > repushes })
	s.WantDeviceLeaf(t, host, sidecartest.StringVal("second"))
	last, ok := s.Dev.LastRequest("Set")
	if !ok {
		t.Fatal("the device received no Set")
	}
	sent := 0
	req := last.Message.(*gpb.SetRequest)
	for _, u := range append(req.GetUpdate(), req.GetReplace()...) {
		if u.GetPath().GetElem()[len(u.GetPath().GetElem())-1].GetName() == "hostname" {
			sent++
		}
	}
	if sent != 1 {
		t.Errorf("the re-push sent the hostname %d times: %v", sent, req)
	}

	s.MustSet(t, sidecartest.RollbackRequest(t, 0))
	s.WantDeviceLeaf(t, host, sidecartest.StringVal("first"))
	s.Settle(t)
	var committed []*journal.PathValue
	if err := s.Journal.Committed(context.Background(), sidecartest.Path(t, "/system"), func(pv *journal.PathValue) error {
		committed = append(committed, pv)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(committed) != 1 || committed[0].GetValue().GetStringVal() != "first" {
		t.Errorf("committed after the rollback: %v, want the first write alone", committed)
	}
}
