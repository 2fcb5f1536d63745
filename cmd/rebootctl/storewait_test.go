package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestStoreWaitLetsCommandGoFirst (issue 37, review round 13, the fix of
// TestReview37o_StopWaitsForWholePlanReads): while a command waits for
// the store (FILE.wait locked), the executor's next store operation waits
// for it, until the command has the store (released), at most maxYield;
// with no command waiting it does not wait.
func TestStoreWaitLetsCommandGoFirst(t *testing.T) {
	store := filepath.Join(t.TempDir(), "plans.db")
	ctx := context.Background()
	start := time.Now()
	yieldToCommands(ctx, store) // no wait file: no wait
	assert.Less(t, time.Since(start), maxYield/2)

	release := announceWait(store)
	go func() {
		time.Sleep(200 * time.Millisecond)
		release()
	}()
	start = time.Now()
	yieldToCommands(ctx, store)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 150*time.Millisecond, "the executor went first")
	assert.Less(t, took, maxYield, "the executor waited past the command's release")

	start = time.Now()
	yieldToCommands(ctx, store) // released: no wait
	assert.Less(t, time.Since(start), maxYield/2)

	defer announceWait(store)()
	start = time.Now()
	yieldToCommands(ctx, store) // a command that never gets on: at most maxYield
	took = time.Since(start)
	assert.GreaterOrEqual(t, took, maxYield)
	assert.Less(t, took, 2*maxYield)
}
