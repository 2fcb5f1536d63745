package plan

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestListHeadsReadsHeadersOnly (issue 38, point 15): ListHeads gives
// every plan's state and index without reading a reboot record, so an
// executor's pass does not read every reboot of every plan ever stored: a
// plan whose reboot record is garbage still lists (List refuses it).
func TestListHeadsReadsHeadersOnly(t *testing.T) {
	ctx := context.Background()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Create(ctx, boltPlan(t, "a", 3)))
	require.NoError(t, s.Create(ctx, boltPlan(t, "b", 2)))
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPlans).Bucket([]byte("b")).Put(rebootKey(1), []byte("{garbage"))
	}))
	_, err = s.List(ctx)
	assert.ErrorIs(t, err, ErrCorrupt, "List reads every reboot")
	heads, err := s.ListHeads(ctx)
	require.NoError(t, err, "ListHeads reads no reboot")
	require.Len(t, heads, 2)
	assert.Equal(t, "a", heads[0].UUID)
	assert.Empty(t, heads[0].Reboots)
	assert.Equal(t, 3, heads[0].Index.Total)
	assert.Equal(t, 2, heads[1].Index.Total)
	one, err := s.GetHead(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, one, heads[0], "as GetHead gives it")
}
