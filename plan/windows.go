package plan

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	// The Go time zone database, so that every machine reads the same
	// windows the same way, with or without a system zoneinfo.
	_ "time/tzdata"
)

// Windows are a plan's maintenance windows: a reboot starts only inside
// one, and only when it can plausibly finish before the window closes. A
// reboot that started inside a window finishes whenever it finishes. A
// plan without windows (nil, or neither Weekly nor Ranges) may start
// reboots at any time.
type Windows struct {
	// TimeZone is the zone of the weekly windows, a name of the Go time
	// zone database ("Europe/Berlin", "America/New_York"); "" is UTC.
	// Clock times follow its daylight-saving transitions: a window from
	// 01:00 to 05:00 lasts three hours on the night the clocks go forward
	// at 02:00 and five on the night they go back.
	TimeZone string `json:"time_zone,omitempty"`
	// Weekly windows, each "DAYS HH:MM-HH:MM" (ParseWeekly): "Mon-Fri
	// 22:00-06:00", "Sat,Sun 00:00-24:00", "daily 01:00-05:00". A window
	// whose end is not after its start ends the next day.
	Weekly []string `json:"weekly,omitempty"`
	// Ranges are absolute windows, [Start, End).
	Ranges []Range `json:"ranges,omitempty"`
	// Expect is how long a reboot is expected to take (job created to
	// services up), the operator's word: when set, a reboot starts only if
	// the window stays open that long, whatever the reboots done took. 0:
	// the plan's own estimate (Need: the 90th percentile of the reboots
	// done, the longest left out); until one is done, and while fewer
	// than 10 are done and no window is as long as their estimate, a
	// reboot may start until the window closes.
	Expect time.Duration `json:"expect,omitempty"`
}

// Range is an absolute maintenance window, [Start, End).
type Range struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Weekly is one parsed weekly window.
type Weekly struct {
	// Days the window starts on.
	Days [7]bool
	// Start and End are clock times in minutes after midnight (End up to
	// 24*60); an End not after Start ends the next day.
	Start, End int
}

// ErrWindow is wrapped by every error about a maintenance window.
var ErrWindow = errors.New("plan: invalid maintenance window")

var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

func parseDay(s string) (time.Weekday, bool) {
	for i, n := range dayNames {
		if strings.EqualFold(s, n) || strings.EqualFold(s, time.Weekday(i).String()) {
			return time.Weekday(i), true
		}
	}
	return 0, false
}

// parseClock parses HH:MM (00:00 to 24:00) into minutes.
func parseClock(s string) (int, bool) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 {
		return 0, false
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || mm < 0 || mm > 59 || hh > 24 || hh == 24 && mm != 0 {
		return 0, false
	}
	return hh*60 + mm, true
}

// ParseWeekly parses a weekly window: DAYS HH:MM-HH:MM, where DAYS is
// "daily" or a comma-separated list of days (Mon, Tuesday) and ranges of
// days (Mon-Fri, Fri-Mon wraps). The window starts on each of those days
// at the first time, in the plan's time zone, and ends at the second, the
// next day if the second is not after the first ("Mon-Fri 22:00-06:00");
// 24:00 is the end of the day. Errors wrap ErrWindow.
func ParseWeekly(s string) (Weekly, error) {
	bad := func(why string) (Weekly, error) {
		return Weekly{}, fmt.Errorf("%w: %q: %s (want e.g. \"Mon-Fri 22:00-06:00\" or \"daily 01:00-05:00\")", ErrWindow, s, why)
	}
	f := strings.Fields(s)
	if len(f) != 2 {
		return bad("want days and a time range")
	}
	var w Weekly
	if strings.EqualFold(f[0], "daily") {
		w.Days = [7]bool{true, true, true, true, true, true, true}
	} else {
		for _, item := range strings.Split(f[0], ",") {
			a, b, isRange := strings.Cut(item, "-")
			from, ok1 := parseDay(a)
			to, ok2 := from, true
			if isRange {
				to, ok2 = parseDay(b)
			}
			if !ok1 || !ok2 {
				return bad("unknown day in " + strconv.Quote(item))
			}
			for d := from; ; d = (d + 1) % 7 {
				w.Days[d] = true
				if d == to {
					break
				}
			}
		}
	}
	a, b, ok := strings.Cut(f[1], "-")
	if !ok {
		return bad("want HH:MM-HH:MM")
	}
	var ok1, ok2 bool
	w.Start, ok1 = parseClock(a)
	w.End, ok2 = parseClock(b)
	switch {
	case !ok1 || !ok2:
		return bad("times are HH:MM, 00:00 to 24:00")
	case w.Start == 24*60:
		return bad("a window cannot start at 24:00")
	case w.Start == w.End:
		return bad("a window cannot end when it starts (00:00-24:00 is a whole day)")
	}
	return w, nil
}

