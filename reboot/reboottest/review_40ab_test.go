package reboottest_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// ctxBlind writes whatever its context: Update sends with a fresh one.
type ctxBlind struct{ *fake.RebootHosts }

func (s ctxBlind) Update(_ context.Context, h reboot.Host) (reboot.Host, error) {
	return s.RebootHosts.Update(context.Background(), h)
}

// TestReview40ab_ContractPassesStoreIgnoringContext: a Guard fences a
// store write only through the context it returns (reboot.Guard: "The
// caller makes its one write ... with that context"; etcd.Leadership.Guard
// and kube.LeaseGuard assume "a store that checks its context before it
// sends"): a leader paused between its Hold and its Update resumes with
// that context ended, and only the store can refuse. A store that ignores
// its context writes anyway, after the lease ran out. The kit's Contract
// never gives Update an ended context, so it passes such a store: the
// project's own fake.RebootHosts and the ownstore example's inventory
// (written "from the docs alone", fenced by etcd.Leadership.Guard) both
// write with an ended context, and the kit passes both.
func TestReview40ab_ContractPassesStoreIgnoringContext(t *testing.T) {
	t.Parallel()
	f := runKit(t, func(r *recorder) {
		reboottest.Contract(r, func(h reboot.Host) (reboottest.Stores, error) {
			return reboottest.Stores{Hosts: ctxBlind{fake.NewRebootHosts(h)}}, nil
		})
	})
	if len(f) == 0 {
		t.Fatal("Contract passed a store whose Update writes with an ended context (a paused leader's write lands after its Guard's lease ran out)")
	}
	t.Logf("caught: %v", f)
}
