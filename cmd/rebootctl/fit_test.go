package main

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/rebootkit/rebootkit/plan"
)

// TestWatchAt80ColumnsKeepsWhyItWaits: on an 80-column terminal, watch
// shows the whole reason the plan waits (issue 38, point 16; old code:
// each line was cut at the terminal's width, and the reason, last on the
// progress line after a 42-column bar and the counts, was cut off).
func TestWatchAt80ColumnsKeepsWhyItWaits(t *testing.T) {
	why := "waiting: outside the maintenance windows until Mon 2026-01-05 22:00 CET; reboot job of cn07 not created yet"
	var rs []plan.Reboot
	for i := range 50 {
		rs = append(rs, plan.Reboot{ServerUUID: string(rune('a' + i%26)), ServerHostname: "cn"})
	}
	v := plan.FullView(plan.Plan{UUID: "4f6c2a1e-9d0b-4c56-8e7a-1b2c3d4e5f60", State: plan.StateRunning, Concurrency: 5, Waiting: why, Reboots: rs})
	lines := fitWidth(render(v, nil, "", time.Now()), 80)
	for _, l := range lines {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 80, l)
	}
	joined := strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
	assert.Contains(t, joined, why, "the whole reason, over several lines:\n%s", strings.Join(lines, "\n"))
	assert.Equal(t, []string{"abc"}, fitWidth([]string{"abc"}, 0), "no width: as is")
	long := strings.Repeat("x", 200) // no space to break at: cut, never lost
	assert.Equal(t, long, strings.Join(strings.Fields(strings.Join(fitWidth([]string{long}, 80), "")), ""))
}
