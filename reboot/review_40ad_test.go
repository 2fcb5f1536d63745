package reboot_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview40ad_ResyncSkipsKeysGivenToAdd: Runner's doc says "Resync is
// how often Loop.Keys is listed again and every key reconciled", and
// Loop.Watch's doc that "without Watch, changes are seen at the next
// RequeueAfter or Resync"; Loop.Keys nil means "only the keys given to
// Runner.Add". A loop of that kind (keys given by Add, a store without
// Watch) has its keys reconciled at no Resync: a key whose last pass
// asked for nothing more (Next{}) is never reconciled again, so a reboot
// request written to its record later (a fencing client's) waits for
// ever, not for a Resync. run.go's tick only lists loops (list()); it
// never wakes the keys of a loop without Keys.
func TestReview40ad_ResyncSkipsKeysGivenToAdd(t *testing.T) {
	var passes atomic.Int32
	r := &reboot.Runner{Resync: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond, Loops: []reboot.Loop{{
		Name: "mine",
		Reconcile: func(context.Context, string) (reboot.Next, error) {
			passes.Add(1)
			return reboot.Next{}, nil
		},
	}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if err := r.Add("mine", "h"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // 100 Resyncs
	cancel()
	<-done
	if n := passes.Load(); n < 3 {
		t.Fatalf("key h, given to Add on a loop without Keys or Watch, was reconciled %d time(s) in 2 s with Resync 20 ms: Resync does not reconcile it (a change to its record is never seen)", n)
	}
}
