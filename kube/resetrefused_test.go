package kube

import (
	"context"
	"fmt"
	"testing"

	"github.com/rebootkit/rebootkit/power"
)

// TestResetRefusedUnknownOutcomes: a reset whose answer does not say the
// BMC did nothing (no answer, a gateway's 502 or 504, IPMI completion
// codes 0xC3 and 0xCE) may have been carried out, so it is never counted
// as refused (a refused reset is sent again at once, a reset that may
// have landed is not); the list is power.Error.Answered's, shared with
// the reboot package, so the two cannot drift apart. Before this test the
// reset path kept its own list, without 0xCE.
func TestResetRefusedUnknownOutcomes(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{power.ErrNotSent, true},
		{power.ErrAuth, true},
		{context.DeadlineExceeded, false},
		{&power.Error{Op: "reset", Class: power.ClassBusy, Status: 409}, true},
		{&power.Error{Op: "reset", Class: power.ClassBusy, Status: 503}, true},
		{&power.Error{Op: "reset", Class: power.ClassFailed, Status: 500}, true},
		{&power.Error{Op: "reset", Class: power.ClassFailed, Status: 0xC1}, true},
		{&power.Error{Op: "reset", Class: power.ClassFailed, Status: 0}, false},
		{&power.Error{Op: "reset", Class: power.ClassBusy, Status: 502}, false},
		{&power.Error{Op: "reset", Class: power.ClassBusy, Status: 504}, false},
		{&power.Error{Op: "reset", Class: power.ClassBusy, Status: 0xC3}, false},
		{&power.Error{Op: "reset", Class: power.ClassFailed, Status: 0xCE}, false},
		{fmt.Errorf("reset host-1: %w", &power.Error{Op: "reset", Class: power.ClassFailed, Status: 0xCE}), false},
	}
	for _, c := range cases {
		if got := resetRefused(c.err); got != c.want {
			t.Errorf("resetRefused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