// String formats the window as ParseWeekly reads it.
func (w Weekly) String() string {
	var days []string
	for d, on := range w.Days {
		if on {
			days = append(days, time.Weekday(d).String()[:3])
		}
	}
	if len(days) == 7 {
		days = []string{"daily"}
	}
	clock := func(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }
	return strings.Join(days, ",") + " " + clock(w.Start) + "-" + clock(w.End)
}

// locations caches the zones loaded: the Go time zone database is
// immutable data, read once per name.
var locations sync.Map // name -> *time.Location

// Location returns the windows' time zone (UTC for "").
func (w *Windows) Location() (*time.Location, error) {
	if w == nil || w.TimeZone == "" {
		return time.UTC, nil
	}
	if l, ok := locations.Load(w.TimeZone); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(w.TimeZone)
	if err != nil || w.TimeZone == "Local" {
		return nil, fmt.Errorf("%w: time zone %q is not in the time zone database", ErrWindow, w.TimeZone)
	}
	locations.Store(w.TimeZone, l)
	return l, nil
}

// Empty reports whether there are no windows (reboots may start at any
// time).
func (w *Windows) Empty() bool { return w == nil || len(w.Weekly) == 0 && len(w.Ranges) == 0 }

// check validates the windows. Errors wrap ErrWindow.
func (w *Windows) check() error {
	if w == nil {
		return nil
	}
	if _, err := w.Location(); err != nil {
		return err
	}
	if len(w.Weekly)+len(w.Ranges) > 1000 {
		return fmt.Errorf("%w: %d windows, at most 1000", ErrWindow, len(w.Weekly)+len(w.Ranges))
	}
	for _, s := range w.Weekly {
		if _, err := ParseWeekly(s); err != nil {
			return err
		}
	}
	for _, r := range w.Ranges {
		if !r.Start.Before(r.End) {
			return fmt.Errorf("%w: range %s to %s ends before it starts", ErrWindow, r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339))
		}
	}
	if w.Expect < 0 {
		return fmt.Errorf("%w: expected reboot time %s < 0", ErrWindow, w.Expect)
	}
	return nil
}

// Period is one stretch of time during which the windows are open.
type Period struct{ Start, End time.Time }

// localInstant is the instant the clock of loc reads hh:mm (minutes) on
// day d (24:00 is the next day's 00:00). A clock time that a transition
// skips is the instant of the transition (the window opens or closes when
// the clocks jump past it); one that occurs twice is the first of the two.
func localInstant(y int, mo time.Month, d, minutes int, loc *time.Location) time.Time {
	h, m := minutes/60, minutes%60
	t := time.Date(y, mo, d, h, m, 0, 0, loc)
	want := time.Date(y, mo, d, h, m, 0, 0, time.UTC)
	wall := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	if !wall.Equal(want) { // skipped by a transition
		start, end := t.ZoneBounds()
		if wall.After(want) {
			return start
		}
		return end
	}
	// Occurs twice? The earlier one is in the zone before t's.
	if start, _ := t.ZoneBounds(); !start.IsZero() {
		_, offNow := t.Zone()
		_, offBefore := start.Add(-time.Nanosecond).Zone()
		if offBefore > offNow {
			if e := t.Add(-time.Duration(offBefore-offNow) * time.Second); e.Before(start) {
				return e
			}
		}
	}
	return t
}

