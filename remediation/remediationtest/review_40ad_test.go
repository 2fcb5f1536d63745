package remediationtest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// review40adRacyAdmissions is an AdmissionStore whose compare-and-swap is
// not atomic with its write: PutAdmissions reads the record, compares
// a.Version, and then writes (a SELECT, a check in Go, an UPDATE without
// "WHERE version = ?"). One caller at a time cannot tell it from a correct
// store; two reconcilers admitting at once both succeed, and the second
// record overwrites the first: the storm guard's one shared record, whose
// compare-and-swap the Reconciler's doc calls what makes admission atomic.
type review40adRacyAdmissions struct {
	*fake.Cluster
	between func(a remediation.Admissions)
}

func (s *review40adRacyAdmissions) PutAdmissions(ctx context.Context, a remediation.Admissions) error {
	cur, err := s.Cluster.GetAdmissions(ctx)
	if err != nil {
		return err
	}
	if cur.Version != a.Version {
		return fmt.Errorf("admissions version %s, current %s: %w", a.Version, cur.Version, remediation.ErrConflict)
	}
	if s.between != nil {
		s.between(a)
	}
	now, err := s.Cluster.GetAdmissions(ctx)
	if err != nil {
		return err
	}
	a.Version = now.Version
	return s.Cluster.PutAdmissions(ctx, a)
}

// TestReview40ad_ContractPassesAdmissionsThatLoseCASUnderConcurrency:
// the package doc says Contract checks "the compare-and-swap ... of the
// admission record", and issue 40 point 4 asks for a kit that checks
// compare-and-swap "with a second writer" against ground truth. Every
// call Contract makes is sequential, so an AdmissionStore whose version
// check is not atomic with its write passes. Ground truth, from the
// store's own record: two reconcilers that read one record (empty, limit
// 1) and each admit their Machine at once are both accepted, so both
// remediations proceed (two hosts off with a storm-guard limit of one),
// and the record then lists only one of them.
func TestReview40ad_ContractPassesAdmissionsThatLoseCASUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	s := &review40adRacyAdmissions{Cluster: fake.NewCluster()}
	read, err := s.GetAdmissions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var barrier, wg sync.WaitGroup
	barrier.Add(2)
	firstWrote := make(chan struct{})
	s.between = func(a remediation.Admissions) {
		barrier.Done()
		barrier.Wait() // both compared their version
		if a.Machines[0] == "s2" {
			<-firstWrote
		}
	}
	errs := make([]error, 2)
	for i, m := range []string{"s1", "s2"} {
		a := read
		a.Machines = []string{m}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m == "s1" {
				defer close(firstWrote)
			}
			errs[i] = s.PutAdmissions(ctx, a)
		}()
	}
	wg.Wait()
	s.between = nil
	after, _ := s.Cluster.GetAdmissions(ctx)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("setup: one admission was refused: %v", errs)
	}
	t.Logf("ground truth: two admissions with version %s at once, both accepted (%v); the record now admits %v", read.Version, errs, after.Machines)

	expectContractFails(t, func(ms []remediation.Machine, ns []remediation.Node) (remediationtest.Stores, error) {
		c := seedCluster(fake.NewCluster(), ms, ns)
		return remediationtest.Stores{Machines: c, Nodes: c.Nodes(), Admissions: &review40adRacyAdmissions{Cluster: c}, Mark: markOn(c)}, nil
	}, fmt.Sprintf("Contract passed an AdmissionStore whose compare-and-swap is not atomic with its write (ground truth: two concurrent admissions with version %s both accepted, the record then admits %v only: two hosts off under a limit of one): the kit never writes the record from two reconcilers at once", read.Version, after.Machines))
}
