package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestSingleRecordRemediation (issue 40, point 6): an inventory where the
// machine and the node are one record (three methods) is remediated to
// the end through Records: fenced, out of service, powered on, back
// Ready, flags cleared, one power cycle, labels kept. Before, the same
// took MachineStore and NodeStore (eleven methods, two types).
func TestSingleRecordRemediation(t *testing.T) {
	t.Parallel()
	inv := fake.NewRecords() // a user's own inventory of single records
	inv.Set("db-1", func(r *remediation.Record) {
		*r = remediation.Record{Name: "db-1", Group: "db", Ready: true, Labels: map[string]string{"role": "primary"}}
	})
	inv.Set("db-2", func(r *remediation.Record) { *r = remediation.Record{Name: "db-2", Group: "db", Ready: true} })
	hosts := fake.NewRebootHosts(reboot.Host{Name: "db-1", Online: true}, reboot.Host{Name: "db-2", Online: true})
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	pc := func(string) (power.Controller, error) { return hw, nil }
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: pc,
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	machines, nodes := remediation.Records(inv)
	rem := &remediation.Reconciler{Machines: machines, Nodes: nodes, Admissions: fake.NewCluster(), Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, Power: pc, StaleReads: 100 * time.Millisecond,
			HostOf: func(_ context.Context, m string) (string, error) { return m, nil }},
		Limit:  remediation.MaxCount(1),
		Config: remediation.Config{OutOfService: true, PollInterval: 50 * time.Millisecond, Timeout: time.Minute}}
	names := func(context.Context) ([]string, error) { return []string{"db-1", "db-2"}, nil }
	// fake.Records is a RecordWatcher: db-1 marked unhealthy after its
	// first pass is woken by the change (the Runner's default Resync).
	r := &reboot.Runner{Loops: []reboot.Loop{rb.Loop(names), rem.Loop(names)}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()

	inv.Set("db-1", func(r *remediation.Record) { r.Unhealthy, r.Ready = true, false })
	sawOOS := false
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, err := inv.Get(ctx, "db-1")
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "not remediated: %+v, truth %v", rec, hw.Truth())
		if rec.OutOfService {
			sawOOS = true
		}
		if sawOOS && hw.HardwareOn() && !rec.Ready {
			inv.Set("db-1", func(r *remediation.Record) { r.Ready = true }) // the database is back
		}
		if rec.State.Phase == remediation.PhaseDone && !rec.Unhealthy && !rec.OutOfService {
			assert.Equal(t, "primary", rec.Labels["role"])
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	assert.True(t, sawOOS, "the record was never out of service")
	// Cycles counts completed power-ons: the last one may still be under
	// way (Lag) when the record says done.
	assert.Eventually(t, func() bool { return hw.Cycles() >= 1 }, 5*time.Second, 10*time.Millisecond, "truth %v", hw.Truth())
	assert.Equal(t, 1, hw.Cycles(), "truth %v", hw.Truth())
}
