package etcd

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebootkit/rebootkit/etcd/etcdtest"
)

// endpoint is the etcd every test of the package shares (each uses its
// own key prefix): an embedded one, or with REBOOTKIT_BENCH_ETCD=process
// an etcd server process (REBOOTKIT_ETCD_BIN) that fsyncs as in
// production, for the benchmarks' numbers (e.g. BenchmarkPass).
var endpoint string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rebootkit-etcd")
	if err != nil {
		panic(err)
	}
	stop := func() {}
	if os.Getenv("REBOOTKIT_BENCH_ETCD") == "process" {
		endpoint, stop, err = startProcess(os.Getenv("REBOOTKIT_ETCD_BIN"), dir)
	} else {
		e, ep, serr := etcdtest.Start(dir, true)
		if serr == nil {
			endpoint, stop = ep, e.Close
		}
		err = serr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startProcess starts an etcd server process of binary bin with its data
// under dir, and returns its client endpoint once it answers.
func startProcess(bin, dir string) (string, func(), error) {
	if bin == "" {
		return "", nil, fmt.Errorf("REBOOTKIT_BENCH_ETCD=process needs REBOOTKIT_ETCD_BIN")
	}
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	c, p := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cmd := exec.Command(bin, "--name", "bench", "--data-dir", filepath.Join(dir, "data"), "--listen-client-urls", c,
		"--advertise-client-urls", c, "--listen-peer-urls", p, "--initial-advertise-peer-urls", p, "--initial-cluster", "bench="+p,
		"--quota-backend-bytes", fmt.Sprint(8<<30), "--auto-compaction-mode", "revision", "--auto-compaction-retention", "1000",
		"--log-level", "error")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }
	ep := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		stop()
		return "", nil, err
	}
	defer cli.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "ready")
		cancel()
		if err == nil {
			return ep, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("etcd process not ready: %w", err)
		}
	}
}

func newClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
