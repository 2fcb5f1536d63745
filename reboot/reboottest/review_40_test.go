package reboottest_test

import (
	"context"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// onceWatch is a store whose Watch reports only the first change after it
// was set up, then nothing until its context ends (a watch whose re-arm is
// broken): the Runner and the Client's Wait methods then see later changes
// only at Resync or Poll.
type onceWatch struct{ *fake.RebootHosts }

func (s onceWatch) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	in, err := s.RebootHosts.Watch(ctx, name)
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		sent := false
		for range in {
			if !sent {
				out <- struct{}{}
				sent = true
			}
		}
	}()
	return out, nil
}

// TestReview40_ContractPassesWatchThatFiresOnce: HostWatcher's contract is
// "a value after every change ... made after Watch returned (coalesced)";
// the kit checks only that 100 unread writes leave one value, so a watch
// that fires once and never again passes Contract (and StateMachine, which
// does not watch). The kit should read the value, write again, and expect
// another.
func TestReview40_ContractPassesWatchThatFiresOnce(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		reboottest.Contract(r, func(h reboot.Host) (reboottest.Stores, error) {
			return reboottest.Stores{Hosts: onceWatch{fake.NewRebootHosts(h)}}, nil
		})
	}()
	<-done
	if len(r.failed) == 0 {
		t.Fatal("a HostWatcher that reports only the first change passed the kit's Contract")
	}
	t.Logf("caught: %v", r.failed)
}
