package reboottest_test

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"

	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// review40afDisk is the storage several processes share (a database
// table, a shared directory): each read and each write of one record is
// atomic, nothing more.
type review40afDisk struct {
	mu    sync.Mutex
	hosts map[string]reboot.Host
	ver   int
}

// review40afHandle is one process's HostStore over the shared disk,
// written after examples/ownstore's inventory: a sync.Mutex around read,
// version check and write. Two processes (the controller and a fencing
// client, two controllers in a failover) each have their own mutex, so
// one's check is not atomic with the other's write.
type review40afHandle struct {
	mu      sync.Mutex
	disk    *review40afDisk
	between func() // between the check and the write (test only)
}

func (h *review40afHandle) read(name string) (reboot.Host, bool) {
	h.disk.mu.Lock()
	defer h.disk.mu.Unlock()
	x, ok := h.disk.hosts[name]
	x.Annotations = maps.Clone(x.Annotations)
	return x, ok
}

func (h *review40afHandle) write(x reboot.Host) reboot.Host {
	h.disk.mu.Lock()
	defer h.disk.mu.Unlock()
	h.disk.ver++
	x.Version = strconv.Itoa(h.disk.ver)
	x.Annotations = maps.Clone(x.Annotations)
	h.disk.hosts[x.Name] = x
	return x
}

func (h *review40afHandle) Get(_ context.Context, name string) (reboot.Host, error) {
	x, ok := h.read(name)
	if !ok {
		return reboot.Host{}, fmt.Errorf("%s: %w", name, reboot.ErrNotFound)
	}
	return x, nil
}

func (h *review40afHandle) Update(ctx context.Context, x reboot.Host) (reboot.Host, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return reboot.Host{}, err
	}
	cur, ok := h.read(x.Name)
	if !ok {
		return reboot.Host{}, fmt.Errorf("%s: %w", x.Name, reboot.ErrNotFound)
	}
	if cur.Version != x.Version {
		return reboot.Host{}, fmt.Errorf("%s: %w", x.Name, reboot.ErrConflict)
	}
	if h.between != nil {
		h.between()
	}
	cur.Annotations, cur.Status = x.Annotations, x.Status
	return h.write(cur), nil
}

// TestReview40af_ContractNilOtherPassesStoreRacyAcrossProcesses:
// reboottest.Contract's doc says that of racecheck.Writers Updates at once
// from one read "exactly one succeeds ... (a store whose version check is
// not atomic with its write fails)", and Stores.Other's doc says only
// "nil uses Hosts": no word that with Other nil a store atomic only within
// one process passes, which plantest.Stores.Other and
// remediationtest.Stores.OtherAdmissions now say (round 27). The
// project's own template for outside users (examples/ownstore's
// TestInventoryConformance), kube's TestRebootHostsConformance and the
// fake's TestRebootStateMachine give no Other. A user's HostStore with a
// mutex per process around a shared table, checked as the example is,
// passes; while (ground truth below) the controller's status write and a
// fencing client's keyed request from one read are both accepted, the
// request lost.
func TestReview40af_ContractNilOtherPassesStoreRacyAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	newDisk := func() *review40afDisk {
		return &review40afDisk{hosts: map[string]reboot.Host{}}
	}
	// Ground truth: two processes' handles, the controller's and the
	// fencing client's, each Update from the same read, interleaved as
	// two processes' can be (each one's check before the other's write).
	d := newDisk()
	ctl, client := &review40afHandle{disk: d}, &review40afHandle{disk: d}
	ctl.write(reboot.Host{Name: "h", Online: true})
	read, _ := ctl.Get(ctx, "h")
	var both sync.WaitGroup
	both.Add(2)
	barrier := func() { both.Done(); both.Wait() }
	ctl.between, client.between = barrier, barrier
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for k, h := range []*review40afHandle{ctl, client} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := read
			w.Annotations = map[string]string{"who": strconv.Itoa(k)}
			_, errs[k] = h.Update(ctx, w)
		}()
	}
	wg.Wait()
	got, _ := client.Get(ctx, "h")
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("setup: want both Updates from one read accepted: %v", errs)
	}
	t.Logf("ground truth: the controller's and the fencing client's Updates from version %s both accepted; the record holds only %v", read.Version, got.Annotations)

	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// As examples/ownstore gives it: Other nil.
		reboottest.Contract(r, func(h reboot.Host) (reboottest.Stores, error) {
			d := newDisk()
			s := &review40afHandle{disk: d}
			s.write(h)
			return reboottest.Stores{Hosts: s}, nil
		})
	}()
	<-done
	withOther := &recorder{TB: t}
	done2 := make(chan struct{})
	go func() {
		defer close(done2)
		reboottest.Contract(withOther, func(h reboot.Host) (reboottest.Stores, error) {
			d := newDisk()
			s := &review40afHandle{disk: d}
			s.write(h)
			return reboottest.Stores{Hosts: s, Other: &review40afHandle{disk: d}}, nil
		})
	}()
	<-done2
	t.Logf("with Other given, the kit reports %d failure(s): %v", len(withOther.failed), withOther.failed)
	if len(r.failed) == 0 {
		t.Fatalf("reboottest.Contract with Other nil (\"nil uses Hosts\", as examples/ownstore, kube and the fake give it) passed a HostStore whose compare-and-swap is atomic only within one process (ground truth: two processes' Updates from one read both accepted, one lost); its doc promises such a store fails, and Stores.Other's doc does not say nil cannot catch it")
	}
}
