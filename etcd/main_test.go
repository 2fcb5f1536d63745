package etcd

import (
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// endpoint is the embedded etcd every test of the package shares (each
// uses its own key prefix).
var endpoint string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rebootkit-etcd")
	if err != nil {
		panic(err)
	}
	e, err := startEmbedded(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded etcd:", err)
		os.Exit(1)
	}
	endpoint = e.Clients[0].Addr().String()
	code := m.Run()
	e.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startEmbedded starts a one-member etcd on loopback ports chosen by the
// kernel, with short ticks (ready in well under a second).
func startEmbedded(dir string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	lc, _ := url.Parse("http://127.0.0.1:0")
	lp, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*lc}, []url.URL{*lc}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*lp}, []url.URL{*lp}
	cfg.InitialCluster = cfg.Name + "=" + lp.String()
	cfg.TickMs, cfg.ElectionMs = 10, 50
	cfg.UnsafeNoFsync = true // tests: speed over durability
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(10 * time.Second):
		e.Close()
		return nil, fmt.Errorf("not ready in 10 s")
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
