package plan

import (
	"fmt"
	"strings"
	"time"
)

// Summary is a plan's progress for a person.
type Summary struct {
	Total, Done, InFlight, Failed, Left int
	// ETA estimates the time left from the mean duration of the reboots
	// done so far (job start to operational) and the concurrency, spread
	// over the time the maintenance windows are open; zero until one
	// reboot is done.
	ETA time.Duration
	// Waiting is why the plan could not start a reboot in its last pass
	// (Plan.Waiting), e.g. "waiting: 3 server(s) offline (...), concurrency 2".
	Waiting string
	// State is the plan's state. Line shows an ETA only while the plan
	// runs (or when State is not set): a stopped plan has none.
	State State
	// Never: no maintenance window in the next 400 days is long enough
	// for one reboot (Need): the plan cannot finish as it is; ETA is 0.
	Never bool
}

// Summarize counts a plan's reboots and estimates the time left.
func Summarize(p Plan, now time.Time) Summary {
	s := Summary{Total: len(p.Reboots), Waiting: p.Waiting, State: p.State}
	var sum time.Duration
	var n int
	var hist Hist
	for _, r := range p.Reboots {
		switch {
		case r.Step == StepDone:
			s.Done++
			if d, ok := took(r); ok {
				sum += d
				n++
				hist = hist.add(d, 1)
			}
		case r.Step == StepFailed:
			s.Failed++
		case r.Step.InFlight():
			s.InFlight++
		default:
			s.Left++
		}
	}
	if n > 0 && p.State == StateRunning {
		mean := sum / time.Duration(n)
		slots := max(p.Concurrency, 1)
		s.ETA = time.Duration(float64(mean) * (float64(s.Left) + float64(s.InFlight)/2) / float64(slots))
	}
	return s.inWindows(p.Windows, hist, now)
}

// inWindows stretches the ETA (work at the concurrency) over the time the
// windows are open from now on; an ETA that does not fit in the next 400
// days becomes unknown (0). A plan with reboots left whose windows are
// never open long enough for one reboot (Need, from hist) never
// finishes: Never.
func (s Summary) inWindows(w *Windows, hist Hist, now time.Time) Summary {
	if w.Empty() || s.Left+s.InFlight == 0 {
		return s
	}
	if need, _ := needAt(w, hist, now); need > 0 && s.Left > 0 {
		if _, ok, err := nextOpen(w, now, need); err == nil && !ok {
			s.ETA, s.Never = 0, true
			return s
		}
	}
	if s.ETA <= 0 {
		return s
	}
	end, ok, err := w.Finish(now, s.ETA)
	if err != nil || !ok {
		s.ETA = 0
		return s
	}
	s.ETA = end.Sub(now)
	return s
}

// Line renders a one-line progress bar of width cells.
func (s Summary) Line(width int) string {
	if width < 1 {
		width = 1
	}
	cells := func(n int) int {
		if s.Total == 0 {
			return 0
		}
		return n * width / s.Total
	}
	done, failed, fly := cells(s.Done), cells(s.Failed), cells(s.InFlight)
	bar := strings.Repeat("#", done) + strings.Repeat("x", failed) + strings.Repeat(">", fly)
	bar += strings.Repeat(".", max(width-len(bar), 0))
	eta := "?"
	switch {
	case s.Never:
		eta = "never (no maintenance window is long enough for one reboot)"
	case s.ETA >= time.Minute:
		eta = s.ETA.Round(time.Minute).String()
	case s.ETA > 0:
		eta = s.ETA.Round(time.Second).String()
	}
	line := fmt.Sprintf("[%s] %d/%d done, %d in flight, %d failed, %d left",
		bar, s.Done, s.Total, s.InFlight, s.Failed, s.Left)
	if s.State == "" || s.State == StateRunning {
		line += ", ETA " + eta
	}
	if s.Waiting != "" {
		line += "; " + s.Waiting
	}
	return line
}

// Table renders the final summary: one row per reboot, the hostname
// column as wide as the longest hostname.
func Table(p Plan) string {
	var b strings.Builder
	dry := ""
	if p.DryRun {
		dry = ", dry run: nothing was rebooted"
	}
	fmt.Fprintf(&b, "plan %s: %s (concurrency %d%s)\n", p.UUID, p.State, p.Concurrency, dry)
	w := len("HOSTNAME")
	for _, r := range p.Reboots {
		w = max(w, len(r.ServerHostname))
	}
	fmt.Fprintf(&b, "%-*s %-5s %-10s %-10s %-10s %s\n", w, "HOSTNAME", "CORE", "STARTED", "FINISHED", "UP", "RESULT")
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format("15:04:05")
	}
	for _, r := range p.Reboots {
		core := ""
		if r.Headnode {
			core = "head"
		} else if r.Core {
			core = "core"
		}
		res := string(r.Step)
		if r.Step == StepPending {
			res = "not started"
		}
		if r.Error != "" {
			res += ": " + r.Error
		}
		fmt.Fprintf(&b, "%-*s %-5s %-10s %-10s %-10s %s\n", w, r.ServerHostname, core, at(r.StartedAt), at(r.FinishedAt), at(r.OperationalAt), res)
	}
	return b.String()
}
