package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// review40acLock is the leader-election lock of process "a": a write is
// applied at the API server at once, and its answer reaches the process
// when updGate is closed (an answer slow on the network).
type review40acLock struct {
	updGate    chan struct{}
	updStarted chan struct{}
}

func (l *review40acLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{}, nil, nil
}
func (l *review40acLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return nil }
func (l *review40acLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	close(l.updStarted)
	<-l.updGate
	return nil
}
func (l *review40acLock) RecordEvent(string) {}
func (l *review40acLock) Identity() string   { return "a" }
func (l *review40acLock) Describe() string   { return "review40ac/lease" }

// review40acLeases is the API server's Lease as the guard's watch reads
// it: holder is the ground truth ("" = deleted). The first Get answers
// at once; later ones when getGate is closed (a slow read).
type review40acLeases struct {
	coordinationv1client.LeaseInterface
	mu      sync.Mutex
	holder  string
	gets    atomic.Int32
	getGate chan struct{}
	watches chan *watch.FakeWatcher
}

func (f *review40acLeases) Leases(string) coordinationv1client.LeaseInterface { return f }

func (f *review40acLeases) lease() *coordinationv1.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lease", ResourceVersion: "1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(f.holder)}}
}

func (f *review40acLeases) Get(ctx context.Context, _ string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	if f.gets.Add(1) > 1 {
		select {
		case <-f.getGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return f.lease(), nil
}

func (f *review40acLeases) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	f.watches <- w
	return w, nil
}

// TestReview40ac_LeaseGuardRevivedByRenewalSentBeforeDeletion: the
// LeaseGuard's doc: a Lease "seen deleted or held by another identity, the
// lease is lost at once ...: Hold refuses, and the contexts it and the
// wrapped power calls got have ended, until a renewal of this process
// holds the Lease again". Here process a's renewal is applied, then an
// operator deletes the Lease (`kubectl delete lease`) and candidate b
// creates it at once; a's watch sees the deletion and the guard refuses.
// Then the answer to a's renewal, sent before the deletion, arrives:
// wrote() starts a new term and sets held, so Hold answers again for
// a's whole lease (sent + LeaseDuration - Margin), next to leader b,
// until the new term's read of the Lease answers. That renewal does not
// hold the Lease (ground truth: the Lease names b); a renewal sent before
// a loss the guard has seen must not revive it.
func TestReview40ac_LeaseGuardRevivedByRenewalSentBeforeDeletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock := &review40acLock{updGate: make(chan struct{}), updStarted: make(chan struct{})}
	leases := &review40acLeases{holder: "a", getGate: make(chan struct{}), watches: make(chan *watch.FakeWatcher, 4)}
	defer close(leases.getGate)
	g := &LeaseGuard{Lock: lock, LeaseDuration: 15 * time.Second, Monotonic: func() time.Duration { return time.Minute },
		leases: leases, leaseNS: "ns", leaseName: "lease"}
	rec := resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 15}
	if err := g.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	w1 := <-leases.watches // the term's watch is in place
	if _, c, err := g.Hold(ctx); err != nil {
		t.Fatalf("setup: a holds the Lease, Hold refuses: %v", err)
	} else {
		c()
	}

	// a renews; the write is applied, its answer is slow.
	updated := make(chan error, 1)
	go func() { updated <- g.Update(ctx, rec) }()
	<-lock.updStarted

	// The operator deletes the Lease; b creates it at once.
	leases.mu.Lock()
	leases.holder = "b"
	leases.mu.Unlock()
	w1.Delete(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lease"}})
	deadline := time.Now().Add(5 * time.Second)
	for g.Held() {
		if time.Now().After(deadline) {
			t.Fatal("setup: the guard did not see the Lease deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := g.Hold(ctx); err == nil {
		t.Fatal("setup: Hold answers after the deletion was seen")
	}

	// The renewal's answer arrives.
	close(lock.updGate)
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	if h := leases.lease().Spec.HolderIdentity; *h != "b" {
		t.Fatalf("setup: the Lease names %q", *h)
	}
	if _, c, err := g.Hold(ctx); err == nil {
		c()
		t.Fatalf("after the Lease was seen deleted and b took it (the Lease names b), the answer of a renewal a sent before the deletion made Hold answer again, for %v (a's lease from that renewal, minus the margin): a power call or store write of a's next to leader b",
			g.remaining().Round(time.Second))
	}
}
