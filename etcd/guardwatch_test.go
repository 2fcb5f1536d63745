package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGuardWatchStartsAfterCompaction: the Guard's watch on the election
// key starts from the election's revision; when etcd compacted past it
// before the first Hold, the watch fails (compacted), and the Guard reads
// the key and watches again from there: a deletion of the key afterwards
// still ends the held context and makes Hold refuse within 2 s (the lease
// alone would keep them for up to 90 % of its 30 s TTL).
func TestGuardWatchStartsAfterCompaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli := newClient(t)
	pre := prefix(t)
	l, _ := lead(t, pre, "one", 30)
	put, err := cli.Put(ctx, pre+"bump", "x")
	require.NoError(t, err)
	require.Greater(t, put.Header.Revision, l.Rev)
	_, err = cli.Compact(ctx, put.Header.Revision)
	require.NoError(t, err)

	hctx, hcancel, err := l.Guard().Hold(ctx)
	require.NoError(t, err)
	defer hcancel()
	time.Sleep(300 * time.Millisecond) // the watch from Rev fails, the key is read, the watch starts again
	require.NoError(t, hctx.Err(), "the key is still there: the held context must live")

	_, err = cli.Delete(ctx, l.Key)
	require.NoError(t, err)
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, c, err := l.Guard().Hold(ctx)
		if err == nil {
			c()
		}
		if err != nil && hctx.Err() != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after its election key was deleted (the watch having started on compacted history), the Guard still answers (Hold error %v) or its held context is live (%v)", err, hctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
