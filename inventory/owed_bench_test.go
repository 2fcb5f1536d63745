package inventory

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkOwedLiveJobs measures Owed, as every claim of the executor
// calls it, on a file with 50,000 live jobs that did not change between
// calls: each job's record is decoded at the first call only.
func BenchmarkOwedLiveJobs(b *testing.B) {
	t := &testing.T{} // newWorld's: its cleanups never run, so the file's directory is removed here
	w, _ := newWorld(t, 1, 1)
	w.open()
	defer func() { _ = w.f.Close(); _ = os.RemoveAll(filepath.Dir(w.path)) }()
	const n = 50000
	require.NoError(b, w.f.db.Update(func(tx *bolt.Tx) error {
		jb := tx.Bucket(bucketJobs)
		for i := range n {
			raw, err := json.Marshal(JobRecord{UUID: fmt.Sprintf("job-%d", i), Plan: "p1"})
			if err != nil {
				return err
			}
			if err := jb.Put([]byte(fmt.Sprintf("job-%d", i)), raw); err != nil {
				return err
			}
		}
		return nil
	}))
	w.f.mu.Lock()
	for i := range n {
		w.f.liveJob[fmt.Sprintf("server-%d", i)] = fmt.Sprintf("job-%d", i)
	}
	w.f.mu.Unlock()
	o, err := w.f.Owed()
	require.NoError(b, err)
	require.Len(b, o, n)
	require.Equal(b, "p1", o[0].Plan)
	b.ResetTimer()
	for range b.N {
		if _, err := w.f.Owed(); err != nil {
			b.Fatal(err)
		}
	}
}
