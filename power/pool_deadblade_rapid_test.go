package power_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"pgregory.net/rapid"
)

// TestPoolStateMachineDeadBlades drives a Pool against a chassis whose
// one Redfish service serves three blades, some of them dead (their
// system reads hang until the client gives up) and repaired at random,
// and whose Systems collection may hang too while a blade is dead (a
// chassis manager that asks every blade to build it; drawn); each
// session lets one read at a time through (MaxInFlight 1: the dead
// blades outnumber the read places);
// the hosts share one login or each have their own, with sessions or
// basic auth (drawn). The faults stay on while the properties are
// checked: a dead blade is called at the same time as its neighbours.
// Checked against the emulator's own records:
//   - a host whose blade never died, credentials right, never fails a
//     call, even while a dead neighbour's login, join or read runs beside
//     it (a dead blade never delays a healthy neighbour beyond one login
//     attempt's deadline: its CallTimeout is longer than ConnectTimeout,
//     so it fails if it waits for the dead one's), nor backs off a
//     login that it uses (its call would then be refused);
//   - a read of a healthy host answers what its hardware says;
//   - never more than one login at a time to the BMC (and none with
//     basic auth);
//   - the Pool's own invariants (CheckPoolInvariants) after every step.
func TestPoolStateMachineDeadBlades(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		clk := newClock()
		const blades = 3
		var hw []*fake.Power
		for range blades {
			hw = append(hw, fake.NewPower(time.Now, fake.PowerConfig{}))
		}
		b := redfishtest.NewBMC(clk.Now, hw[0], "admin", bmcPassword)
		for i := 1; i < blades; i++ {
			b.AddSystem(fmt.Sprint(i+1), hw[i])
		}
		var mu sync.Mutex
		dead := map[string]bool{} // only dead blades
		hangList := rapid.Bool().Draw(t, "collection hangs while a blade is dead")
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1/Systems" && r.Method == http.MethodGet && hangList {
				mu.Lock()
				d := len(dead) > 0
				mu.Unlock()
				if d {
					<-r.Context().Done() // the collection hangs while a blade is dead
					return
				}
			}
			if id, ok := strings.CutPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/redfish/v1/Systems/"); ok && r.Method == http.MethodGet {
				mu.Lock()
				d := dead[id]
				mu.Unlock()
				if d {
					<-r.Context().Done() // a dead blade: its reads hang
					return
				}
			}
			b.ServeHTTP(w, r)
		}))
		defer func() { srv.CloseClientConnections(); srv.Close() }()
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		basic := rapid.Bool().Draw(t, "basic auth")
		oneLogin := rapid.Bool().Draw(t, "one login for all blades")
		// A dead blade's caller gives up after deadCaller (its login or
		// join goes on, ConnectTimeout); a healthy host's call has
		// CallTimeout, longer than one login attempt's deadline.
		const connectTimeout, callTimeout, deadCaller = time.Second, 3 * time.Second, 250 * time.Millisecond
		pool := power.NewPool(power.PoolConfig{Now: clk.Now, MaxSessions: blades + 1, ConnectTimeout: connectTimeout, CallTimeout: callTimeout})
		defer pool.Close()
		ctrls := make([]power.Controller, blades)
		for i := range blades {
			id := fmt.Sprint(i + 1)
			cfg := redfish.Config{Endpoint: srv.URL, SystemID: id, Username: "admin", Password: bmcPassword, BasicAuth: basic, RootCAs: roots, MaxInFlight: 1}
			login := "chassis"
			if !oneLogin {
				login = "blade-" + id
			}
			ctrls[i] = pool.Controller("h"+id, power.Target{BMC: srv.URL, Config: login + "/" + id, Login: fmt.Sprintf("%s/basic=%v", login, basic),
				Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }})
		}
		everDead := make([]bool, blades)
		setDead := func(i int, d bool) {
			mu.Lock()
			if d {
				dead[fmt.Sprint(i+1)] = true
			} else {
				delete(dead, fmt.Sprint(i+1))
			}
			mu.Unlock()
			everDead[i] = everDead[i] || d
		}
		isDead := func(i int) bool {
			mu.Lock()
			defer mu.Unlock()
			return dead[fmt.Sprint(i+1)]
		}

		t.Repeat(map[string]func(*rapid.T){
			"kill": func(t *rapid.T) {
				// At most blades-1 dead: one healthy host is left to check.
				n := 0
				for i := range blades {
					if isDead(i) {
						n++
					}
				}
				if n < blades-1 {
					setDead(rapid.IntRange(0, blades-1).Draw(t, "blade"), true)
				}
			},
			"repair": func(t *rapid.T) {
				setDead(rapid.IntRange(0, blades-1).Draw(t, "blade"), false)
			},
			"call": func(t *rapid.T) {
				i := rapid.IntRange(0, blades-1).Draw(t, "host")
				// The dead neighbours called at the same time, first (all
				// of them, or one).
				var others []int
				for j := range blades {
					if j != i && isDead(j) {
						others = append(others, j)
					}
				}
				var wg sync.WaitGroup
				if len(others) > 0 && rapid.Bool().Draw(t, "dead neighbour first") {
					if !rapid.Bool().Draw(t, "all dead neighbours") {
						others = []int{rapid.SampledFrom(others).Draw(t, "dead neighbour")}
					}
					for _, j := range others {
						wg.Add(1)
						go func() {
							defer wg.Done()
							ctx, cancel := context.WithTimeout(context.Background(), deadCaller)
							defer cancel()
							_, _ = ctrls[j].State(ctx)
						}()
					}
					time.Sleep(20 * time.Millisecond) // their connects or reads are under way
				}
				off := rapid.Bool().Draw(t, "fence")
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if isDead(i) {
					ctx, cancel = context.WithTimeout(ctx, deadCaller)
				}
				defer cancel()
				var err error
				var got power.State
				if off {
					err = ctrls[i].Off(ctx, power.ModeHard)
				} else {
					got, err = ctrls[i].State(ctx)
				}
				wg.Wait()
				if isDead(i) || everDead[i] {
					return // its own failures (and back-off) are its own
				}
				truth, _ := hw[i].State(context.Background())
				if err != nil {
					t.Fatalf("host h%d, whose blade and credentials work, failed (fence %v): %v", i+1, off, err)
				}
				if off && truth != power.StateOff {
					t.Fatalf("host h%d fenced, and its hardware reads %s", i+1, truth)
				}
				if !off && got != truth {
					t.Fatalf("host h%d read %s, its hardware is %s", i+1, got, truth)
				}
				if off {
					_ = hw[i].On(context.Background()) // powered back on out of band, for the next fence
				}
			},
			"advance": func(t *rapid.T) {
				clk.Advance(time.Duration(rapid.Int64Range(0, int64(70*time.Second)).Draw(t, "d")))
				power.Sweep(pool)
			},
			"": func(t *rapid.T) {
				if err := power.CheckPoolInvariants(pool); err != nil {
					t.Fatal(err)
				}
				if n := b.MostLoginsAtOnce(); n > 1 {
					t.Fatalf("the BMC answered %d logins at once", n)
				}
				if basic && b.Logins() > 0 {
					t.Fatalf("%d session logins with basic auth", b.Logins())
				}
			},
		})
	})
}
