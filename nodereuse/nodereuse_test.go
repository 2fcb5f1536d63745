package nodereuse_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/nodereuse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func avail(name string, labels ...string) nodereuse.Host {
	h := nodereuse.Host{Name: name, State: nodereuse.StateAvailable, Labels: map[string]string{}}
	for i := 0; i+1 < len(labels); i += 2 {
		h.Labels[labels[i]] = labels[i+1]
	}
	return h
}

func reserved(name, pool string) nodereuse.Host { return avail(name, nodereuse.Label, pool) }

func TestLabelValues(t *testing.T) {
	tests := []struct {
		pool    nodereuse.Pool
		want    string
		wantErr bool
	}{
		{nodereuse.MachineDeployment("pool1"), "md-pool1", false},
		{nodereuse.ControlPlane("pool1"), "kcp-pool1", false},
		{nodereuse.ControlPlane("a.b_c-d"), "kcp-a.b_c-d", false},
		{nodereuse.MachineDeployment(""), "", true},
		{nodereuse.MachineDeployment("bad/name"), "", true},
		{nodereuse.MachineDeployment("trailing-"), "", true},
		{nodereuse.MachineDeployment(strings.Repeat("x", 60)), "md-" + strings.Repeat("x", 60), false},
		{nodereuse.MachineDeployment(strings.Repeat("x", 61)), "", true},
		{nodereuse.Pool{Name: "x"}, "", true},
	}
	for i, tt := range tests {
		got, err := tt.pool.LabelValue()
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("step %d: %+v: got %q, %v", i, tt.pool, got, err)
		}
		if err != nil {
			assert.ErrorIs(t, err, nodereuse.ErrInvalidPool)
			continue
		}
		back, err := nodereuse.ParsePool(got)
		require.NoError(t, err)
		assert.Equal(t, tt.pool, back)
	}
	for _, v := range []string{"", "pool1", "xx-pool1", "md-", "-md", "kcp-a/b"} {
		_, err := nodereuse.ParsePool(v)
		assert.ErrorIs(t, err, nodereuse.ErrInvalidPool, v)
	}
}

func TestDeprovisionLabels(t *testing.T) {
	h := avail("h1")
	d, err := nodereuse.Deprovision(h, nodereuse.MachineDeployment("pool1"), true)
	require.NoError(t, err)
	assert.Equal(t, nodereuse.LabelDecision{SetLabel: true, Value: "md-pool1", Reason: d.Reason}, d)
	d, _ = nodereuse.Deprovision(reserved("h1", "md-pool1"), nodereuse.MachineDeployment("pool1"), true)
	assert.False(t, d.SetLabel)
	d, _ = nodereuse.Deprovision(h, nodereuse.MachineDeployment("pool2"), false)
	assert.False(t, d.SetLabel, "story 3: reuse disabled keeps the current flow")
	_, err = nodereuse.Deprovision(h, nodereuse.MachineDeployment(""), true)
	assert.ErrorIs(t, err, nodereuse.ErrInvalidPool)
}

// "What if there are two parallel KCP/MD experiencing upgrade?" md-pool1
// (reuse on) finds its labelled hosts; md-pool2 (reuse off, no labels)
// falls back to random hosts and never takes pool1's.
func TestTwoParallelPools(t *testing.T) {
	hosts := []nodereuse.Host{
		reserved("a", "md-pool1"), reserved("b", "md-pool1"),
		avail("c"), avail("d"), avail("e"),
	}
	p1, err := nodereuse.SelectN(hosts, nodereuse.Request{Pool: nodereuse.MachineDeployment("pool1"), Seed: 1}, 2)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "b"}, []string{p1[0].Host, p1[1].Host})
	assert.True(t, p1[0].RemoveLabel && p1[1].RemoveLabel)

	p2, err := nodereuse.SelectN(hosts, nodereuse.Request{Pool: nodereuse.MachineDeployment("pool2"), Seed: 1}, 3)
	require.NoError(t, err)
	for _, s := range p2 {
		assert.Equal(t, nodereuse.OutcomePick, s.Outcome)
		assert.Contains(t, []string{"c", "d", "e"}, s.Host, "pool2 never takes a host reserved for pool1")
		assert.False(t, s.RemoveLabel)
	}
}

