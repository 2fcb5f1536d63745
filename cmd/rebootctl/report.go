package main

// rebootctl plan report PLAN: one self-contained HTML file (inline SVG and
// CSS, no script, nothing fetched) with the plan's timeline (issue 27).

import (
	"flag"
	"fmt"
	"html"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// reportMaxRows bounds the servers drawn one per row (the offline chart
// always covers every server).
const reportMaxRows = 400

// phase is one bar segment of a server's row.
type phase struct {
	name, color string
}

// The phases of a reboot, in order, and their colors.
var (
	phDrain    = phase{"drain", "#e3a21a"}
	phOff      = phase{"power off", "#d9541e"}
	phHeld     = phase{"held off", "#7a7a7a"}
	phBoot     = phase{"boot", "#2f78c4"}
	phServices = phase{"services", "#2e9e4f"}
	phases     = []phase{phDrain, phOff, phHeld, phBoot, phServices}
	// phUnknown covers phases the fleet did not report (a fleet without
	// plan.Phases draws one bar from the start to services up).
	phUnknown = phase{"reboot (phases not reported)", "#9fb0c4"}
	// phNotOff is the time a reboot that failed spent after its drain
	// without its power-off ever confirmed (a BMC that refused every
	// login): no "power off" bar for a server nothing shows was off.
	phNotOff = phase{"power-off not confirmed", "#c9b9a6"}
)

const (
	colorFail    = "#c62828"
	colorLimit   = "#e0457b"
	colorOffline = "#5b3fa8"
	colorCommand = "#222222"
)

func (e *env) report(args []string) int {
	fs := flag.NewFlagSet("rebootctl plan report", flag.ContinueOnError)
	commonFlags(fs, e)
	outPath := fs.String("o", "", "the HTML file to write (default PLAN.html in the current directory)")
	rest, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if !e.oneUUID("report", rest) {
		return exitUsage
	}
	st, err := e.openStore()
	if err != nil {
		return e.fail(err)
	}
	p, err := st.Get(e.ctx, rest[0])
	st.Close()
	if err != nil {
		return e.fail(fmt.Errorf("%s", explain(err, rest[0])))
	}
	if *outPath == "" {
		*outPath = p.UUID + ".html"
	}
	if err := os.WriteFile(*outPath, []byte(reportHTML(p, time.Now())), 0o644); err != nil {
		return e.fail(err)
	}
	fmt.Fprintf(e.out, "wrote %s (open it in a browser; it needs no network)\n", *outPath)
	return exitOK
}

// segment is one drawn interval.
type segment struct {
	ph         phase
	start, end time.Time
}

// timeline is the drawable history of one reboot.
type timeline struct {
	r        plan.Reboot
	segs     []segment
	failedAt *time.Time
	open     bool // still in flight: its last segment ends now
}

// timelineOf cuts a reboot into its phases: drain from its start to
// Drained, power off to Off, held off to On, boot to Healthy, services to
// operational. A phase the fleet did not report merges into the next one
// known; a reboot in flight ends at now, a failed one at its failure.
//
// reported says whether the plan's fleet reports phases (some reboot of
// the plan has them): if not, nothing is labelled with a phase.
func timelineOf(r plan.Reboot, now time.Time, reported bool) timeline {
	tl := timeline{r: r}
	if r.StartedAt == nil && r.StepSince != nil && r.Step != plan.StepPending {
		r.StartedAt = r.StepSince // started, job not seen yet
	}
	if r.StartedAt == nil {
		return tl
	}
	var ph plan.Phases
	if r.Phases != nil {
		ph = *r.Phases
	}
	end := r.OperationalAt
	switch {
	case r.Step == plan.StepFailed || r.CanceledAt != nil:
		tl.failedAt = r.CanceledAt
		end = r.CanceledAt
		if r.Step.InFlight() { // the job may still reboot it
			end, tl.open = &now, true
		}
	case r.Step.InFlight():
		end, tl.open = &now, true
	}
	if end == nil {
		end = &now
	}
	// marks[i] ends phases[i]; the last one is the reboot's end.
	marks := []*time.Time{ph.Drained, ph.Off, ph.On, ph.Healthy, end}
	ended := r.Step == plan.StepDone
	start, last := *r.StartedAt, -1
	for i, m := range marks {
		if m == nil {
			continue
		}
		t := *m
		if t.After(*end) {
			t = *end
		}
		if t.Before(start) {
			continue
		}
		p := phases[i]
		switch {
		case i == len(marks)-1 && !ended && !reported:
			p = phUnknown // failed or in flight; the fleet reports no phases
		case i == len(marks)-1 && !ended && !tl.open && last+1 == 1:
			p = phNotOff // failed with no power-off reported
		case i == len(marks)-1 && !ended:
			p = phases[last+1] // failed or in flight in the phase after the last one reported
		case i > last+1:
			p = phUnknown // phases the fleet did not report
		}
		tl.segs = append(tl.segs, segment{ph: p, start: start, end: t})
		start, last = t, i
		if !start.Before(*end) {
			break
		}
	}
	return tl
}

// offlineStep is the number of servers of the plan offline from At on.
type offlineStep struct {
	At time.Time
	N  int
}

// offlineOver is the plan's servers offline (their reboot in flight) over
// time, from the timelines.
func offlineOver(tls []timeline) []offlineStep {
	type ev struct {
		at time.Time
		d  int
	}
	var evs []ev
	for _, tl := range tls {
		if len(tl.segs) == 0 {
			continue
		}
		evs = append(evs, ev{tl.segs[0].start, +1}, ev{tl.segs[len(tl.segs)-1].end, -1})
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if !evs[i].at.Equal(evs[j].at) {
			return evs[i].at.Before(evs[j].at)
		}
		return evs[i].d < evs[j].d // ends before starts at one instant
	})
	var out []offlineStep
	n := 0
	for _, e := range evs {
		n += e.d
		if len(out) > 0 && out[len(out)-1].At.Equal(e.at) {
			out[len(out)-1].N = n
			continue
		}
		out = append(out, offlineStep{e.at, n})
	}
	return out
}

