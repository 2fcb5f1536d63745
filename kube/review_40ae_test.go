package kube

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
)

// review40aeLock is a Lease lock whose writes succeed (the guard notes
// their sending).
type review40aeLock struct{}

func (review40aeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{}, nil, nil
}
func (review40aeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return nil }
func (review40aeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return nil }
func (review40aeLock) RecordEvent(string)                                              {}
func (review40aeLock) Identity() string                                                { return "a" }
func (review40aeLock) Describe() string                                                { return "review40ae/lease" }

// review40aePause stops this whole process (every goroutine and timer, as
// a long GC pause, a VM migration or SIGSTOP does) for d: SIGSTOP to
// itself, SIGCONT from a helper process d later.
func review40aePause(t *testing.T, d time.Duration) {
	cmd := exec.Command("sh", "-c", "sleep "+strconv.FormatFloat(d.Seconds(), 'f', 3, 64)+"; kill -CONT "+strconv.Itoa(os.Getpid()))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	go func() { _ = cmd.Wait() }() // reaped later: this goroutine goes on at once when resumed
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		t.Error(err)
	}
	// The stop sometimes lands a few milliseconds after kill returns:
	// spin (yielding to no timer) until resumed.
	for e := time.Since(t0); e < d*9/10 && e < d+10*time.Second; e = time.Since(t0) {
	}
}

// TestReview40ae_LeaseGuardPausedLeaderWritesAfterLeaseEnd: LeaseGuard's
// doc: Hold "answers only while the lease is held with the margin, and its
// context ends at the lease's end minus the margin"; reboot.Guard's: "a
// process paused in between finds it past its deadline". The wrapped power
// calls check the monotonic clock at their start (within), but Hold hands
// a reboot.Reconciler's store writes (reboot.Fenced) only a context, whose
// deadline is a timer: a process paused (SIGSTOP) between Hold and the
// store's check resumes with the context not yet ended, and the store
// (fake.RebootHosts checks ctx just before its write) writes. Ground
// truth: the record holds the write, made after a pause of twice the
// lease's whole duration since its only renewal was sent (another
// candidate may have taken the Lease LeaseDuration after it).
func TestReview40ae_LeaseGuardPausedLeaderWritesAfterLeaseEnd(t *testing.T) {
	ctx := context.Background()
	const lease = time.Second
	landed, tries, valid := 0, 16, 0
	for i := 0; i < tries; i++ {
		g := &LeaseGuard{Lock: review40aeLock{}, LeaseDuration: lease}
		if err := g.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: int(lease / time.Second)}); err != nil {
			t.Fatal(err)
		}
		renewed := time.Now()
		store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
		h, _ := store.Get(ctx, "h")
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "late": ""}
		var resumed time.Time
		store.SetInterloper(func(string) { review40aePause(t, 2*lease); resumed = time.Now() })
		err := reboot.Fenced(ctx, g, "reboot: update host h", func(gctx context.Context) error {
			_, err := store.Update(gctx, h)
			return err
		})
		store.SetInterloper(nil)
		got, _ := store.Get(ctx, "h")
		_, written := got.Annotations[reboot.AnnotationPrefix+"late"]
		t.Logf("try %d: resumed %v after the renewal was sent (lease %v); Fenced returned %v; the write landed: %v", i, resumed.Sub(renewed).Round(time.Millisecond), lease, err, written)
		if resumed.Sub(renewed) < lease {
			t.Logf("try %d: not paused (resumed %v after the renewal)", i, resumed.Sub(renewed))
			continue // the pause did not happen: not a try
		}
		valid++
		if written {
			landed++
		}
	}
	if valid == 0 {
		t.Fatal("setup: the process was never paused")
	}
	if landed > 0 {
		t.Fatalf("%d of %d fenced writes from a leader paused %v (twice the lease) between LeaseGuard.Hold and its store's check landed, %v or more after the lease's only renewal was sent: Hold's context had not ended when the process resumed (a deadline is a timer, paused with the process); nothing compares the monotonic clock with the lease's end at the write", landed, valid, 2*lease, 2*lease)
	}
}
