package reboottest_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// lastWriterWins is a store that ignores versions: the bug the kit exists
// to catch (a keyed request added between the controller's read and its
// write is lost, and the host is powered on under a fencing client).
type lastWriterWins struct{ *fake.RebootHosts }

func (s lastWriterWins) Update(ctx context.Context, h reboot.Host) (reboot.Host, error) {
	cur, err := s.Get(ctx, h.Name)
	if err != nil {
		return reboot.Host{}, err
	}
	h.Version = cur.Version
	return s.RebootHosts.Update(ctx, h)
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Errorf(f string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(f, a...))
}

func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }
func (r *recorder) Fatal(a ...any)            { r.Errorf("%s", fmt.Sprint(a...)); runtime.Goexit() }
func (r *recorder) Error(a ...any)            { r.Errorf("%s", fmt.Sprint(a...)) }
func (r *recorder) Helper()                   {}

// TestContractCatchesLastWriterWins (issue 40, point 4): the kit's
// contract check fails a store that does not compare versions, and passes
// the fake store.
func TestContractCatchesLastWriterWins(t *testing.T) {
	t.Parallel()
	run := func(newStores reboottest.NewStores) []string {
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); reboottest.Contract(r, newStores) }()
		<-done
		return r.failed
	}
	if f := run(func(h reboot.Host) (reboottest.Stores, error) {
		return reboottest.Stores{Hosts: lastWriterWins{fake.NewRebootHosts(h)}}, nil
	}); len(f) == 0 {
		t.Error("a last-writer-wins store passed the contract")
	} else {
		t.Logf("caught: %v", f)
	}
	if f := run(func(h reboot.Host) (reboottest.Stores, error) {
		s := fake.NewRebootHosts(h)
		return reboottest.Stores{Hosts: s, Other: s.Other()}, nil
	}); len(f) != 0 {
		t.Errorf("the fake store failed the contract: %v", f)
	}
}
