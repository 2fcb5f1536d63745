package remediation_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// recordInventory is a user's own inventory of single records with no
// Watch (the store fake.Records is, without its Watch): the review 40
// tests need a store the Loop must poll.
type recordInventory struct{ rs *fake.Records }

func (s *recordInventory) Get(ctx context.Context, name string) (remediation.Record, error) {
	return s.rs.Get(ctx, name)
}

func (s *recordInventory) List(ctx context.Context) ([]remediation.Record, error) {
	return s.rs.List(ctx)
}

func (s *recordInventory) Update(ctx context.Context, r remediation.Record) (remediation.Record, error) {
	return s.rs.Update(ctx, r)
}

func (s *recordInventory) set(name string, f func(r *remediation.Record)) { s.rs.Set(name, f) }

// runCounting runs r's Loop over db-1 in a reboot.Runner and returns a
// function that reports the passes of db-1 since it was last called.
func runCounting(t *testing.T, ctx context.Context, r *remediation.Reconciler) func() int {
	t.Helper()
	l := r.Loop(func(context.Context) ([]string, error) { return []string{"db-1"}, nil })
	var mu sync.Mutex
	n := 0
	rec := l.Reconcile
	l.Reconcile = func(ctx context.Context, key string) (reboot.Next, error) {
		mu.Lock()
		n++
		mu.Unlock()
		return rec(ctx, key)
	}
	run := &reboot.Runner{Loops: []reboot.Loop{l}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	go run.Run(ctx)
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		c := n
		n = 0
		return c
	}
}

// waitPass waits up to d for a pass of db-1 (passes counted by count).
func waitPass(count func() int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if count() > 0 {
			return true
		}
	}
	return false
}

// runQuiet runs r's Loop over db-1 until ctx ends, as runCounting does,
// waits settle (the first watch tries and passes), drops the passes
// counted so far, and fails t unless db-1 then gets no pass for quiet:
// the precondition of a test that a later change must wake db-1. It
// returns runCounting's counter.
func runQuiet(t *testing.T, ctx context.Context, r *remediation.Reconciler, settle, quiet time.Duration) func() int {
	t.Helper()
	count := runCounting(t, ctx, r)
	time.Sleep(settle)
	count()
	time.Sleep(quiet)
	if n := count(); n != 0 {
		t.Fatalf("precondition: db-1 is quiet (got %d passes)", n)
	}
	return count
}
