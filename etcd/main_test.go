package etcd

import (
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebootkit/rebootkit/etcd/etcdtest"
)

// endpoint is the embedded etcd every test of the package shares (each
// uses its own key prefix).
var endpoint string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rebootkit-etcd")
	if err != nil {
		panic(err)
	}
	e, ep, err := etcdtest.Start(dir, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded etcd:", err)
		os.Exit(1)
	}
	endpoint = ep
	code := m.Run()
	e.Close()
	os.RemoveAll(dir)
	os.Exit(code)
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
