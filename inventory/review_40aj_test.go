package inventory

import (
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/rebootkit/rebootkit/internal/endedctx"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// openBoltHosts opens a state file with the hosts bucket, holding h.
func openBoltHosts(t testing.TB, h reboot.Host) *boltHosts {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketHosts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := &boltHosts{db: db}
	if _, err := s.modify(h.Name, func(r *hostRecord) error {
		r.Annotations, r.Status = h.Annotations, h.Status
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReview40aj_BoltHostsWritesWithEndedContext: reboot.HostStore.Update
// "writes nothing once ctx has ended: it checks ctx.Err() just before it
// writes" (reboot/reconciler.go), and issue 40 point 4 asks that the
// project's own stores (fakes, bbolt, etcd, kube) run through the
// published kits in CI. The inventory's bbolt HostStore (boltHosts,
// inventory/host.go:286) takes `_ context.Context` and writes with any
// context, and no test runs it through reboottest. Ground truth: the
// record read back from the state file after an Update with each ended
// context of the kit.
func TestReview40aj_BoltHostsWritesWithEndedContext(t *testing.T) {
	bg := context.Background()
	s := openBoltHosts(t, reboot.Host{Name: "h"})
	for _, e := range endedctx.From(bg) {
		cur, err := s.Get(bg, "h")
		if err != nil {
			t.Fatal(err)
		}
		late := cur
		late.Annotations = map[string]string{reboot.AnnotationPrefix + "late": ""}
		_, uerr := s.Update(e.Ctx, late)
		got, _ := s.Get(bg, "h")
		if uerr == nil || got.Version != cur.Version {
			t.Errorf("boltHosts.Update with %s: err %v, version %q (was %q), annotations %v: the write landed", e.Name, uerr, got.Version, cur.Version, got.Annotations)
		}
	}
}

// TestReview40aj_BoltHostsConformance runs the published kit's Contract
// on the inventory's bbolt HostStore (issue 40 point 4: the project's own
// bbolt stores through the kits), with a second handle on the same open
// state file (bbolt admits one process).
func TestReview40aj_BoltHostsConformance(t *testing.T) {
	reboottest.Contract(t, func(h reboot.Host) (reboottest.Stores, error) {
		s := openBoltHosts(t, h)
		return reboottest.Stores{Hosts: s, Other: &boltHosts{db: s.db}}, nil
	})
}