// "What if we found N-1 hosts with label, while we expect N hosts?" Then
// we select any other host for the last machine.
func TestNMinusOneHostsFound(t *testing.T) {
	hosts := []nodereuse.Host{reserved("a", "kcp-cp"), reserved("b", "kcp-cp"), avail("c"), avail("d")}
	sel, err := nodereuse.SelectN(hosts, nodereuse.Request{Pool: nodereuse.ControlPlane("cp"), Seed: 7}, 3)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "b"}, []string{sel[0].Host, sel[1].Host})
	assert.Equal(t, nodereuse.OutcomePick, sel[2].Outcome)
	assert.Contains(t, []string{"c", "d"}, sel[2].Host)
	assert.False(t, sel[2].RemoveLabel)
}

// "What if user changes from node reuse to no node reuse in the middle of
// upgrade?" Selection does not even take the flag: labelled hosts always
// win.
func TestReuseDisabledMidUpgrade(t *testing.T) {
	hosts := []nodereuse.Host{avail("free-1"), reserved("mine", "md-pool1"), avail("free-2")}
	for seed := uint64(0); seed < 50; seed++ {
		s, err := nodereuse.Select(hosts, nodereuse.Request{Pool: nodereuse.MachineDeployment("pool1"), Seed: seed})
		require.NoError(t, err)
		assert.Equal(t, "mine", s.Host)
	}
	// At deprovisioning with reuse now off, no new label is set.
	d, _ := nodereuse.Deprovision(avail("x"), nodereuse.MachineDeployment("pool1"), false)
	assert.False(t, d.SetLabel)
}

// "If host is found in any other state than Available: requeue until that
// host becomes Available" — never a fallback.
func TestReservedNotAvailableRequeues(t *testing.T) {
	h := reserved("mine", "md-pool1")
	h.State = nodereuse.StateDeprovisioning
	h.ConsumerRef = "old-machine"
	hosts := []nodereuse.Host{h, avail("free")}
	s, err := nodereuse.Select(hosts, nodereuse.Request{Pool: nodereuse.MachineDeployment("pool1")})
	require.NoError(t, err)
	assert.Equal(t, nodereuse.OutcomeRequeue, s.Outcome)
	assert.Positive(t, s.RequeueAfter)

	// "If no host is found, while it should be: fall back."
	s, _ = nodereuse.Select(hosts[1:], nodereuse.Request{Pool: nodereuse.MachineDeployment("pool1")})
	assert.Equal(t, nodereuse.Selection{Outcome: nodereuse.OutcomePick, Host: "free", Reason: s.Reason}, s)
}

