package remediation_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// recordInventory is a user's own inventory of single records: all the
// store code the single-record adapter needs.
type recordInventory struct {
	mu sync.Mutex
	rs map[string]remediation.Record
	n  int
}

func (s *recordInventory) Get(_ context.Context, name string) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rs[name]
	if !ok {
		return r, fmt.Errorf("inventory %s: %w", name, remediation.ErrNotFound)
	}
	return r, nil
}

func (s *recordInventory) List(context.Context) ([]remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []remediation.Record
	for _, r := range s.rs {
		out = append(out, r)
	}
	return out, nil
}

func (s *recordInventory) Update(_ context.Context, r remediation.Record) (remediation.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rs[r.Name].Version != r.Version {
		return r, fmt.Errorf("inventory %s: %w", r.Name, remediation.ErrConflict)
	}
	s.n++
	r.Version = strconv.Itoa(s.n)
	s.rs[r.Name] = r
	return r, nil
}

func (s *recordInventory) set(name string, f func(r *remediation.Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rs[name]
	f(&r)
	s.n++
	r.Version = strconv.Itoa(s.n)
	s.rs[name] = r
}

// TestSingleRecordRemediation (issue 40, point 6): an inventory where the
// machine and the node are one record (three methods) is remediated to
// the end through Records: fenced, out of service, powered on, back
// Ready, flags cleared, one power cycle, labels kept. Before, the same
// took MachineStore and NodeStore (eleven methods, two types).
func TestSingleRecordRemediation(t *testing.T) {
	inv := &recordInventory{rs: map[string]remediation.Record{}}
	inv.set("db-1", func(r *remediation.Record) {
		*r = remediation.Record{Name: "db-1", Group: "db", Ready: true, Labels: map[string]string{"role": "primary"}}
	})
	inv.set("db-2", func(r *remediation.Record) { *r = remediation.Record{Name: "db-2", Group: "db", Ready: true} })
	hosts := fake.NewRebootHosts(reboot.Host{Name: "db-1", Online: true}, reboot.Host{Name: "db-2", Online: true})
	hw := fake.NewPower(time.Now, fake.PowerConfig{Lag: 20 * time.Millisecond})
	pc := func(string) (power.Controller, error) { return hw, nil }
	rb := &reboot.Reconciler{Hosts: hosts, Now: time.Now, Power: pc,
		Config: reboot.Config{StaleReads: 100 * time.Millisecond, Precision: time.Millisecond, QuickPoll: 20 * time.Millisecond}}
	machines, nodes := remediation.Records(inv)
	rem := &remediation.Reconciler{Machines: machines, Nodes: nodes, Admissions: fake.NewCluster(), Now: time.Now,
		Hosts: &remediation.RebootHosts{Hosts: hosts, Now: time.Now, Power: pc,
			HostOf: func(_ context.Context, m string) (string, error) { return m, nil }},
		Limit:  remediation.MaxCount(1),
		Config: remediation.Config{OutOfService: true, PollInterval: 50 * time.Millisecond, Timeout: time.Minute}}
	names := func(context.Context) ([]string, error) { return []string{"db-1", "db-2"}, nil }
	// The records have no Watch: a short resync stands in for the wake-up
	// a change of db-1 would give (else a first pass before it was marked
	// unhealthy leaves it to the ten-minute default: flaky under -race).
	r := &reboot.Runner{Loops: []reboot.Loop{rb.Loop(names), rem.Loop(names)}, Resync: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()

	inv.set("db-1", func(r *remediation.Record) { r.Unhealthy, r.Ready = true, false })
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
			inv.set("db-1", func(r *remediation.Record) { r.Ready = true }) // the database is back
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
