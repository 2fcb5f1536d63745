package plan

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestEncodeViewWritesTheViewAsPut: a view encoded ahead (EncodeView) and
// changed again before PutView is written as put, not as encoded; a
// record changed under it (not by a write of the plan) is still refused
// (ErrCorrupt), never written over. Ground truth: the stored records.
func TestEncodeViewWritesTheViewAsPut(t *testing.T) {
	ctx := context.Background()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Create(ctx, boltPlan(t, "w", 4)))
	v, err := s.GetView(ctx, "w")
	require.NoError(t, err)
	v.Reboots[0].Error = "first"
	e, err := EncodeView(v)
	require.NoError(t, err)
	require.NotNil(t, e.base.enc[0])
	assert.Nil(t, v.base.enc, "EncodeView does not modify its view")
	e.Reboots[0].Error = "second"
	require.NoError(t, s.PutView(ctx, e))
	p, err := s.Get(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, "second", p.Reboots[0].Error)

	v, err = s.GetView(ctx, "w")
	require.NoError(t, err)
	v.Reboots[0].Error = "third"
	e, err = EncodeView(v)
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte("w"))
		var r0, r1 record
		require.NoError(t, json.Unmarshal(b.Get(rebootKey(0)), &r0))
		require.NoError(t, json.Unmarshal(b.Get(rebootKey(1)), &r1))
		r0.Reboot, r1.Reboot = r1.Reboot, r0.Reboot
		a, _ := json.Marshal(r0)
		c, _ := json.Marshal(r1)
		require.NoError(t, b.Put(rebootKey(0), a))
		return b.Put(rebootKey(1), c)
	}))
	assert.ErrorIs(t, s.PutView(ctx, e), ErrCorrupt, "a reboot encoded ahead is never written over another server's record")
}
