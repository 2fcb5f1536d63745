package reboottest_test

import (
	"context"
	"fmt"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// ExampleNewStores shows the constructor a store's test gives to Check:
// a fresh store holding exactly the host given, and a second handle on
// it as another process has it. In your test:
// reboottest.Check(t, newStores).
func ExampleNewStores() {
	var newStores reboottest.NewStores = func(h reboot.Host) (reboottest.Stores, error) {
		s := fake.NewRebootHosts(h)
		return reboottest.Stores{Hosts: s, Other: s.Other()}, nil
	}
	s, _ := newStores(reboot.Host{Name: "db-1", Online: true})
	h, _ := s.Hosts.Get(context.Background(), "db-1")
	fmt.Println(h.Name, h.Online)
	// Output: db-1 true
}