// Periods returns the stretches of time in [from, to) during which the
// windows are open, merged (windows that overlap or touch are one period)
// and clipped to [from, to), in order. Without windows it is [from, to).
func (w *Windows) Periods(from, to time.Time) ([]Period, error) {
	if !from.Before(to) {
		return nil, nil
	}
	if w.Empty() {
		return []Period{{from, to}}, nil
	}
	loc, err := w.Location()
	if err != nil {
		return nil, err
	}
	var ps []Period
	add := func(s, e time.Time) {
		if s.Before(to) && e.After(from) && s.Before(e) {
			ps = append(ps, Period{maxTime(s, from), minTime(e, to)})
		}
	}
	weekly := make([]Weekly, 0, len(w.Weekly))
	for _, s := range w.Weekly {
		wk, err := ParseWeekly(s)
		if err != nil {
			return nil, err
		}
		weekly = append(weekly, wk)
	}
	if len(weekly) > 0 {
		// Every local day from the day before from (a window that started
		// then may still be open) to the day of to.
		f, t := from.In(loc), to.In(loc)
		day := time.Date(f.Year(), f.Month(), f.Day()-1, 12, 0, 0, 0, loc)
		last := time.Date(t.Year(), t.Month(), t.Day(), 12, 0, 0, 0, loc)
		for ; !day.After(last); day = time.Date(day.Year(), day.Month(), day.Day()+1, 12, 0, 0, 0, loc) {
			for _, wk := range weekly {
				if !wk.Days[day.Weekday()] {
					continue
				}
				endDay := day.Day()
				if wk.End <= wk.Start {
					endDay++
				}
				add(localInstant(day.Year(), day.Month(), day.Day(), wk.Start, loc),
					localInstant(day.Year(), day.Month(), endDay, wk.End, loc))
			}
		}
	}
	for _, r := range w.Ranges {
		add(r.Start, r.End)
	}
	slices.SortFunc(ps, func(a, b Period) int { return a.Start.Compare(b.Start) })
	out := ps[:0]
	for _, p := range ps {
		if n := len(out); n > 0 && !p.Start.After(out[n-1].End) {
			out[n-1].End = maxTime(out[n-1].End, p.End)
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// openHorizon is how far Open looks for the end of the current window; a
// window open longer than that counts as closing then.
const openHorizon = 8 * 24 * time.Hour

// searchHorizon is how far NextOpen and the ETA look ahead.
const searchHorizon = 400 * 24 * time.Hour

// Open reports whether the windows are open at t, and until when (at most
// t + 8 days: a window open longer counts as closing then).
func (w *Windows) Open(t time.Time) (bool, time.Time, error) {
	if w.Empty() {
		return true, t.Add(openHorizon), nil
	}
	ps, err := w.Periods(t, t.Add(openHorizon))
	if err != nil {
		return false, time.Time{}, err
	}
	if len(ps) > 0 && !ps[0].Start.After(t) {
		return true, ps[0].End, nil
	}
	return false, time.Time{}, nil
}

// NextOpen returns when, after t, the windows next open for at least
// need: the start of the first period that lasts need or longer (t itself
// if one is open at t that lasts need from t). ok is false if there is
// none within 400 days.
func (w *Windows) NextOpen(t time.Time, need time.Duration) (time.Time, bool, error) {
	// Look a week ahead first, then further: most windows are weekly.
	for _, h := range []time.Duration{openHorizon, 64 * 24 * time.Hour, searchHorizon} {
		ps, err := w.Periods(t, t.Add(h))
		if err != nil {
			return time.Time{}, false, err
		}
		for _, p := range ps {
			if p.End.Sub(p.Start) >= need {
				return p.Start, true, nil
			}
			if p.End.Equal(t.Add(h)) { // clipped: it may last longer
				if h == searchHorizon {
					return p.Start, true, nil
				}
				break
			}
		}
	}
	return time.Time{}, false, nil
}

// Finish returns when work (time with the windows open) is done, starting
// at t: the windows' open time is used up in order. ok is false if it does
// not fit in the next 400 days.
func (w *Windows) Finish(t time.Time, work time.Duration) (time.Time, bool, error) {
	if work <= 0 {
		return t, true, nil
	}
	ps, err := w.Periods(t, t.Add(searchHorizon))
	if err != nil {
		return time.Time{}, false, err
	}
	for _, p := range ps {
		if d := p.End.Sub(p.Start); d >= work {
			return p.Start.Add(work), true, nil
		} else {
			work -= d
		}
	}
	return time.Time{}, false, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// nextOpens caches NextOpen's answers: a held plan asks every pass, and
// the answer for a later time before the window found is the same (no
// window long enough opens in between). Keyed by the windows and the need;
// at most maxNextOpens entries.
var nextOpens struct {
	sync.Mutex
	m map[string]nextOpenEntry
}

type nextOpenEntry struct {
	from, at time.Time
	ok       bool
}

const maxNextOpens = 64

// nextOpen is w.NextOpen(t, need), cached: an answer found from `from` is
// the answer for every t in [from, at] (for no window at all: for an hour
// after from).
func nextOpen(w *Windows, t time.Time, need time.Duration) (time.Time, bool, error) {
	key := fmt.Sprintf("%q|%q|%q|%d", w.TimeZone, w.Weekly, fmt.Sprint(w.Ranges), need)
	nextOpens.Lock()
	e, hit := nextOpens.m[key]
	nextOpens.Unlock()
	if hit && !t.Before(e.from) && (e.ok && !t.After(e.at) || !e.ok && t.Before(e.from.Add(time.Hour))) {
		return e.at, e.ok, nil
	}
	at, ok, err := w.NextOpen(t, need)
	if err != nil {
		return at, ok, err
	}
	nextOpens.Lock()
	defer nextOpens.Unlock()
	if nextOpens.m == nil || len(nextOpens.m) >= maxNextOpens {
		nextOpens.m = map[string]nextOpenEntry{}
	}
	nextOpens.m[key] = nextOpenEntry{from: t, at: at, ok: ok}
	return at, ok, nil
}
