package reboottest_test

import (
	"context"
	"maps"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// annotationsOnlyWatch is a store whose Watch reports a change of the
// host's annotations but not of its Status (a watch on metadata only): the
// reboot controller's evidence (LastPoweredOff, the fenced evidence,
// LastPoweredOn) never wakes anyone.
type annotationsOnlyWatch struct{ *fake.RebootHosts }

func (s annotationsOnlyWatch) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	in, err := s.RebootHosts.Watch(ctx, name)
	if err != nil {
		return nil, err
	}
	h, _ := s.RebootHosts.Get(ctx, name)
	last := h.Annotations
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range in {
			h, err := s.RebootHosts.Get(ctx, name)
			if err != nil || maps.Equal(h.Annotations, last) {
				continue
			}
			last = h.Annotations
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, nil
}

// TestReview40b_ContractPassesWatchBlindToStatus: HostWatcher's contract
// is a value "after every change of the named host's record", and
// Reconciler.Loop (remediation) relies on it to act "at once" on the
// reboot controller's evidence, which is Status only. The kit's watch
// checks write annotations only, so a watch that never reports a
// Status-only change passes Contract.
func TestReview40b_ContractPassesWatchBlindToStatus(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		reboottest.Contract(r, func(h reboot.Host) (reboottest.Stores, error) {
			return reboottest.Stores{Hosts: annotationsOnlyWatch{fake.NewRebootHosts(h)}}, nil
		})
	}()
	<-done
	if len(r.failed) == 0 {
		t.Fatal("a HostWatcher that never reports a Status-only change (the reboot controller's evidence) passed the kit's Contract")
	}
	t.Logf("caught: %v", r.failed)
}
