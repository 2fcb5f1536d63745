package power_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/stretchr/testify/assert"
)

// TestReview35w_BasicAuthWrongPasswordSlowBMCLoginStorm (issue 35 point 1
// and the Pool's doc: "a BMC with a wrong password sees at most two
// logins a minute with it"). A chassis of 8 blades, one account with
// basic auth, and a stale Secret for all of them (the password was
// rotated). The BMC does not answer a wrong password at once with 401: it
// holds the request (an anti-brute-force delay, as BMCs do after failed
// logins) past the Pool's ConnectTimeout. Both the Systems collection and
// the blade's system read then go unanswered, which power/redfish calls
// the host's own failure (power.AfterLogin, redfish.go discover): each
// host backs off alone, from Backoff (1 s), not AuthBackoff (30 s), and
// the login's back-off never starts. The monitor polls every blade every
// 5 s for 10 minutes. Ground truth: the requests carrying the wrong
// password that reached the BMC, per minute (the same wrong password
// answered 401 at once is logged for comparison).
func TestReview35w_BasicAuthWrongPasswordSlowBMCLoginStorm(t *testing.T) {
	run := func(hang bool) (perMinute, total int) {
		b := redfishtest.NewBMC(time.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
		const n = 8
		for i := 2; i <= n; i++ {
			b.AddSystem(strconv.Itoa(i), fake.NewPower(time.Now, fake.PowerConfig{}))
		}
		clk := newClock()
		good := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+bmcPassword))
		var mu sync.Mutex
		var wrong []time.Time
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a := r.Header.Get("Authorization"); a != "" && a != good {
				mu.Lock()
				wrong = append(wrong, clk.Now())
				mu.Unlock()
				if hang {
					<-r.Context().Done()
					return
				}
			}
			b.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		pool := newPool(t, clk, power.PoolConfig{ConnectTimeout: 300 * time.Millisecond, CallTimeout: time.Second})
		ctx := context.Background()
		var cs []power.Controller
		for i := 1; i <= n; i++ {
			cfg := redfish.Config{Endpoint: srv.URL, SystemID: strconv.Itoa(i), Username: "admin", Password: "stale", BasicAuth: true, RootCAs: roots}
			tg := power.Target{BMC: srv.URL, Config: strconv.Itoa(i) + "/basic", Login: "admin/stale",
				Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }}
			cs = append(cs, pool.Controller("h"+strconv.Itoa(i), tg))
		}
		for range 120 { // 10 minutes, every blade every 5 s
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Add(1)
				go func() { defer wg.Done(); _, _ = c.State(ctx) }()
			}
			wg.Wait()
			clk.Advance(5 * time.Second)
		}
		mu.Lock()
		defer mu.Unlock()
		return maxPerMinute(wrong), len(wrong)
	}
	pm401, tot401 := run(false)
	t.Logf("wrong password answered 401: %d requests with it in 10 min, at most %d in a minute", tot401, pm401)
	pm, tot := run(true)
	t.Logf("wrong password held unanswered: %d requests with it in 10 min, at most %d in a minute", tot, pm)
	// Each Connect sends the wrong password at most twice (the Systems
	// collection and the system's own read): two logins a minute are four
	// such requests.
	assert.LessOrEqual(t, pm, 4, "requests with the wrong password in one minute (a login storm: each host backs off alone)")
	assert.LessOrEqual(t, tot, 2*tot401+4, "requests with the wrong password in 10 min, against the same BMC answering 401")
}