func TestFilters(t *testing.T) {
	mk := func(name string, f func(h *nodereuse.Host)) nodereuse.Host {
		h := avail(name, "rack", "r1")
		f(&h)
		return h
	}
	hosts := []nodereuse.Host{
		mk("claimed", func(h *nodereuse.Host) { h.ConsumerRef = "m0" }),
		mk("deleting", func(h *nodereuse.Host) { h.Deleting = true }),
		mk("error", func(h *nodereuse.Host) { h.Error = true }),
		mk("paused", func(h *nodereuse.Host) { h.Paused = true }),
		mk("unhealthy", func(h *nodereuse.Host) { h.Unhealthy = true }),
		mk("provisioning", func(h *nodereuse.Host) { h.State = nodereuse.StateProvisioning }),
		mk("other-rack", func(h *nodereuse.Host) { h.Labels["rack"] = "r2" }),
		mk("taken-in-pass", func(*nodereuse.Host) {}),
		mk("ok-fd2", func(h *nodereuse.Host) { h.FailureDomain = "fd2" }),
		mk("ok-fd1", func(h *nodereuse.Host) { h.FailureDomain = "fd1" }),
	}
	req := nodereuse.Request{
		Pool:          nodereuse.MachineDeployment("w"),
		Selector:      nodereuse.Selector{MatchLabels: map[string]string{"rack": "r1"}},
		Claimed:       map[string]bool{"taken-in-pass": true},
		FailureDomain: "fd1",
	}
	for seed := uint64(0); seed < 20; seed++ {
		req.Seed = seed
		s, err := nodereuse.Select(hosts, req)
		require.NoError(t, err)
		assert.Equal(t, "ok-fd1", s.Host, "the failure domain is preferred")
	}
	req.FailureDomain = "fd3"
	s, _ := nodereuse.Select(hosts, req)
	assert.Contains(t, []string{"ok-fd1", "ok-fd2"}, s.Host, "a preference, not a requirement")

	exprs := nodereuse.Selector{MatchExpressions: []nodereuse.Requirement{
		{Key: "rack", Operator: nodereuse.OpIn, Values: []string{"r2", "r3"}},
		{Key: "gpu", Operator: nodereuse.OpDoesNotExist},
	}}
	req.Selector = exprs
	s, _ = nodereuse.Select(hosts, req)
	assert.Equal(t, "other-rack", s.Host)
	req.Selector = nodereuse.Selector{MatchExpressions: []nodereuse.Requirement{{Key: "rack", Operator: "Bogus"}}}
	s, _ = nodereuse.Select(hosts, req)
	assert.Equal(t, nodereuse.OutcomeNoHost, s.Outcome)
}

func TestSelectDoesNotDependOnOrder(t *testing.T) {
	var hosts []nodereuse.Host
	for i := 0; i < 50; i++ {
		hosts = append(hosts, avail(fmt.Sprintf("h%02d", i)))
	}
	req := nodereuse.Request{Pool: nodereuse.MachineDeployment("w"), Seed: 42}
	a, _ := nodereuse.Select(hosts, req)
	rev := make([]nodereuse.Host, len(hosts))
	for i := range hosts {
		rev[len(hosts)-1-i] = hosts[i]
	}
	b, _ := nodereuse.Select(rev, req)
	if d := cmp.Diff(a, b); d != "" {
		t.Fatal(d)
	}
	seen := map[string]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		req.Seed = seed
		s, _ := nodereuse.Select(hosts, req)
		seen[s.Host] = true
	}
	assert.Greater(t, len(seen), 30, "the seed spreads the choice over the free hosts")
}

func TestClaimRetriesOnConflict(t *testing.T) {
	ctx := context.Background()
	store := fake.NewReuseHosts(reserved("mine", "md-w"), avail("free"))
	req := nodereuse.Request{Pool: nodereuse.MachineDeployment("w")}
	s, err := nodereuse.Claim(ctx, store, req, "m1", 0)
	require.NoError(t, err)
	assert.Equal(t, "mine", s.Host)
	hosts, _ := store.List(ctx)
	assert.Equal(t, "mine", hosts[1].Name)
	assert.Equal(t, "m1", hosts[1].ConsumerRef)
	assert.NotContains(t, hosts[1].Labels, nodereuse.Label, "label removed in the claim")

	// A stale claim fails with ErrConflict.
	err = store.Claim(ctx, "free", "0", "m2", false)
	assert.True(t, errors.Is(err, nodereuse.ErrConflict))
	s, err = nodereuse.Claim(ctx, store, req, "m2", 0)
	require.NoError(t, err)
	assert.Equal(t, "free", s.Host)
	s, err = nodereuse.Claim(ctx, store, req, "m3", 0)
	require.NoError(t, err)
	assert.Equal(t, nodereuse.OutcomeNoHost, s.Outcome)
}
