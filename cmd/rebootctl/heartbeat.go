package main

import (
	"context"
	"sync"
	"time"
)

// beatDuring runs pass and, every interval until it returns, beat: a pass
// may take long (blocking conditions run in it, up to their timeout
// each), and the executor's heartbeat and lease must not look stale
// meanwhile (show would say nothing moves; another executor could take
// the store over while this one still acts).
func beatDuring(ctx context.Context, interval time.Duration, beat func(), pass func() error) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	err := pass()
	close(done)
	wg.Wait()
	return err
}
