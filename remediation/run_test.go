package remediation_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestRunnerRemediatesWithRebootLoop (issue 40, point 2): one
// reboot.Runner runs the reboot and the remediation reconcilers together,
// in real time, over the fakes; a failed node is remediated to the end
// (node deleted while the host is off, host on, node back, Done) with one
// power cycle, the remediation woken by its host's record changes (its
// PollInterval is an hour: only the watch drives it between the health
// checker's and the node's events).
func TestRunnerRemediatesWithRebootLoop(t *testing.T) {
	t.Parallel()
	cluster := fake.NewCluster()
	cluster.AddMachine(remediation.Machine{Name: "m0", UID: "uid-m0", NodeName: "n0"})
	cluster.PutNode(remediation.Node{Name: "n0", Ready: true})
	hosts := fake.NewRebootHosts(reboot.Host{Name: "h0", Online: true})
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	pc := func(string) (power.Controller, error) { return hw, nil }
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: pc,
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	rem := &remediation.Reconciler{Machines: cluster, Nodes: cluster.Nodes(), Admissions: cluster, Now: time.Now,
		Hosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, Power: pc, StaleReads: 100 * time.Millisecond,
			HostOf: func(context.Context, string) (string, error) { return "h0", nil }},
		Config: remediation.Config{PollInterval: time.Hour, Timeout: time.Minute}}
	// No short Resync: the two loops must wake each other through the
	// store's watch alone (1 run in about 16 under -race stalled 30 s
	// when a key's first pass could run before its watch was in place;
	// reboot/TestRunnerWakesAfterWatchStarts).
	r := &reboot.Runner{Loops: []reboot.Loop{
		rb.Loop(func(context.Context) ([]string, error) { return []string{"h0"}, nil }),
		rem.Loop(func(context.Context) ([]string, error) { return []string{"m0"}, nil }),
	}, Resync: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	// The node fails; a kubelet registers it again once the host is on.
	cluster.SetNodeReady("n0", false)
	cluster.SetNeedsRemediation("m0", true)
	require.NoError(t, r.Add("remediation", "m0")) // the health checker's event
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "not remediated; host truth %v, deleted %v", hw.Truth(), cluster.DeletedNodes())
		if slices.Contains(cluster.DeletedNodes(), "n0") && !cluster.Node("n0").Exists {
			if hw.HardwareOn() {
				cluster.PutNode(remediation.Node{Name: "n0", Ready: true})
				require.NoError(t, r.Add("remediation", "m0")) // the node's event
			}
		}
		rec, err := cluster.Get(ctx, "m0")
		require.NoError(t, err)
		if rec.State.Phase == remediation.PhaseDone {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	// Cycles counts completed power-ons: the last one may still be under
	// way (the fake's lag) when the machine's state says done.
	assert.Eventually(t, func() bool { return hw.Cycles() >= 1 }, 5*time.Second, 10*time.Millisecond, "truth %v", hw.Truth())
	assert.Equal(t, 1, hw.Cycles(), "one power cycle (truth %v)", hw.Truth())
	assert.True(t, hw.HardwareOn())
	assert.Contains(t, cluster.DeletedNodes(), "n0")
}
