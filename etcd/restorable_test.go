package etcd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// restorable is an etcd process whose data directory a test backs up and
// restores under running clients (revisions reused after the restore).
type restorable struct {
	t      *testing.T
	e      *etcdProcess
	backup string
}

// newRestorable starts an etcd process (REBOOTKIT_ETCD_BIN, else the test
// is skipped), killed at the test's end; its output is logged if the test
// failed.
func newRestorable(t *testing.T) *restorable {
	bin := os.Getenv("REBOOTKIT_ETCD_BIN")
	if bin == "" {
		t.Skip("set REBOOTKIT_ETCD_BIN")
	}
	tmp := t.TempDir()
	e := &etcdProcess{t: t, bin: bin, dir: filepath.Join(tmp, "data"), client: freePort(t), peer: freePort(t)}
	e.start()
	t.Cleanup(func() {
		e.kill()
		if t.Failed() {
			t.Logf("etcd output:\n%s", e.out.String())
		}
	})
	return &restorable{t: t, e: e, backup: filepath.Join(tmp, "backup")}
}

// dial returns a client of the process, closed at the test's end.
func (r *restorable) dial() *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", r.e.client)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(r.t, err)
	r.t.Cleanup(func() { cli.Close() })
	return cli
}

// waitUp waits until cli reads again (at most about 10 s).
func (r *restorable) waitUp(ctx context.Context, cli *clientv3.Client) {
	for i := 0; ; i++ {
		c, cc := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(c, "ping")
		cc()
		if err == nil {
			return
		}
		require.Less(r.t, i, 100, "etcd did not come back: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
}

// saveBackup stops the process, copies its data directory and starts it
// again.
func (r *restorable) saveBackup() {
	r.e.kill()
	require.NoError(r.t, exec.Command("cp", "-a", r.e.dir, r.backup).Run())
	r.e.start()
}

// restoreBackup stops the process, replaces its data directory with the
// backup and starts it again.
func (r *restorable) restoreBackup() {
	r.e.kill()
	require.NoError(r.t, os.RemoveAll(r.e.dir))
	require.NoError(r.t, exec.Command("cp", "-a", r.backup, r.e.dir).Run())
	r.e.start()
}
