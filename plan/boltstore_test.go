package plan

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func boltPlan(t *testing.T, uuid string, n int) Plan {
	t.Helper()
	var fleet []Server
	for i := 0; i < n; i++ {
		fleet = append(fleet, Server{UUID: uuid + "-s" + string(rune('a'+i)), Hostname: "h" + string(rune('a'+i)), Platform: "1"})
	}
	p, _, err := Create(fleet, CreateOptions{UUID: uuid, Target: "2", Select: SelectAll, Concurrency: Count(1), CreatedAt: time.Unix(1, 0).UTC()})
	require.NoError(t, err)
	return p
}

func recordVersions(t *testing.T, s *BoltStore, uuid string) []uint64 {
	t.Helper()
	var out []uint64
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte(uuid))
		_, _, recs, err := load(b, uuid)
		for _, r := range recs {
			out = append(out, r.Version)
		}
		return err
	}))
	return out
}

func TestBoltStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	s, err := OpenBolt(path)
	require.NoError(t, err)
	defer s.Close()

	p := boltPlan(t, "p1", 3)
	require.NoError(t, s.Create(ctx, p))
	assert.ErrorIs(t, s.Create(ctx, p), ErrExists)
	q := boltPlan(t, "p2", 3)
	q.Reboots[0].ServerUUID = "p1-sa" // in p1, which is unfinished
	assert.ErrorIs(t, s.Create(ctx, q), ErrServerInPlan)

	got, err := s.Get(ctx, "p1")
	require.NoError(t, err)
	assert.Equal(t, "1", got.Version)
	p.Version = got.Version
	assert.Equal(t, p, got)

	// A pass that changes one reboot writes that record only.
	got.State = StateRunning
	got.Reboots[0].Step = StepWaitHead
	require.NoError(t, s.Put(ctx, got))
	assert.Equal(t, []uint64{2, 1, 1}, recordVersions(t, s, "p1"))
	// Compare-and-swap: the stale copy loses.
	got.Reboots[1].Step = StepWaitHead
	assert.ErrorIs(t, s.Put(ctx, got), ErrConflict)
	now, err := s.Get(ctx, "p1")
	require.NoError(t, err)
	assert.Equal(t, StepPending, now.Reboots[1].Step)
	assert.Equal(t, "2", now.Version)
	// Through Command, an operator's cancel is applied to the plan as it is.
	c, err := Command(ctx, s, "p1", Cancel)
	require.NoError(t, err)
	assert.Equal(t, StateCanceled, c.State)

	// A second process cannot open the file.
	start := time.Now()
	_, err = OpenBolt(path)
	assert.ErrorIs(t, err, ErrLocked)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestBoltStoreCorruptRecords(t *testing.T) {
	ctx := context.Background()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Create(ctx, boltPlan(t, "good", 2)))
	require.NoError(t, s.Create(ctx, boltPlan(t, "bad", 2)))
	require.NoError(t, s.Create(ctx, boltPlan(t, "swapped", 2)))
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPlans).Bucket([]byte("bad")).Put(rebootKey(1), []byte("{garbage")); err != nil {
			return err
		}
		// A header that names another plan: loading it would save it there.
		raw := tx.Bucket(bucketPlans).Bucket([]byte("good")).Get(keyHeader)
		return tx.Bucket(bucketPlans).Bucket([]byte("swapped")).Put(keyHeader, append([]byte(nil), raw...))
	}))
	for _, uuid := range []string{"bad", "swapped"} {
		p, err := s.Get(ctx, uuid)
		assert.ErrorIs(t, err, ErrCorrupt, uuid)
		p.UUID = uuid
		assert.Error(t, s.Put(ctx, p), "never overwritten")
	}
	var raw []byte
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		raw = append(raw, tx.Bucket(bucketPlans).Bucket([]byte("bad")).Get(rebootKey(1))...)
		return nil
	}))
	assert.Equal(t, "{garbage", string(raw), "left as it was for a person to look at")
	plans, err := s.List(ctx)
	assert.ErrorIs(t, err, ErrCorrupt)
	require.Len(t, plans, 1)
	assert.Equal(t, "good", plans[0].UUID, "nothing else lost")
}

func TestBoltImportFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs := FileStore{Dir: dir}
	require.NoError(t, fs.Create(ctx, boltPlan(t, "a", 2)))
	require.NoError(t, fs.Create(ctx, boltPlan(t, "b", 2)))
	s, err := OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer s.Close()
	done, err := s.Import(ctx, dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, done)
	_, err = s.Import(ctx, dir)
	assert.True(t, errors.Is(err, ErrExists), "importing twice names the plans already there: %v", err)
	p, err := s.Get(ctx, "a")
	require.NoError(t, err)
	want := boltPlan(t, "a", 2)
	want.Version = p.Version
	assert.Equal(t, want, p)
	_, err = json.Marshal(p)
	require.NoError(t, err)
}

