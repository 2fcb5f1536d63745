// Command ownstore is a fencer for an HA database written against
// rebootkit from its documentation alone, outside the rebootkit module: a
// host inventory of its own (store.go), the reboot controller run by
// reboot.Runner, fenced by an etcd leader election (etcd.Leadership.Guard),
// and a fencing client that asks for a host to be fenced before its
// database fails over. The power is simulated (fake.Power); use
// power/redfish or power/ipmi for real BMCs.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/etcd"
	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

func main() {
	endpoint := flag.String("etcd", "127.0.0.1:2379", "etcd endpoint for the leader election")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fence(ctx, *endpoint, "db-2", os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ownstore:", err)
		os.Exit(1)
	}
}

// fence runs the controller while it leads, fences host, and releases it.
func fence(ctx context.Context, endpoint, host string, out *os.File) error {
	inv := newInventory(reboot.Host{Name: "db-1", Online: true}, reboot.Host{Name: "db-2", Online: true})
	bmcs := map[string]*fake.Power{}
	for _, n := range []string{"db-1", "db-2"} {
		bmcs[n] = fake.NewPower(time.Now, fake.PowerConfig{Lag: 50 * time.Millisecond})
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	cand := etcd.Candidate{Client: cli, Prefix: "/fencer/", ID: "fencer-a", TTL: 5}
	session, err := cand.NewSession(ctx)
	if err != nil {
		return err
	}
	defer session.Close()
	lead, err := cand.Campaign(ctx, session)
	if err != nil {
		return err
	}

	rec := &reboot.Reconciler{Hosts: inv, Now: time.Now, Guard: lead.Guard(),
		Power:  func(name string) (power.Controller, error) { return bmcs[name], nil },
		Config: reboot.Config{StaleReads: 200 * time.Millisecond, Precision: time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(out, nil))}
	runner := &reboot.Runner{Loops: []reboot.Loop{rec.Loop(inv.names)}}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-lead.Done(): // leadership lost: stop acting
		case <-rctx.Done():
		}
		stop()
	}()
	go func() { _ = runner.Run(rctx) }()

	// Power and StaleReads (the reconciler's) let WaitUp check the host
	// reads on after the reboot, not only that the power-on was decided.
	client := &reboot.Client{Hosts: inv, Key: "db-failover", Now: time.Now,
		Power: rec.Power, StaleReads: rec.Config.StaleReads}
	ticket, err := client.Request(ctx, host, power.ModeHard)
	if err != nil {
		return err
	}
	if err := client.WaitFenced(ctx, ticket); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s fenced: the database may fail over\n", host)
	if err := client.Release(ctx, ticket); err != nil {
		return err
	}
	// WaitDone would return once the power-on is decided; WaitUp once the
	// host reads on after it (a reading that cannot echo the state before).
	if err := client.WaitUp(ctx, ticket); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s powered on again\n", host)
	return nil
}
