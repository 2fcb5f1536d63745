package remediation_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// admissionsFailingFirst fails its first GetAdmissions (the store not
// answering yet as the process starts).
type admissionsFailingFirst struct {
	*fake.Cluster
	calls atomic.Int32
}

func (a *admissionsFailingFirst) GetAdmissions(ctx context.Context) (remediation.Admissions, error) {
	if a.calls.Add(1) == 1 {
		return remediation.Admissions{}, errors.New("admissions store not answering yet")
	}
	return a.Cluster.GetAdmissions(ctx)
}

// TestLoopRetriesFailedFirstListing (review 40aa,
// reboot/TestReview40aa_FailedFirstListingStallsUntilResync, for
// remediation): the Loop's listing reads the admissions too; when that
// read fails at start, the listing fails, and the Machines it would list
// must be reconciled soon after the store answers, not at the next Resync
// (an hour here).
func TestLoopRetriesFailedFirstListing(t *testing.T) {
	t.Parallel()
	cluster := fake.NewCluster()
	cluster.AddMachine(remediation.Machine{Name: "m0", UID: "uid-m0", NodeName: "n0"})
	cluster.PutNode(remediation.Node{Name: "n0", Ready: true})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h0", Online: true})
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	adm := &admissionsFailingFirst{Cluster: cluster}
	rem := &remediation.Reconciler{Machines: cluster, Nodes: cluster.Nodes(), Admissions: adm, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
			Power:  func(string) (power.Controller, error) { return hw, nil },
			HostOf: func(context.Context, string) (string, error) { return "h0", nil }},
		Config: remediation.Config{PollInterval: time.Hour}}
	loop := rem.Loop(func(context.Context) ([]string, error) { return []string{"m0"}, nil })
	var passes atomic.Int32
	pass := loop.Reconcile
	loop.Reconcile = func(ctx context.Context, name string) (reboot.Next, error) {
		passes.Add(1)
		return pass(ctx, name)
	}
	r := &reboot.Runner{Loops: []reboot.Loop{loop}, Resync: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for passes.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("machine m0 not reconciled within 10 s of a failed first listing (admissions reads: %d)", adm.calls.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.GreaterOrEqual(t, adm.calls.Load(), int32(2), "the listing was tried again")
}
