package fake

import (
	"context"

	"github.com/rebootkit/rebootkit/reboot"
)

// Other returns a second handle on the store's hosts, as another process
// (a fencing client, a second controller) has it: a reboot.HostStore and
// reboot.HostWatcher of its own that reads and writes the same records,
// its compare-and-swap checked and written under the store's lock, as
// processes share records whose compare-and-swap the storage makes
// atomic. The interloper (SetInterloper) and injected conflicts
// (FailUpdates) are not used by its Updates, and Updates does not count
// them.
func (s *RebootHosts) Other() reboot.HostStore { return &otherHosts{s: s} }

// otherHosts is Other's handle.
type otherHosts struct{ s *RebootHosts }

// Compile-time check: Other's handle can watch as the store can.
var _ reboot.HostWatcher = (*otherHosts)(nil)

// Get implements reboot.HostStore.
func (o *otherHosts) Get(ctx context.Context, name string) (reboot.Host, error) {
	return o.s.Get(ctx, name)
}

// Update implements reboot.HostStore with compare-and-swap; nothing is
// written once ctx has ended.
func (o *otherHosts) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	return o.s.update(ctx, h, false)
}

// Watch implements reboot.HostWatcher as RebootHosts.Watch does.
func (o *otherHosts) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	return o.s.Watch(ctx, name)
}
