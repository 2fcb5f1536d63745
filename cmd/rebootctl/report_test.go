package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reportPlan is a finished plan with every phase recorded: a headnode, a
// core server, four others at concurrency 2, one failure, a stop and a
// run.
func reportPlan(t *testing.T) plan.Plan {
	t.Helper()
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	var fleet []plan.Server
	for i, h := range []string{"headnode", "core-1", "cn-1", "cn-2", "cn-3", "cn-4"} {
		fleet = append(fleet, plan.Server{UUID: fmt.Sprintf("s%d", i), Hostname: h, Platform: "1", Headnode: i == 0, Core: i < 2})
	}
	p, _, err := plan.Create(fleet, plan.CreateOptions{UUID: "report-plan", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(2), FailureBudget: plan.Count(1)})
	require.NoError(t, err)
	p.State = plan.StateFailed
	// start, drained, off, on, healthy, operational (seconds)
	done := func(i int, s, d, o, n, h, u int) {
		r := &p.Reboots[i]
		r.Step, r.JobUUID, r.StartedAt, r.FinishedAt, r.OperationalAt = plan.StepDone, fmt.Sprintf("j%d", i), at(s), at(d+1), at(u)
		r.Phases = &plan.Phases{Drained: at(d), Off: at(o), On: at(n), Healthy: at(h)}
	}
	done(0, 0, 10, 40, 55, 150, 160)
	done(1, 165, 170, 200, 215, 300, 305)
	done(2, 310, 330, 360, 380, 470, 480)
	// cn-2 fails in its drain
	p.Reboots[3].Step, p.Reboots[3].JobUUID, p.Reboots[3].StartedAt, p.Reboots[3].CanceledAt = plan.StepFailed, "j3", at(310), at(400)
	p.Reboots[3].Error = "reboot job failed: drain: exit status 1"
	done(4, 480, 490, 520, 530, 620, 630)
	p.Commands = []plan.Mark{{At: *at(-5), Command: "run"}, {At: *at(420), Command: "stop"}, {At: *at(470), Command: "run"}}
	require.NoError(t, p.Validate())
	return p
}

