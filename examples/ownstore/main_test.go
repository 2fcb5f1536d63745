package main

import (
	"os"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/etcd/etcdtest"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// TestInventoryConformance runs the published conformance kit on the
// inventory, with a second handle on the same storage as another process
// has it (the kit's race sends half its writers through each).
func TestInventoryConformance(t *testing.T) {
	reboottest.Check(t, func(h reboot.Host) (reboottest.Stores, error) {
		inv := newInventory(h)
		return reboottest.Stores{Hosts: inv, Other: inv.reopen()}, nil
	})
}

// TestFence fences a host through the runner, guarded by a leader
// election on an embedded etcd.
func TestFence(t *testing.T) {
	e, endpoint, err := etcdtest.Start(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := t.Context()
	start := time.Now()
	if err := fence(ctx, endpoint, "db-2", os.Stderr); err != nil {
		t.Fatal(err)
	}
	t.Logf("fenced and back in %v", time.Since(start))
}
