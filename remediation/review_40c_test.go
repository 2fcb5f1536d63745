package remediation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// slowListRecords is a RecordStore without Watch (the shape of an
// operator's inventory behind an API) whose List of the whole fleet takes
// listTakes (a large inventory), while a Get of one record is fast.
type slowListRecords struct {
	rs        *fake.Records
	listTakes time.Duration
}

func (s slowListRecords) Get(ctx context.Context, name string) (remediation.Record, error) {
	return s.rs.Get(ctx, name)
}

func (s slowListRecords) List(ctx context.Context) ([]remediation.Record, error) {
	select {
	case <-time.After(s.listTakes):
		return s.rs.List(ctx)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s slowListRecords) Update(ctx context.Context, r remediation.Record) (remediation.Record, error) {
	return s.rs.Update(ctx, r)
}

// TestReview40c_PollerDeafWhenListSlowerThanInterval: Loop's doc says a
// Machine over a store without Watch is woken "within
// Config.PollInterval: the Loop lists Machines (one MachineStore.List per
// interval ...) and wakes those whose Version changed". The shared poller
// bounds each List by the interval and "a listing that fails wakes
// nothing": once listing the fleet takes longer than PollInterval (a
// large inventory, or a short PollInterval), every listing times out and
// no Machine is ever woken by the poller again, however long it waits;
// the per-Machine Get it replaced (fast whatever the fleet size) woke it
// within an interval. Here the List takes 3 intervals, the Get is
// instant; the Machine is marked unhealthy and is not woken in 2 s (40
// intervals).
func TestReview40c_PollerDeafWhenListSlowerThanInterval(t *testing.T) {
	const every = 50 * time.Millisecond
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(slowListRecords{rs: inv, listTakes: 3 * every})
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes,
		Config: remediation.Config{PollInterval: every}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := r.Loop(nil).Watch(ctx, "db-1")
	require.NoError(t, err)
	time.Sleep(2 * every)

	inv.Set("db-1", func(r *remediation.Record) { r.Ready = false }) // unhealthy
	select {
	case _, ok := <-ch:
		require.True(t, ok, "the watch closed")
	case <-time.After(2 * time.Second):
		t.Fatalf("db-1 changed (now unhealthy) but was not woken in 2 s at PollInterval %v: each List of the fleet takes %v, longer than the interval that bounds it, so every listing fails and wakes nothing, for ever", every, 3*every)
	}
}

// noWatchHosts is a host store of the reboot controller that has a Watch
// method but cannot watch in this configuration, as kube.RebootHosts
// without Informers (Watch returns kube.ErrNoWatch: "the reboot Client
// then polls").
type noWatchHosts struct{ *fake.RebootHosts }

func (noWatchHosts) Watch(context.Context, string) (<-chan struct{}, error) {
	return nil, errors.New("no informers to watch hosts with")
}

// pollOnlyRecords is a RecordStore without Watch (the Loop must poll it).
type pollOnlyRecords struct{ rs *fake.Records }

func (s pollOnlyRecords) Get(ctx context.Context, name string) (remediation.Record, error) {
	return s.rs.Get(ctx, name)
}
func (s pollOnlyRecords) List(ctx context.Context) ([]remediation.Record, error) {
	return s.rs.List(ctx)
}
func (s pollOnlyRecords) Update(ctx context.Context, r remediation.Record) (remediation.Record, error) {
	return s.rs.Update(ctx, r)
}

// TestReview40c_HostStoreThatCannotWatchDeafensMachine: Loop's doc: a
// Machine is woken "within Config.PollInterval" when its record changes
// over a store without Watch; its host's watch is an extra, for "a
// *RebootHosts over a store that can watch". A host store whose Watch
// says it cannot watch in this configuration (kube.RebootHosts without
// Informers, a supported setup: "the reboot Client then polls"; the kits
// skip their watch checks for it) fails the whole merged watch
// (watchWithHost returns the host watch's error), so the Machine's own
// poll is never set up: the Runner retries the watch for ever, and an
// unhealthy Machine waits for the next Resync instead of PollInterval.
func TestReview40c_HostStoreThatCannotWatchDeafensMachine(t *testing.T) {
	const every = 50 * time.Millisecond
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(pollOnlyRecords{inv})
	rh := &remediation.RebootAPIHosts{Hosts: noWatchHosts{fake.NewRebootHosts(reboot.Host{Name: "bmh-1", Online: true})},
		Now: time.Now, HostOf: func(context.Context, string) (string, error) { return "bmh-1", nil }}
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes, Hosts: rh,
		Config: remediation.Config{PollInterval: every}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := r.Loop(nil).Watch(ctx, "db-1")
	require.NoError(t, err, "Loop's Watch of db-1 fails because its host store cannot watch: the Machine's own poll is not set up either (the Runner retries it for ever)")
	time.Sleep(2 * every)
	inv.Set("db-1", func(r *remediation.Record) { r.Ready = false })
	woken(t, ch, "db-1 marked unhealthy")
}

// watchErrRecords is a RecordStore with a Watch that cannot watch in
// this configuration (the kits skip their watch checks for it: "A store
// that cannot watch in this configuration says so; the Runner then
// polls").
type watchErrRecords struct{ pollOnlyRecords }

func (watchErrRecords) Watch(context.Context, string) (<-chan struct{}, error) {
	return nil, errors.New("cannot watch in this configuration")
}

// TestReview40c_MachineWatcherThatCannotWatchIsNeverPolled: the kits
// (internal/watchcheck) accept a store whose Watch fails, saying "the
// Runner then polls"; Loop polls only a MachineStore that is not a
// MachineWatcher: over one whose Watch fails it returns the error, the
// Runner retries the watch for ever, and a Machine marked unhealthy waits
// for the next Resync, not PollInterval (the reboot Client does fall back
// to polling when Watch fails).
func TestReview40c_MachineWatcherThatCannotWatchIsNeverPolled(t *testing.T) {
	const every = 50 * time.Millisecond
	inv := fake.NewRecords(remediation.Record{Name: "db-1", Group: "db", Ready: true})
	machines, nodes := remediation.Records(watchErrRecords{pollOnlyRecords{inv}})
	r := &remediation.Reconciler{Machines: machines, Nodes: nodes,
		Config: remediation.Config{PollInterval: every}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := r.Loop(nil).Watch(ctx, "db-1")
	require.NoError(t, err, "Loop's Watch fails with the store's 'cannot watch' and does not poll instead (the kit said the Runner then polls)")
	time.Sleep(2 * every)
	inv.Set("db-1", func(r *remediation.Record) { r.Ready = false })
	woken(t, ch, "db-1 marked unhealthy")
}