// TestReportSVGGolden (issue 27): the picture of a plan, as SVG.
func TestReportSVGGolden(t *testing.T) {
	p := reportPlan(t)
	svg := reportSVG(p, time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	golden(t, "report.svg", svg)
	// What it must show: a bar per phase, the failure, the commands, the
	// limit, core servers first.
	for _, ph := range phases {
		assert.Contains(t, svg, `fill="`+ph.color+`"><title>cn-1: `+ph.name, ph.name)
	}
	assert.Contains(t, svg, "<title>cn-2 failed: reboot job failed: drain: exit status 1</title>")
	assert.Equal(t, 3, strings.Count(svg, `stroke-dasharray="6 3"><title>`), "three operator commands")
	assert.Contains(t, svg, "concurrency limit 2")
	assert.Less(t, strings.Index(svg, "core-1 (core)"), strings.Index(svg, ">cn-1<"))
	assert.Less(t, strings.Index(svg, "headnode (headnode)"), strings.Index(svg, "core-1 (core)"))
}

// TestReportIsSelfContained: nothing in the page is fetched.
func TestReportIsSelfContained(t *testing.T) {
	page := reportHTML(reportPlan(t), time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	for _, bad := range []string{"<script", "src=", "href=", "@import", "url(", "<link"} {
		assert.NotContains(t, page, bad)
	}
	urls := regexp.MustCompile(`https?://[^"' <]+`).FindAllString(page, -1)
	for _, u := range urls {
		assert.Equal(t, "http://www.w3.org/2000/svg", u, "only the SVG namespace (a name, never fetched)")
	}
	assert.Contains(t, page, "<td>cn-2</td>")
}

// TestOfflineOver: the offline count never goes negative and ends at 0.
func TestOfflineOver(t *testing.T) {
	p := reportPlan(t)
	var tls []timeline
	for _, r := range p.Reboots {
		tls = append(tls, timelineOf(r, time.Now(), true))
	}
	steps := offlineOver(tls)
	peak := 0
	for _, s := range steps {
		assert.GreaterOrEqual(t, s.N, 0)
		peak = max(peak, s.N)
	}
	assert.Equal(t, 0, steps[len(steps)-1].N)
	assert.Equal(t, 2, peak)
}

// BenchmarkReportHTML: the report of a finished 100,000-server plan (400
// rows drawn, the offline chart over every server).
func BenchmarkReportHTML(b *testing.B) {
	const n = 100_000
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	fleet := make([]plan.Server, n)
	for i := range fleet {
		fleet[i] = plan.Server{UUID: fmt.Sprintf("s%06d", i), Hostname: fmt.Sprintf("cn%06d", i), Platform: "1", Core: i < 3, Headnode: i == 0}
	}
	p, _, err := plan.Create(fleet, plan.CreateOptions{UUID: "big", Target: "2", Select: plan.SelectAll, Concurrency: plan.Count(100)})
	if err != nil {
		b.Fatal(err)
	}
	p.State = plan.StateComplete
	for i := range p.Reboots {
		at := func(s int) *time.Time { v := t0.Add(time.Duration(i*6+s) * time.Second); return &v }
		r := &p.Reboots[i]
		r.Step, r.JobUUID, r.StartedAt, r.OperationalAt = plan.StepDone, "j", at(0), at(600)
		r.Phases = &plan.Phases{Drained: at(30), Off: at(90), On: at(95), Healthy: at(500)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(reportHTML(p, t0)) == 0 {
			b.Fatal("empty")
		}
	}
}

// TestReportWithoutPhases: a plan whose fleet reported no phases (an
// older executor) draws one neutral bar per reboot, never a phase it does
// not know; a reboot in flight runs to now.
func TestReportWithoutPhases(t *testing.T) {
	p := reportPlan(t)
	for i := range p.Reboots {
		p.Reboots[i].Phases = nil
	}
	p.State = plan.StateRunning
	t1 := time.Date(2026, 11, 23, 10, 9, 0, 0, time.UTC)
	p.Reboots[5].Step, p.Reboots[5].JobUUID, p.Reboots[5].StartedAt = plan.StepJob, "j5", &t1
	now := t1.Add(time.Minute)
	for _, r := range p.Reboots {
		tl := timelineOf(r, now, false)
		for _, s := range tl.segs {
			assert.Equal(t, phUnknown, s.ph, "%s", r.ServerHostname)
		}
	}
	tl := timelineOf(p.Reboots[5], now, false)
	require.Len(t, tl.segs, 1)
	assert.True(t, tl.open)
	assert.Equal(t, now, tl.segs[0].end)
	assert.Contains(t, reportSVG(p, now), "reboot (phases not reported)")
}

// TestReportNoPowerOffBarWithoutEvidence: a reboot that failed after its
// drain with no power-off ever confirmed (its BMC refused every login)
// draws no "power off" bar: the report shows as powered off only what the
// job's evidence says was (issue 38, point 16; old code: a "power off"
// bar ran from the drain to the failure).
func TestReportNoPowerOffBarWithoutEvidence(t *testing.T) {
	p := reportPlan(t)
	t0 := *p.Reboots[3].StartedAt
	drained, failed := t0.Add(20*time.Second), t0.Add(400*time.Second)
	r := p.Reboots[3]
	r.Phases = &plan.Phases{Drained: &drained}
	r.CanceledAt = &failed
	r.Error = "reboot job failed: the power cycle did not start within 1h0m0s: authentication failed at the BMC"
	tl := timelineOf(r, failed.Add(time.Hour), true)
	require.Len(t, tl.segs, 2)
	assert.Equal(t, phDrain, tl.segs[0].ph)
	assert.Equal(t, phNotOff, tl.segs[1].ph, "never powered off: not a power-off bar")
	for _, s := range tl.segs {
		assert.NotEqual(t, phOff, s.ph)
	}
	// In flight, the power-off is under way: drawn as such.
	r.Step, r.CanceledAt = plan.StepJob, nil
	tl = timelineOf(r, failed, true)
	assert.Equal(t, phOff, tl.segs[len(tl.segs)-1].ph)
}
