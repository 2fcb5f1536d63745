package remediationtest_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// review40aeAdmDisk is the one admission record as the storage several
// processes share keeps it: each read and each write is atomic, nothing
// more.
type review40aeAdmDisk struct {
	mu  sync.Mutex
	a   remediation.Admissions
	ver int
}

// review40aeAdmHandle is one process's AdmissionStore over the shared
// record: its version check is atomic with its write under its own lock
// (a sync.Mutex, as a user's store of one process has), not with another
// process's write.
type review40aeAdmHandle struct {
	mu      sync.Mutex
	disk    *review40aeAdmDisk
	between func()
}

func (h *review40aeAdmHandle) GetAdmissions(context.Context) (remediation.Admissions, error) {
	h.disk.mu.Lock()
	defer h.disk.mu.Unlock()
	a := h.disk.a
	a.Machines = slices.Clone(a.Machines)
	a.Version = strconv.Itoa(h.disk.ver)
	return a, nil
}

func (h *review40aeAdmHandle) PutAdmissions(ctx context.Context, a remediation.Admissions) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur, _ := h.GetAdmissions(ctx)
	if a.Version != cur.Version {
		return fmt.Errorf("admissions version %s, current %s: %w", a.Version, cur.Version, remediation.ErrConflict)
	}
	if h.between != nil {
		h.between()
	}
	h.disk.mu.Lock()
	defer h.disk.mu.Unlock()
	a.Machines = slices.Clone(a.Machines)
	h.disk.a = a
	h.disk.ver++
	return nil
}

// TestReview40ae_ContractPassesAdmissionsRacyAcrossProcesses:
// remediation.AdmissionStore's doc: "the one record that makes the storm
// guard's admission atomic across concurrent reconciles and processes",
// and Reconciler's: Reconcile runs "from several processes". The kit's
// race check (race.go) is meant to fail "an AdmissionStore whose version
// check is not atomic with its write" (two hosts off under a storm-guard
// limit of one), but Stores gives it one handle: every writer goes
// through one process's lock. A store atomic only within its process
// passes, while two processes admitting from one read both succeed
// (ground truth below: two Machines admitted under a limit of one).
func TestReview40ae_ContractPassesAdmissionsRacyAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	disk := &review40aeAdmDisk{}
	p1, p2 := &review40aeAdmHandle{disk: disk}, &review40aeAdmHandle{disk: disk}
	var wg sync.WaitGroup
	wg.Add(2)
	barrier := func() { wg.Done(); wg.Wait() }
	p1.between, p2.between = barrier, barrier
	read, _ := p1.GetAdmissions(ctx)
	errs := make([]error, 2)
	var done sync.WaitGroup
	done.Add(2)
	for i, h := range []*review40aeAdmHandle{p1, p2} {
		go func() {
			defer done.Done()
			a := read
			a.Machines = append(slices.Clone(read.Machines), fmt.Sprintf("m%d", i))
			errs[i] = h.PutAdmissions(ctx, a)
		}()
	}
	done.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("setup: want both admissions accepted from one read: %v", errs)
	}
	t.Logf("ground truth: two processes admitted m0 and m1 from one read (version %s): %v", read.Version, errs)

	r := &recorder{TB: t}
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		remediationtest.Contract(r, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
			c := fake.NewCluster()
			for _, m := range ms {
				c.AddMachine(m)
			}
			for _, n := range ns {
				c.PutNode(n)
			}
			mark := func(_ context.Context, m string, on bool) error { c.SetNeedsRemediation(m, on); return nil }
			// Two processes' handles on one admission record.
			d := &review40aeAdmDisk{}
			return remediationtest.Stores{Machines: c, Nodes: c.Nodes(), Admissions: &review40aeAdmHandle{disk: d},
				OtherAdmissions: &review40aeAdmHandle{disk: d}, Mark: mark}, nil
		})
	}()
	<-fin
	for _, f := range r.failed {
		t.Logf("kit: %s", f)
	}
	if len(r.failed) == 0 {
		t.Fatalf("Contract passed an AdmissionStore whose compare-and-swap is atomic only within one process (ground truth: two processes admitted two Machines from one read): Stores has no second handle (another process's) to race admissions through")
	}
}
