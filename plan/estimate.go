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
// of about 9 % (key "k": how many took up to 2^(k/8) seconds, more than
// 2^((k-1)/8)), and sums their seconds per bucket (key "sk"), so that a
// high percentile is known from the index alone, in O(buckets), and
// within its bucket by the reboots' own lengths. Every key is a sum, so
// an index keeps it by adding and removing reboots.
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

func (h Hist) add(d time.Duration, n int) Hist {
	k := strconv.Itoa(histBucket(d))
	return h.addKey(k, n).addKey("s"+k, n*int(d.Round(time.Second)/time.Second))
}

// bucketLength is how long the reboots of bucket k took: their mean
// (never above the longest of them, at most 9 % below it), or the
// bucket's upper bound for a bucket counted without its sum.
func (h Hist) bucketLength(k, count int) time.Duration {
	sum, ok := h["s"+strconv.Itoa(k)]
	if !ok || count <= 0 {
		return histUpper(k)
	}
	return min(time.Duration(sum/count)*time.Second, histUpper(k))
}

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
// slow reboot never sets the need of every other), taken as the mean of
// the reboots in its bucket (never above what they took: a length every
// reboot so far fitted in is never estimated longer); n is how many
// reboots it rests on (0: none done, no estimate).
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
			return h.bucketLength(b.k, b.n), n
		}
	}
	last := bs[len(bs)-1]
	return h.bucketLength(last.k, last.n), n
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

// minEstimate is how many reboots done an estimate must rest on to hold
// the plan for good. Below 10 the 90th percentile is the longest reboot
// (ceil(0.9 n) = n), so with the longest left out the estimate is the
// second longest whatever the percentile: two slow reboots (the first
// ones, often the headnode and core servers that run the most services)
// would set the need of every other.
const minEstimate = 10

// needAt is Need as the plan's decisions use it at now: fewer than
// minEstimate reboots done are not decisive, so an estimate that rests on
// them holds a start until a window long enough for it, but never holds
// the plan for good: when no window of the next 400 days is that long,
// nothing holds the starts (0) until minEstimate reboots are done.
// Windows.Expect, the operator's word, always holds.
func needAt(w *Windows, h Hist, now time.Time) (time.Duration, string) {
	need, why := Need(w, h)
	if _, n := h.Estimate(); need > 0 && n < minEstimate && (w == nil || w.Expect <= 0) {
		if _, ok, err := nextOpen(w, now, need); err == nil && !ok {
			return 0, fmt.Sprintf("%d reboot(s) done, the estimate %s is longer than any window: too few reboots for an estimate (%d needed)",
				n, need.Round(time.Second), minEstimate)
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
