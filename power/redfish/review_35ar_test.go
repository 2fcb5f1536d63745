package redfish_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/power"
)

// TestReview35ar_CheckWithoutPoolOutlivesClose (review 35ar; REVIEW.md
// "Cancel and end: nothing of it may start"; the brief: "CheckRefusal
// without a Pool", "the detached check context outliving Close"). A
// Controller with BasicAuth called with CallInfo{CheckRefusal: true}
// and no Check (no Pool: refused.go checkAlone): the system answers
// 401 and the SessionService read is slow. The caller leaves (its
// context ends), then closes the Controller and Close returns. The
// check, detached from the caller and from the Controller (bounded by
// checkTimeout only), goes on and sends the Systems collection read
// with the credentials after Close returned (ground truth: the requests
// the BMC served after Close). The Pool's own checks were made to end
// with its Close (review 35aq); a Controller's do not.
func TestReview35ar_CheckWithoutPoolOutlivesClose(t *testing.T) {
	rb := newRefusingBMC(t)
	ctx := context.Background()
	c, err := rb.connect(ctx)
	require.NoError(t, err)
	rb.deny.Store(true)
	var closed atomic.Bool
	var after atomic.Int64
	ssHeld := make(chan struct{}, 1)
	old := rb.srv.Config.Handler
	rb.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if closed.Load() {
			after.Add(1)
			t.Logf("served after Close: %s %s (Authorization sent: %v)", r.Method, r.URL.Path, r.Header.Get("Authorization") != "")
		}
		if r.URL.Path == "/redfish/v1/SessionService" {
			select {
			case ssHeld <- struct{}{}:
			default:
			}
			select {
			case <-r.Context().Done():
			case <-time.After(400 * time.Millisecond):
			}
		}
		old.ServeHTTP(w, r)
	})
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-ssHeld; cancel() }()
	_, err = c.State(power.WithCallInfo(cctx, power.CallInfo{CheckRefusal: true}))
	t.Logf("the call: %v", err)
	require.Error(t, err)
	require.NoError(t, c.Close())
	closed.Store(true)
	time.Sleep(time.Second)
	assert.Zero(t, after.Load(), "requests with the credentials served after the Controller's Close returned (its detached check)")
}
