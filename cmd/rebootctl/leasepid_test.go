package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeaseFreeJudgesPIDByStartTicks: a lease of this boot and PID
// namespace whose process runs is not free when the process's start
// matches the lease's PIDStart (a live executor), and is free when it
// does not (the PID reused); a lease that recorded no start is judged
// live while its PID runs.
func TestLeaseFreeJudgesPIDByStartTicks(t *testing.T) {
	ns := pidNamespace()
	start := pidStartTicks(os.Getpid())
	if ns == "" || start == "" {
		t.Skip("no /proc to judge by here")
	}
	host, _ := os.Hostname()
	l := lease{ID: "x", Host: host, PID: os.Getpid(), PIDNS: ns, PIDStart: start, At: time.Now()}
	require.False(t, l.free(host, ns), "a live executor's lease (its PID's start matches) was taken for free")
	l.PIDStart = start + "0"
	require.True(t, l.free(host, ns), "a lease whose PID now belongs to a process started at another time is not free")
	l.PIDStart = ""
	require.False(t, l.free(host, ns), "a lease that recorded no start was taken for free while its PID runs")
	l.PIDStart, l.PIDNS = start+"0", ns+"-other"
	require.False(t, l.free(host, ns), "a lease of another PID namespace was judged by its PID")
}
