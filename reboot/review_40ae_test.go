package reboot_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// deletableHosts is a user's own HostStore whose hosts can be deleted
// (decommissioned servers), with a HostWatcher: a watch of a deleted host
// fails with ErrNotFound, and a watch in place ends when its host is
// deleted. It counts the Gets and the Watch calls made after the delete.
type deletableHosts struct {
	mu        sync.Mutex
	hosts     map[string]reboot.Host
	watches   map[string][]chan struct{}
	getsAfter atomic.Int64 // Gets of a deleted host
	watchTry  atomic.Int64 // Watch calls for a deleted host
	liveWatch atomic.Int64 // watches whose ctx is not done
}

func (s *deletableHosts) Get(_ context.Context, name string) (reboot.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[name]
	if !ok {
		s.getsAfter.Add(1)
		return reboot.Host{}, fmt.Errorf("host %s: %w", name, reboot.ErrNotFound)
	}
	return h, nil
}

func (s *deletableHosts) Update(_ context.Context, h reboot.Host) (reboot.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.hosts[h.Name]
	if !ok {
		return reboot.Host{}, fmt.Errorf("host %s: %w", h.Name, reboot.ErrNotFound)
	}
	if cur.Version != h.Version {
		return reboot.Host{}, fmt.Errorf("host %s: %w", h.Name, reboot.ErrConflict)
	}
	var v int
	fmt.Sscan(cur.Version, &v)
	h.Version = fmt.Sprint(v + 1)
	s.hosts[h.Name] = h
	return h, nil
}

func (s *deletableHosts) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.hosts[name]; !ok {
		s.watchTry.Add(1)
		return nil, fmt.Errorf("host %s: %w", name, reboot.ErrNotFound)
	}
	ch := make(chan struct{}, 1)
	s.watches[name] = append(s.watches[name], ch)
	s.liveWatch.Add(1)
	go func() {
		<-ctx.Done()
		s.liveWatch.Add(-1)
	}()
	return ch, nil
}

func (s *deletableHosts) deleteAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, chs := range s.watches {
		for _, ch := range chs {
			close(ch)
		}
		delete(s.watches, name)
	}
	s.hosts = map[string]reboot.Host{}
}

// TestReview40ae_AddedKeysOfDeletedHostsNeverLeftAlone: Reconciler.Loop's
// doc says "a host gone from the store (ErrNotFound) is left alone until
// it is listed or added again", and the issue asks for a runner with "the
// same guarantees the kube controller has" (a controller-runtime queue
// forgets a deleted object). With the keys given by Runner.Add (Loop(nil),
// the fencer's way: Loop.Keys nil means "only the keys given to
// Runner.Add, ... never forgotten"), a deleted host is never left alone:
// it is read again at every Resync and its watch is tried again for ever
// (with a warning each time), and the Runner has no Remove/Forget to let
// go of it. A process that Adds the hosts it sees over months (servers
// decommissioned, renamed) grows without bound: one keyState, one watch
// goroutine and one store read per Resync for every host it ever saw.
func TestReview40ae_AddedKeysOfDeletedHostsNeverLeftAlone(t *testing.T) {
	const n = 50
	store := &deletableHosts{hosts: map[string]reboot.Host{}, watches: map[string][]chan struct{}{}}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("h%d", i)
		store.hosts[name] = reboot.Host{Name: name, Online: true, Version: "1"}
	}
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	rec := &reboot.Reconciler{Hosts: store, Now: time.Now,
		Power: func(string) (power.Controller, error) { return hw, nil }}
	r := &reboot.Runner{Resync: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Loops: []reboot.Loop{rec.Loop(nil)}}
	stop := runFor(t, r)
	defer stop()
	for i := 0; i < n; i++ {
		if err := r.Add("reboot", fmt.Sprintf("h%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for store.liveWatch.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := store.liveWatch.Load(); got < n {
		t.Fatalf("setup: %d of %d watches in place", got, n)
	}
	store.deleteAll()
	time.Sleep(500 * time.Millisecond) // each deleted host's ErrNotFound pass ran
	gets, tries, live := store.getsAfter.Load(), store.watchTry.Load(), store.liveWatch.Load()
	time.Sleep(time.Second) // 50 Resyncs
	gets2, tries2, live2 := store.getsAfter.Load(), store.watchTry.Load(), store.liveWatch.Load()
	if gets2 > gets || tries2 > tries || live2 > 0 {
		t.Fatalf("%d hosts deleted from the store, their ErrNotFound passes run: in the next second (50 Resyncs) the Runner read them %d more times and tried %d more watches of them (%d watch contexts still live, were %d); want them left alone (doc of Reconciler.Loop) and their keys released: keys given to Add are never forgotten and the Runner has no way to remove one",
			n, gets2-gets, tries2-tries, live2, live)
	}
}
