package etcd_test

import (
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebootkit/rebootkit/etcd"
	"github.com/rebootkit/rebootkit/etcd/etcdtest"
	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// Two executors on one etcd: the first leads; when it resigns, the second
// takes over, and the first one's store can no longer write.
func Example() {
	dir, _ := os.MkdirTemp("", "etcd-example")
	defer os.RemoveAll(dir)
	srv, endpoint, err := etcdtest.Start(dir, true)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	defer cli.Close()
	ctx := context.Background()

	clk := fake.NewClock(time.Time{})
	fleet := fake.NewFleet(clk.Now, "", fake.FleetServer{UUID: "a", Hostname: "a"}, fake.FleetServer{UUID: "b", Hostname: "b"})
	p, _, _ := plan.Create(fleet.Servers(), plan.CreateOptions{UUID: "p", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(1)})
	p, _ = plan.Run(p)
	_ = etcd.NewStore(cli, "/example/").Create(ctx, p)

	one := etcd.Candidate{Client: cli, Prefix: "/example/", ID: "one"}
	two := etcd.Candidate{Client: cli, Prefix: "/example/", ID: "two"}
	s1, _ := one.NewSession(ctx)
	l1, _ := one.Campaign(ctx, s1)
	fmt.Println("pass by one:", l1.Pass(ctx, fleet, plan.Config{}, clk.Now, nil))
	_ = l1.Resign(ctx)
	s2, _ := two.NewSession(ctx)
	defer s2.Close()
	l2, _ := two.Campaign(ctx, s2)
	fmt.Println("two leads with a higher token:", l2.Rev > l1.Rev)
	clk.Advance(time.Hour)
	fmt.Println("pass by one after it resigned:", l1.Pass(ctx, fleet, plan.Config{}, clk.Now, nil) != nil)
	fmt.Println("pass by two:", l2.Pass(ctx, fleet, plan.Config{}, clk.Now, nil))
	// Output:
	// pass by one: <nil>
	// two leads with a higher token: true
	// pass by one after it resigned: true
	// pass by two: <nil>
}
