package reboottest_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// doneOnly refuses a write only when its context's Done channel is
// closed, as database/sql and net/http do (select on ctx.Done()), never
// asking ctx.Err(): the reboot.ClockBound context a Guard hands out is
// ended (Err non-nil) past its deadline before its timer closes Done.
type doneOnly struct{ reboot.HostStore }

func (s doneOnly) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	select {
	case <-ctx.Done():
		return reboot.Host{}, ctx.Err()
	default:
	}
	return s.HostStore.Update(context.Background(), h)
}

// TestReview40ai_ContractPassesStoreBlindToClockBound: reboot.ClockBound
// (the Guards' contexts: hold, Fenced, etcd.Leadership.Guard,
// kube.LeaseGuard) ends a context "even before the deadline's timer fires"
// only through Err: "a store that checks ctx.Err() just before it sends
// refuses after a pause that outlasted the lease". The kit's Contract
// ("an Update with a context that ended fails and writes nothing: a
// leader paused between its Hold and its Update resumes with that
// context ended, and only the store can refuse") tries only a cancelled
// context, whose Done is closed too, so it passes a store that looks at
// Done only, the very pattern of database drivers the ownstore example
// points to ("a database driver that takes the context refuses to
// send"): the paused leader's write lands after its lease ran out.
func TestReview40ai_ContractPassesStoreBlindToClockBound(t *testing.T) {
	t.Parallel()
	// The ground truth first: this store writes with a context a Guard
	// reports ended (Err non-nil), its timer not yet fired.
	s := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	h, _ := s.Get(context.Background(), "h")
	h.Annotations = map[string]string{reboot.AnnotationPrefix + "late": ""}
	ended := reboot.ClockBound(pastDeadline{context.Background()})
	if ended.Err() == nil {
		t.Fatal("ClockBound of a context past its deadline: Err nil")
	}
	if _, err := (doneOnly{s}).Update(ended, h); err != nil {
		t.Fatalf("setup: the Done-only store refused: %v", err)
	}
	f := runKit(t, func(r *recorder) {
		reboottest.Contract(r, func(h reboot.Host) (reboottest.Stores, error) {
			s := fake.NewRebootHosts(h)
			return reboottest.Stores{Hosts: doneOnly{s}, Other: doneOnly{s.Other()}}, nil
		})
	})
	if len(f) == 0 {
		t.Fatal("Contract passed a store that writes with a Guard's context ended by the clock (ClockBound: Err non-nil, Done not yet closed): a leader paused past its lease lands its write on resume")
	}
	t.Logf("caught: %v", f)
}

// pastDeadline is a context whose deadline went by while its timer has
// not fired (a process resumed from a pause): Done still open.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (deadline time.Time, ok bool) {
	return time.Now().Add(-time.Second), true
}
