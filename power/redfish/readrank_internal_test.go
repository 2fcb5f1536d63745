package redfish

import (
	"container/list"
	"context"
	"testing"
	"time"
)

// TestReadPlaceRank (review 35 round 24): a read of a system that is not
// doubtful cuts a doubtful system's read holding the only place, and
// takes that place once the cut request returned, before the doubtful
// reads waiting; a doubtful system's read cuts another doubtful one's
// only if its own system was answered since the other became doubtful
// (systems that hung together do not cut each other's reads).
func TestReadPlaceRank(t *testing.T) {
	p := newReadPlaces(1)
	s := &session{places: p}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the reads left waiting
	dead, hungToo, fresh, clean := &Controller{sess: s}, &Controller{sess: s}, &Controller{sess: s}, &Controller{sess: s}
	base := time.Now().UnixNano()
	dead.lastAnswer.Store(base - 10)
	dead.doubtSince.Store(base)
	dead.doubt.Store(true)
	hungToo.lastAnswer.Store(base - 5) // answered later than dead, but before dead became doubtful
	hungToo.doubtSince.Store(base + 1)
	hungToo.doubt.Store(true)
	fresh.lastAnswer.Store(base + 5) // answered since dead became doubtful
	fresh.doubtSince.Store(base + 6)
	fresh.doubt.Store(true)

	held, err := p.take(ctx, dead, true, false)
	if err != nil {
		t.Fatal(err)
	}
	cut := func() bool { p.mu.Lock(); defer p.mu.Unlock(); return held.cut }
	queued := func(l *list.List, n int) { // waits until n reads wait in l
		for {
			p.mu.Lock()
			k := l.Len()
			p.mu.Unlock()
			if k >= n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	got := make(chan *Controller, 3)
	for _, c := range []*Controller{hungToo} {
		go func() {
			if _, err := p.take(ctx, c, true, false); err == nil {
				got <- c
			}
		}()
	}
	queued(&p.doubts, 1)
	if cut() {
		t.Fatal("a doubtful system answered before the holder became doubtful cut its read")
	}
	go func() {
		if _, err := p.take(ctx, fresh, true, false); err == nil {
			got <- fresh
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !cut() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !cut() || held.ctx.Err() == nil {
		t.Fatal("a doubtful system answered since the holder became doubtful did not cut its read")
	}
	go func() {
		if _, err := p.take(ctx, clean, true, false); err == nil {
			got <- clean
		}
	}()
	queued(&p.waiting, 1)
	if !held.end(false, time.Millisecond) {
		t.Fatal("the cut read is not told to wait again")
	}
	held.free()          // its request returned: the place is given back
	for c := range got { // a doubtful read may have the extra place as a probe meanwhile
		if c == clean {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reads) != 1 || p.reads[0].c != clean {
		t.Fatal("the place did not go to the read of the system that is not doubtful")
	}
}
