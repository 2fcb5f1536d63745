package redfish

import (
	"context"
	"testing"
	"time"
)

// TestReadRankOrder (issue 35, readplace.go): a system not in doubt
// ranks above every system in doubt; among these, the one that missed
// fewer reads since its last answer, then the one answered last.
func TestReadRankOrder(t *testing.T) {
	clean := readRank{}
	fewOld := readRank{doubt: true, missed: 1, last: 10}
	fewNew := readRank{doubt: true, missed: 1, last: 20}
	many := readRank{doubt: true, missed: 5, last: 30}
	for _, c := range []struct {
		a, b readRank
		want bool
	}{
		{clean, fewNew, true}, {fewNew, clean, false}, {clean, clean, false},
		{fewNew, fewOld, true}, {fewOld, fewNew, false},
		{fewOld, many, true}, {many, fewOld, false}, {fewOld, fewOld, false},
	} {
		if got := c.a.above(c.b); got != c.want {
			t.Errorf("%+v above %+v: %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// inDoubt35 makes c doubtful: missed reads since its last answer at
// last (UnixNano).
func inDoubt35(c *Controller, missed, last int64) {
	c.missed.Store(missed)
	c.lastAnswer.Store(last)
	c.doubt.Store(true)
}

// TestReadPlaceRank (issue 35, readplace.go; review rounds 24 and 27):
// with MaxInFlight 1, a doubtful system's read takes the extra place,
// and keeps it against a waiting read of a system in doubt that ranks
// higher (fewer misses) but was answered before it, and
// against reads of systems not in doubt (they take the MaxInFlight
// place); a read of a system in doubt that ranks higher and was
// answered later is given the extra place: the holder's read is cut,
// made way (its caller giving up then is no miss of its system), and the
// place goes to the highest-ranked waiting read once the cut request
// returned. A doubtful system's read in a MaxInFlight place is cut for a
// waiting read of a system not in doubt.
func TestReadPlaceRank(t *testing.T) {
	p := newReadPlaces(1)
	s := &session{places: p}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the reads left waiting
	dead, hungToo, fresh, guest, clean := &Controller{sess: s}, &Controller{sess: s}, &Controller{sess: s}, &Controller{sess: s}, &Controller{sess: s}
	base := time.Now().UnixNano()
	inDoubt35(dead, 3, base)
	inDoubt35(hungToo, 1, base-5) // fewer misses, but answered before dead
	inDoubt35(fresh, 1, base+5)   // fewer misses, answered after dead
	inDoubt35(guest, 4, base-20)

	deadCtx, deadCancel := context.WithCancel(ctx)
	r := &readPlace{c: dead, ctx: deadCtx, get: true, proof: true}
	if _, err := r.wait(); err != nil {
		t.Fatal(err)
	}
	held := r.t
	if held.kind != placeDoubt {
		t.Fatalf("a doubtful system's read took place %d, not the extra place", held.kind)
	}
	cut := func() bool { p.mu.Lock(); defer p.mu.Unlock(); return held.cut }
	waitFor := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !f(); {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	got := make(chan *Controller, 4)
	takeAsync := func(c *Controller) {
		go func() {
			if _, err := p.take(ctx, c, true, false); err == nil {
				got <- c
			}
		}()
	}

	// A doubtful system's read takes the free MaxInFlight place (the
	// extra place is held); a read of a system not in doubt cuts it.
	g, err := p.take(ctx, guest, true, false)
	if err != nil || g.kind != placeRead {
		t.Fatalf("the doubtful guest's read: %v, place %v", err, g)
	}
	takeAsync(clean)
	waitFor("a read of a system not in doubt did not cut the doubtful read in the MaxInFlight place", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return g.cut && g.madeWay
	})
	if cut() {
		t.Fatal("a read of a system not in doubt cut the extra place's read")
	}
	if again, madeWay, _ := g.end(false, time.Millisecond); !again || !madeWay {
		t.Fatal("the guest's cut read is not told to wait again, having made way")
	}
	g.free()
	if c := <-got; c != clean {
		t.Fatal("the MaxInFlight place did not go to the read of the system not in doubt")
	}

	takeAsync(hungToo)
	waitFor("hungToo's read does not wait", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.doubts.Len() == 1 })
	time.Sleep(20 * time.Millisecond)
	if cut() {
		t.Fatal("a system answered before the holder's cut the extra place's read")
	}
	takeAsync(fresh)
	waitFor("a higher-ranked system answered after the holder's did not cut its read", cut)
	if again := r.done(false); !again {
		t.Fatal("the cut read is not sent again")
	}
	deadCancel() // its caller gives up while it waits again
	if _, err := r.wait(); err == nil {
		t.Fatal("a read whose caller gave up took a place")
	}
	if n := dead.missed.Load(); n != 3 {
		t.Fatalf("a read cut to make way, then given up, counted as missed: %d misses, want 3", n)
	}
	select {
	case c := <-got:
		if c != fresh {
			t.Fatal("the extra place did not go to the highest-ranked read")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the extra place was not given again")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.extra == nil || p.extra.c != fresh || p.extra.kind != placeDoubt {
		t.Fatal("fresh does not hold the extra place")
	}
}
