package main

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40ab_InventoryWritesWithEndedContext: the example fences its
// controller with etcd.Leadership.Guard, whose doc assumes "a store that
// checks its context before it sends": a paused leader's write is stopped
// only by the ended context the Guard gave it. The example's inventory
// (the store a reader copies; "yours is a database table") ignores its
// context: a write made with a context that ended (the lease ran out)
// lands. Ground truth: the inventory's contents read back.
func TestReview40ab_InventoryWritesWithEndedContext(t *testing.T) {
	inv := newInventory(reboot.Host{Name: "db-1", Online: true})
	h, err := inv.Get(context.Background(), "db-1")
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	h.Annotations = map[string]string{"late": "write"}
	_, err = inv.Update(ended, h)
	got, _ := inv.Get(context.Background(), "db-1")
	if err == nil || got.Annotations["late"] != "" {
		t.Fatalf("Update with an ended context (a Guard's, after the lease ran out): error %v, record now %v: the paused leader's write landed", err, got.Annotations)
	}
}
