// Package etcdtest starts an embedded etcd (go.etcd.io/etcd/server/v3/embed)
// for tests and examples: one member on loopback ports the kernel picks,
// short ticks, ready in well under a second. It pulls the etcd server (and
// grpc, OpenTelemetry) into the build of whatever imports it: keep it out
// of production code.
package etcdtest

import (
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Start starts an etcd member with its data in dir and returns it and its
// client endpoint. Close the returned server when done. With fast, writes
// are not fsynced (tests only).
func Start(dir string, fast bool) (*embed.Etcd, string, error) {
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
	cfg.UnsafeNoFsync = fast
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("etcdtest: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, e.Clients[0].Addr().String(), nil
	case <-time.After(10 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("etcdtest: not ready in 10 s")
	}
}
