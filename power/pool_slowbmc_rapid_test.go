package power_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"pgregory.net/rapid"
)

// TestPoolStateMachineSlowOrDeadBlades drives a Pool against a chassis
// whose one Redfish service serves four blades on one login (MaxInFlight
// 1 or 2, drawn), with no host connected before the first step (the BMC
// may be slow from the start). The chassis is one of two kinds (drawn),
// and a monitor reads every host at once, a few times (in a drawn order):
//   - slow: every blade answers its system reads after slowRead (a BMC
//     busy with an inventory job), none dead;
//   - dead blades: the BMC answers at once, but at each sweep some blades
//     (drawn again, at least one left healthy) are dead: their system
//     reads hang until the client gives up. Their monitor waits
//     deadCaller; a healthy blade's check waits healthyCheck, shorter, so
//     that it fails if it waits for a dead read to end.
//
// Checked against the emulator's own count of system reads open at once
// (ground truth), over the whole run (the peak since the BMC was first
// asked): never more than MaxInFlight + 1 while every system is slow;
// every read of a host whose blade never died is answered (slow) or
// answered within healthyCheck while its neighbours hang (dead blades:
// liveness with the faults kept on); the Pool's own invariants. (A BMC
// slow a moment ago, whose blades then die, is not drawn: the overdue
// time stays raised by its slow answers, and a healthy read may wait
// that long.)
// slowOrDeadQuick is how many cases a quick run of
// TestPoolStateMachineSlowOrDeadBlades draws.
const slowOrDeadQuick = 6

func TestPoolStateMachineSlowOrDeadBlades(t *testing.T) {
	const (
		blades                   = 4
		slowRead                 = 300 * time.Millisecond
		healthyCheck, deadCaller = time.Second, 1500 * time.Millisecond
	)
	// Its cases take seconds of real time each (a sweep waits for the
	// slow answers, or for the dead blades' callers): a quick run draws
	// slowOrDeadQuick of them, a long one (REBOOTKIT_LONG) rapid's count.
	rapidcheck.CheckQuick(t, slowOrDeadQuick, func(t *rapid.T) {
		maxInFlight := rapid.IntRange(1, 2).Draw(t, "MaxInFlight")
		var hw []*fake.Power
		for range blades {
			hw = append(hw, fake.NewPower(time.Now, fake.PowerConfig{}))
		}
		b := redfishtest.NewBMC(time.Now, hw[0], "admin", bmcPassword)
		for i := 1; i < blades; i++ {
			b.AddSystem(fmt.Sprint(i+1), hw[i])
		}
		var mu sync.Mutex
		dead := map[string]bool{}
		slow := false
		var open, peak atomic.Int32 // system reads open at the BMC, and their peak
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id, ok := strings.CutPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/redfish/v1/Systems/"); ok && r.Method == http.MethodGet {
				n := open.Add(1)
				defer open.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				mu.Lock()
				d, s := dead[id], slow
				mu.Unlock()
				if d {
					<-r.Context().Done()
					return
				}
				if s {
					select {
					case <-time.After(slowRead):
					case <-r.Context().Done():
						return
					}
				}
			}
			b.ServeHTTP(w, r)
		}))
		defer func() { srv.CloseClientConnections(); srv.Close() }()
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		pool := power.NewPool(power.PoolConfig{Now: newClock().Now, MaxSessions: 2, ConnectTimeout: 3 * time.Second, CallTimeout: 6 * time.Second})
		defer pool.Close()
		ctrls := make([]power.Controller, blades)
		for i := range blades {
			cfg := redfish.Config{Endpoint: srv.URL, SystemID: fmt.Sprint(i + 1), Username: "admin", Password: bmcPassword,
				RootCAs: roots, MaxInFlight: maxInFlight}
			ctrls[i] = pool.Controller(fmt.Sprint("h", i+1), power.Target{BMC: srv.URL, Config: "chassis/" + cfg.SystemID, Login: "chassis",
				Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }})
		}
		everDead := make([]bool, blades)

		isSlow := rapid.Bool().Draw(t, "slow BMC")
		mu.Lock()
		slow = isSlow
		mu.Unlock()
		for step := range rapid.IntRange(1, 3).Draw(t, "sweeps") {
			deadNow := make([]bool, blades)
			if !isSlow {
				healthy := rapid.IntRange(0, blades-1).Draw(t, fmt.Sprint("healthy ", step))
				for i := range blades {
					deadNow[i] = i != healthy && rapid.Bool().Draw(t, fmt.Sprint("dead ", step, i))
					everDead[i] = everDead[i] || deadNow[i]
				}
			}
			mu.Lock()
			for i := range blades {
				dead[fmt.Sprint(i+1)] = deadNow[i]
			}
			mu.Unlock()
			// The monitor's sweep, in a drawn order.
			order := rapid.Permutation([]int{0, 1, 2, 3}).Draw(t, fmt.Sprint("order ", step))
			errs := make([]error, blades)
			var wg sync.WaitGroup
			for _, i := range order {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				switch {
				case deadNow[i]:
					ctx, cancel = context.WithTimeout(ctx, deadCaller)
				case !isSlow:
					ctx, cancel = context.WithTimeout(ctx, healthyCheck)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer cancel()
					_, errs[i] = ctrls[i].State(ctx)
				}()
				time.Sleep(5 * time.Millisecond)
			}
			wg.Wait()
			if isSlow {
				if n := peak.Load(); n > int32(maxInFlight+1) {
					t.Fatalf("sweep %d, every blade slow: %d system reads open at the BMC at once, MaxInFlight %d", step, n, maxInFlight)
				}
			}
			for i, err := range errs {
				if err != nil && !everDead[i] {
					t.Fatalf("sweep %d (slow %v, dead %v): host h%d, whose blade never died, failed: %v", step, isSlow, deadNow, i+1, err)
				}
			}
			if err := power.CheckPoolInvariants(pool); err != nil {
				t.Fatal(err)
			}
		}
	})
}
