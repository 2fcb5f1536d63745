package plan_test

import (
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// Create a plan for a small fleet, run it, and take the first decision:
// the headnode goes first, alone, whatever the concurrency.
func ExampleNext() {
	fleet := []plan.Server{
		{UUID: "s1", Hostname: "cn1", Platform: "20150801T000000Z"},
		{UUID: "s0", Hostname: "headnode", Platform: "20150801T000000Z", Headnode: true},
		{UUID: "s2", Hostname: "cn2", Platform: "20151001T000000Z"},
		{UUID: "s3", Hostname: "core1", Platform: "20150801T000000Z", Core: true},
	}
	p, warns, err := plan.Create(fleet, plan.CreateOptions{UUID: "p-1", Target: "20150901T000000Z",
		Select: plan.SelectAll, Concurrency: plan.Count(2), IgnoreWarnings: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, w := range warns {
		fmt.Println("warning:", w)
	}
	p, _ = plan.Run(p)
	up := plan.ServerObs{ServicesUp: true} // every server observed up
	obs := plan.Observations{HeadnodeServicesUp: true,
		Servers: map[string]plan.ServerObs{"s0": up, "s1": up, "s2": up, "s3": up}}
	p, acts := plan.Next(p, obs, fake.Epoch)
	for _, r := range p.Reboots {
		fmt.Printf("%-9s %s\n", r.ServerHostname, map[plan.Step]string{plan.StepPending: "pending"}[r.Step]+string(r.Step))
	}
	for _, a := range acts {
		fmt.Println("action:", a.Kind, a.Server)
	}
	fmt.Println(plan.Summarize(p, fake.Epoch.Add(time.Minute)).Line(8))
	// Output:
	// warning: cn2 (s2): downgrade: 20151001T000000Z -> 20150901T000000Z
	// headnode  job
	// core1     pending
	// cn1       pending
	// cn2       pending
	// action: create-job s0
	// [>>......] 0/4 done, 1 in flight, 0 failed, 3 left, ETA ?
}

// A Sunday window from 01:00 to 05:00 in Berlin lasts four hours, three
// on the night the clocks go forward, five on the night they go back.
func ExampleWindows_Periods() {
	w := &plan.Windows{TimeZone: "Europe/Berlin", Weekly: []string{"Sun 01:00-05:00"}}
	for _, day := range []time.Time{
		time.Date(2026, 3, 22, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC),
	} {
		ps, _ := w.Periods(day.Add(-2*time.Hour), day.Add(22*time.Hour))
		fmt.Println(ps[0].Start.UTC().Format("2006-01-02 15:04Z"), ps[0].End.Sub(ps[0].Start))
	}
	// Output:
	// 2026-03-22 00:00Z 4h0m0s
	// 2026-03-29 00:00Z 3h0m0s
	// 2026-10-24 23:00Z 5h0m0s
}
