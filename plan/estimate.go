package plan

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// took is how long reboot r took, from its job's creation (its start
// when the creation time is unknown, in plans written before
// JobCreatedAt) to operational; ok is false if it has not both times.
// The windows' fit measures from the job's creation, as it decides then:
// the job's queue counts.
func took(r Reboot) (time.Duration, bool) {
	from := r.JobCreatedAt
	if from == nil {
		from = r.StartedAt
	}
	if from == nil || r.OperationalAt == nil {
		return 0, false
	}
	return max(r.OperationalAt.Sub(*from), 0), true
}

// Hist counts the done reboots by how long they took (took), in buckets
// of about 9 % (bucket k holds durations up to 2^(k/8) seconds), so that a
// high percentile is known from the index alone, in O(buckets).
type Hist map[string]int

// histBucket is the bucket of d.
func histBucket(d time.Duration) int {
	s := d.Seconds()
	if s <= 1 {
		return 0
	}
	return int(math.Ceil(8 * math.Log2(s)))
}

// histUpper is the longest duration of bucket k.
func histUpper(k int) time.Duration {
	return time.Duration(math.Pow(2, float64(k)/8) * float64(time.Second)).Round(time.Second)
}

func (h Hist) add(d time.Duration, n int) Hist { return h.addKey(strconv.Itoa(histBucket(d)), n) }

func (h Hist) clone() Hist {
	if h == nil {
		return nil
	}
	out := make(Hist, len(h))
	for k, v := range h {
		out[k] = v
	}
	return out
}

// Estimate is the robust estimate of how long a reboot takes: the 90th
// percentile of the done reboots, leaving out the longest one (so one
// slow reboot never sets the need of every other), rounded up to its
// bucket; n is how many reboots it rests on (0: none done, no estimate).
func (h Hist) Estimate() (d time.Duration, n int) {
	type bucket struct{ k, n int }
	var bs []bucket
	for key, c := range h {
		k, err := strconv.Atoi(key)
		if err != nil || c <= 0 {
			continue
		}
		bs = append(bs, bucket{k, c})
		n += c
	}
	if n == 0 {
		return 0, 0
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].k < bs[j].k })
	rank := int(math.Ceil(0.9 * float64(n)))
	if n >= 2 {
		rank = min(rank, n-1)
	}
	seen := 0
	for _, b := range bs {
		if seen += b.n; seen >= rank {
			return histUpper(b.k), n
		}
	}
	return histUpper(bs[len(bs)-1].k), n
}

// Need is how long a reboot must be able to run inside a maintenance
// window for it to start, and which estimate says so: the operator's
// Windows.Expect when set (the operator's word: no reboot seen raises or
// lowers it), else Hist.Estimate of the reboots done so far (0 while none
// is done: a reboot may start until the window closes).
func Need(w *Windows, h Hist) (time.Duration, string) {
	if w != nil && w.Expect > 0 {
		return w.Expect, "windows expect " + w.Expect.String()
	}
	d, n := h.Estimate()
	if n == 0 {
		return 0, "no reboot done yet"
	}
	return d, fmt.Sprintf("the 90th percentile of %d reboot(s) done, the longest left out; set windows expect to override", n)
}

// needAt is Need as the plan's decisions use it at now: one reboot done
// is not decisive (leaving the longest out leaves nothing), so an
// estimate that rests on a single reboot holds a start until a window
// long enough for it, but never holds the plan for good: when no window
// of the next 400 days is that long, nothing holds the starts (0) until
// a second reboot is done. Windows.Expect, the operator's word, always
// holds.
func needAt(w *Windows, h Hist, now time.Time) (time.Duration, string) {
	need, why := Need(w, h)
	if _, n := h.Estimate(); need > 0 && n == 1 && (w == nil || w.Expect <= 0) {
		if _, ok, err := nextOpen(w, now, need); err == nil && !ok {
			return 0, fmt.Sprintf("the one reboot done took %s, longer than any window: too few reboots for an estimate", need.Round(time.Second))
		}
	}
	return need, why
}

// addKey adds n to bucket key.
func (h Hist) addKey(key string, n int) Hist {
	if n == 0 {
		return h
	}
	if h == nil {
		h = Hist{}
	}
	h[key] += n
	if h[key] <= 0 {
		delete(h, key)
	}
	return h
}