// TestBoltViews: a view holds the header, the reboots in flight and the
// next pending ones; PutView writes those that changed and the index, with
// compare-and-swap; the whole plan read back agrees with the index.
func TestBoltViews(t *testing.T) {
	ctx := context.Background()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer s.Close()
	p := boltPlan(t, "v", 10)
	p.Concurrency = 2
	require.NoError(t, s.Create(ctx, p))
	_, err = Command(ctx, s, "v", Run)
	require.NoError(t, err)

	v, err := s.GetView(ctx, "v")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2}, v.Pos, "nothing in flight: concurrency 2, plus one")
	assert.Len(t, v.Members, 10)
	obs := Observations{Servers: map[string]ServerObs{}, Partial: true, HeadnodeServicesUp: true}
	for _, r := range v.Reboots {
		obs.Servers[r.ServerUUID] = ServerObs{ServicesUp: true}
	}
	now := time.Unix(100, 0).UTC()
	q, acts := Config{}.NextView(v, obs, now)
	require.Len(t, acts, 2)
	require.NoError(t, s.PutView(ctx, q))
	assert.Equal(t, []uint64{2, 2, 1, 1, 1, 1, 1, 1, 1, 1}, recordVersions(t, s, "v"),
		"two reboots started, one write each; the rest untouched")
	assert.ErrorIs(t, s.PutView(ctx, q), ErrConflict, "the version moved on")

	whole, err := s.Get(ctx, "v")
	require.NoError(t, err)
	assert.Equal(t, IndexOf(whole), func() Index { v, _ := s.GetView(ctx, "v"); return v.Index }())
	v2, err := s.GetView(ctx, "v")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2, 3, 4}, v2.Pos, "two in flight, then concurrency plus one pending")
	assert.Equal(t, []int{0, 1}, v2.Index.InFlight)

	// A hostile header: an index that forgets a reboot in flight would
	// leave it unwatched and uncounted. Refused, and left as it is.
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte("v"))
		var h header
		require.NoError(t, json.Unmarshal(b.Get(keyHeader), &h))
		h.Index.InFlight = []int{0}
		raw, _ := json.Marshal(h)
		return b.Put(keyHeader, raw)
	}))
	_, err = s.GetView(ctx, "v")
	assert.ErrorIs(t, err, ErrCorrupt)
	_, err = s.Get(ctx, "v")
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.Error(t, s.PutView(ctx, v2), "never overwritten")
}

// TestBoltViewRecordIdentity: a reboot record that names another server
// than the plan lists at its place is reported, not loaded or overwritten.
func TestBoltViewRecordIdentity(t *testing.T) {
	ctx := context.Background()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Create(ctx, boltPlan(t, "w", 4)))
	v, err := s.GetView(ctx, "w")
	require.NoError(t, err)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte("w"))
		raw0, raw1 := append([]byte(nil), b.Get(rebootKey(0))...), b.Get(rebootKey(1))
		var r0, r1 record
		require.NoError(t, json.Unmarshal(raw0, &r0))
		require.NoError(t, json.Unmarshal(raw1, &r1))
		r0.Reboot, r1.Reboot = r1.Reboot, r0.Reboot
		a, _ := json.Marshal(r0)
		c, _ := json.Marshal(r1)
		require.NoError(t, b.Put(rebootKey(0), a))
		return b.Put(rebootKey(1), c)
	}))
	_, err = s.GetView(ctx, "w")
	assert.ErrorIs(t, err, ErrCorrupt)
	v.Reboots[0].Error = "a change to write"
	assert.ErrorIs(t, s.PutView(ctx, v), ErrCorrupt, "a changed reboot is never written over another server's record")
}

// TestBoltCachesForgetEndedPlan (issue 37, point 3): the bbolt store's
// per-plan caches (member map, decoded records) forget a plan once it
// ends. The old store kept them for every plan it ever passed.
func TestBoltCachesForgetEndedPlan(t *testing.T) {
	ctx := context.Background()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
	require.NoError(t, err)
	defer s.Close()
	p := boltPlan(t, "e", 3)
	require.NoError(t, s.Create(ctx, p))
	v, err := s.GetView(ctx, "e")
	require.NoError(t, err)
	require.NotEmpty(t, s.members)
	v.State = StateCanceled
	require.NoError(t, s.PutView(ctx, v))
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Empty(t, s.members, "member maps")
	assert.Empty(t, s.decoded, "decoded records")
}