// reportSVG draws the plan: a row per server (core servers first, in plan
// order) with a bar per phase, failures and operator commands marked, and
// under it the servers offline over time against the concurrency limit.
func reportSVG(p plan.Plan, now time.Time) string {
	reported := false
	for _, r := range p.Reboots {
		reported = reported || r.Phases != nil
	}
	var tls []timeline
	for _, r := range p.Reboots {
		tls = append(tls, timelineOf(r, now, reported))
	}
	// The time range: every start and end, and the commands.
	var t0, t1 time.Time
	see := func(t time.Time) {
		if t0.IsZero() || t.Before(t0) {
			t0 = t
		}
		if t.After(t1) {
			t1 = t
		}
	}
	for _, tl := range tls {
		for _, s := range tl.segs {
			see(s.start)
			see(s.end)
		}
	}
	for _, c := range p.Commands {
		see(c.At)
	}
	if t0.IsZero() {
		t0, t1 = now, now
	}
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Second
	}

	rows := min(len(tls), reportMaxRows)
	const (
		labelW = 190
		plotW  = 860
		rowH   = 18
		top    = 34
		chartH = 140
		gap    = 46
	)
	timelineH := rows * rowH
	chartTop := top + timelineH + gap
	height := chartTop + chartH + 40
	width := labelW + plotW + 30
	x := func(t time.Time) float64 { return labelW + float64(t.Sub(t0))/float64(span)*plotW }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12" shape-rendering="crispEdges">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)

	// Time axis: ticks at a round step, labelled from the plan's start.
	step := tickStep(span)
	for d := time.Duration(0); d <= span; d += step {
		tx := x(t0.Add(d))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>`+"\n", tx, top-6, tx, chartTop+chartH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">+%s</text>`+"\n", tx, top-10, shortDur(d))
	}
	fmt.Fprintf(&b, `<text x="4" y="%d" fill="#555">start %s UTC</text>`+"\n", top-10, t0.UTC().Format("2006-01-02 15:04:05"))

	// One row per server; a line between the core servers and the rest.
	for i, tl := range tls[:rows] {
		y := top + i*rowH
		if i%2 == 1 {
			fmt.Fprintf(&b, `<rect x="0" y="%d" width="%d" height="%d" fill="#f6f6f6"/>`+"\n", y, width, rowH)
		}
		label := tl.r.ServerHostname
		switch {
		case tl.r.Headnode:
			label += " (headnode)"
		case tl.r.Core:
			label += " (core)"
		}
		weight := ""
		if tl.r.Core {
			weight = ` font-weight="bold"`
		}
		fmt.Fprintf(&b, `<text x="4" y="%d"%s>%s</text>`+"\n", y+13, weight, esc(clip(label, 28)))
		if i > 0 && tls[i-1].r.Core && !tl.r.Core {
			fmt.Fprintf(&b, `<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#333" stroke-dasharray="4 3"/>`+"\n", y, width, y)
		}
		for _, s := range tl.segs {
			w := math.Max(x(s.end)-x(s.start), 2) // a short phase stays visible
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s %s (%s)</title></rect>`+"\n",
				x(s.start), y+3, w, rowH-6, s.ph.color, esc(tl.r.ServerHostname), s.ph.name, shortDur(s.end.Sub(s.start)), s.start.UTC().Format("15:04:05"))
		}
		if tl.open && len(tl.segs) > 0 {
			last := tl.segs[len(tl.segs)-1]
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#333">…</text>`+"\n", x(last.end)+3, y+13)
		}
		if tl.failedAt != nil {
			fx := x(*tl.failedAt)
			fmt.Fprintf(&b, `<g stroke="%s" stroke-width="3"><line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/><line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/><title>%s failed: %s</title></g>`+"\n",
				colorFail, fx-5, y+3, fx+5, y+rowH-3, fx-5, y+rowH-3, fx+5, y+3, esc(tl.r.ServerHostname), esc(tl.r.Error))
		}
		if len(tl.segs) == 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#999">not started</text>`+"\n", labelW+4, y+13)
		}
	}
	if len(tls) > rows {
		fmt.Fprintf(&b, `<text x="4" y="%d" fill="#555">… and %d more server(s) (the chart below counts them all)</text>`+"\n", top+timelineH+14, len(tls)-rows)
	}

	// Operator commands: a line across both charts.
	for _, c := range p.Commands {
		cx := x(c.At)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="6 3"><title>%s at %s</title></line>`+"\n",
			cx, top-4, cx, chartTop+chartH, colorCommand, esc(c.Command), c.At.UTC().Format("15:04:05"))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="%s" font-weight="bold">%s</text>`+"\n", cx+3, top+timelineH+gap/2+4, colorCommand, esc(c.Command))
	}

	// Servers offline over time against the concurrency limit.
	allSteps := offlineOver(tls) // every server, drawn or not
	maxN := p.Concurrency
	for _, s := range allSteps {
		maxN = max(maxN, s.N)
	}
	maxN = max(maxN, 1)
	yv := func(n int) float64 { return float64(chartTop+chartH) - float64(n)/float64(maxN)*float64(chartH-10) }
	fmt.Fprintf(&b, `<text x="4" y="%d" font-weight="bold">servers offline</text>`+"\n", chartTop+12)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`+"\n", labelW, chartTop+chartH, labelW+plotW, chartTop+chartH)
	for _, n := range []int{0, maxN} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%d</text>`+"\n", labelW-6, yv(n)+4, n)
	}
	if len(allSteps) > 0 {
		var pts []string
		prev := 0
		for _, s := range allSteps {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At), yv(prev)), fmt.Sprintf("%.1f,%.1f", x(s.At), yv(s.N)))
			prev = s.N
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(t1), yv(prev)))
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colorOffline)
	}
	ly := yv(p.Concurrency)
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="8 4"><title>concurrency limit %d</title></line>`+"\n",
		labelW, ly, labelW+plotW, ly, colorLimit, p.Concurrency)
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="%s">limit %d</text>`+"\n", labelW+plotW, ly-4, colorLimit, p.Concurrency)
	fmt.Fprintf(&b, `<text x="4" y="%d" fill="#555">(reboots in flight)</text>`+"\n", chartTop+28)

	// Legend.
	lx := labelW
	for _, ph := range phases {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, height-22, ph.color, lx+16, height-12, ph.name)
		lx += 100
	}
	fmt.Fprintf(&b, `<g stroke="%s" stroke-width="3"><line x1="%d" y1="%d" x2="%d" y2="%d"/><line x1="%d" y1="%d" x2="%d" y2="%d"/></g><text x="%d" y="%d">failure</text>`+"\n",
		colorFail, lx, height-22, lx+10, height-10, lx, height-10, lx+10, height-22, lx+16, height-12)
	lx += 80
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="6 3"/><text x="%d" y="%d">operator command</text>`+"\n",
		lx, height-22, lx, height-8, colorCommand, lx+6, height-12)
	b.WriteString("</svg>\n")
	return b.String()
}

// reportHTML is the whole page: a summary, the picture, the failures and
// the commands.
func reportHTML(p plan.Plan, now time.Time) string {
	s := plan.Summarize(p, now)
	var b strings.Builder
	title := "rebootctl plan " + p.UUID
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	b.WriteString(`<style>
body { font-family: sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px 0; }
p.sum { margin: 0 0 12px 0; color: #444; }
table { border-collapse: collapse; margin-top: 12px; font-size: 13px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
</style></head><body>
`)
	dry := ""
	if p.DryRun {
		dry = " (dry run: nothing was rebooted)"
	}
	fmt.Fprintf(&b, "<h1>%s: %s%s</h1>\n", esc(title), esc(string(p.State)), esc(dry))
	fmt.Fprintf(&b, "<p class=\"sum\">%d server(s): %d done, %d failed, %d in flight, %d not started; concurrency %d, failure budget %d. Report written %s UTC.</p>\n",
		s.Total, s.Done, s.Failed, s.InFlight, s.Left, p.Concurrency, p.FailureBudget, now.UTC().Format("2006-01-02 15:04:05"))
	b.WriteString(reportSVG(p, now))
	var failed []plan.Reboot
	for _, r := range p.Reboots {
		if r.Error != "" {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		b.WriteString("<table><tr><th>failed server</th><th>at (UTC)</th><th>why</th></tr>\n")
		for _, r := range failed {
			at := "-"
			if r.CanceledAt != nil {
				at = r.CanceledAt.UTC().Format("15:04:05")
			}
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(r.ServerHostname), at, esc(r.Error))
		}
		b.WriteString("</table>\n")
	}
	if len(p.Commands) > 0 {
		b.WriteString("<table><tr><th>operator command</th><th>at (UTC)</th></tr>\n")
		for _, c := range p.Commands {
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td></tr>\n", esc(c.Command), c.At.UTC().Format("2006-01-02 15:04:05"))
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

func esc(s string) string { return html.EscapeString(s) }

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// tickStep is a round step giving 4 to 10 ticks over span.
func tickStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour} {
		if span/s <= 10 {
			return s
		}
	}
	return span / 10
}

// shortDur writes 1h5m, 5m, 30s, 0s.
func shortDur(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	case d >= time.Minute && d%time.Minute == 0:
		return strings.TrimSuffix(d.String(), "0s")
	}
	return d.String()
}
