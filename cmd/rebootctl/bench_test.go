package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// BenchmarkStopLatency measures how long `rebootctl plan stop` takes while
// an executor runs a plan of 1,000 servers of which 300 do not answer
// (their health checks hang until the 5 s timeout; every BMC hangs): the
// executor holds the store's lock for one read or write at a time, never
// through Observe or the actions, so the stop is written within one store
// operation and the executor's pass in progress loses its compare-and-swap
// (issue 26, B8). ns/op is the stop command's latency; max-ns the worst.
//
//	go test ./cmd/rebootctl -run NONE -bench StopLatency -benchtime 20x
func BenchmarkStopLatency(b *testing.B) {
	dir := b.TempDir()
	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/dead") {
			hang(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer health.Close()
	bmc := httptest.NewServer(http.HandlerFunc(hang))
	defer bmc.Close()
	var inv strings.Builder
	fmt.Fprintf(&inv, "defaults:\n  bmc: {username: admin, password_env: BENCH_BMC_PASSWORD, redfish: %q}\nservers:\n", bmc.URL)
	for i := range 1000 {
		path := "ok"
		if i%10 < 3 {
			path = "dead"
		}
		fmt.Fprintf(&inv, "  - {uuid: %08d-0000-4000-8000-000000000000, hostname: s%d, platform: \"1\", bmc: {system: \"s%d\"}, health: {http: %q}}\n", i, i, i, health.URL+"/"+path)
	}
	invPath := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(invPath, []byte(inv.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	store := filepath.Join(dir, "plans.db")
	b.Setenv("BENCH_BMC_PASSWORD", "pw")
	ctl := func(ctx context.Context, args ...string) int {
		return run(ctx, append(args, "--store", store, "--inventory", invPath), io.Discard, io.Discard)
	}
	const uuid = "bench-stop"
	if code := ctl(context.Background(), "plan", "create", "--all", "-N", "400", "--target", "2", "--uuid", uuid, "-r"); code != 0 {
		b.Fatalf("create: exit %d", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- ctl(ctx, "executor", "--self", "none", "--interval", "100ms") }()
	defer func() { cancel(); <-done }()
	// Wait until the executor has jobs in flight.
	for deadline := time.Now().Add(time.Minute); ; {
		st, err := plan.OpenBolt(store)
		if err == nil {
			p, _ := st.Get(context.Background(), uuid)
			st.Close()
			if countStep(p, func(r plan.Reboot) bool { return r.Step == plan.StepJob }) > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("no job started")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var worst time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if code := ctl(context.Background(), "plan", "stop", uuid); code != 0 {
			b.Fatalf("stop: exit %d", code)
		}
		worst = max(worst, time.Since(t0))
		b.StopTimer()
		if st, err := plan.OpenBolt(store); err == nil {
			p, _ := st.Get(context.Background(), uuid)
			st.Close()
			if p.State != plan.StateStopped {
				b.Fatalf("plan %s after stop", p.State)
			}
		}
		if code := ctl(context.Background(), "plan", "run", uuid); code != 0 {
			b.Fatalf("run: exit %d", code)
		}
		time.Sleep(300 * time.Millisecond) // a few passes in between
		b.StartTimer()
	}
	b.StopTimer() // the executor's shutdown waits for hung calls: not part of a stop
	b.ReportMetric(float64(worst.Nanoseconds()), "max-ns")
}
