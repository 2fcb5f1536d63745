package power

import (
	"context"
	"testing"
)

// TestCheckOfALeftCallerSendsNothing: a 401 that arrives after the
// caller's context ended (power/redfish's refusedHere asks all the same)
// gets VerdictUnknown at once, without a request (read is not run), and
// the call's note records it as asked and unknown: the Pool takes the
// refusal for the host's own, not the shared credentials'.
func TestCheckOfALeftCallerSendsNothing(t *testing.T) {
	p := NewPool(PoolConfig{})
	defer p.Close()
	cr := &creds{refs: 2}
	note := &checkNote{}
	p.mu.Lock()
	ci := p.callInfoLocked(cr, note)
	p.mu.Unlock()
	if !ci.CheckRefusal || ci.Check == nil {
		t.Fatalf("two hosts on the credentials: a check is asked for, got %+v", ci)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reads := 0
	v := ci.Check(ctx, func(context.Context) Verdict { reads++; return CredentialsRefused })
	p.mu.Lock()
	unknown, counted := note.unknownLocked(), note.countedLocked()
	p.mu.Unlock()
	if v != VerdictUnknown || reads != 0 || !unknown || counted || cr.checksStarted != 0 {
		t.Fatalf("verdict %v, reads %d, note unknown %v counted %v, checks started %d: want unknown, no read", v, reads, unknown, counted, cr.checksStarted)
	}
}
