package power_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"pgregory.net/rapid"
)

// emuHost is one host of the fleet the state machine drives.
type emuHost struct {
	name     string
	bmc      int    // index of its endpoint
	system   string // its ComputerSystem on that endpoint
	password string // what its Secret says now
}

// TestPoolStateMachineOnEmulator drives a Pool against Redfish emulators
// (issue 35): a chassis whose one service serves three systems (sessions
// expiring after a few requests, logins taking 8 ms) and a single-system
// BMC; each host's Secret is drawn right or wrong and corrected later;
// callers cancel during logins and calls; hosts are forgotten and come
// back; time passes. Checked after every step against the emulators' own
// counts, never against what the Pool says:
//   - a login refused for some credentials is followed by no other login
//     with the same credentials to that endpoint within AuthBackoff;
//   - never more than one login at a time to an endpoint;
//   - never more sessions open on an endpoint than MaxSessions;
//   - a call of a host whose credentials work, not cancelled by its
//     caller, never fails (refused for back-off or otherwise);
//   - once every host is forgotten, every session is logged out.
func TestPoolStateMachineOnEmulator(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		const maxSessions = 2
		authBackoff := 30 * time.Second
		clk := newClock()
		type endpoint struct {
			bmc  *redfishtest.BMC
			srv  *httptest.Server
			pool *x509.CertPool
		}
		var eps []endpoint
		for i, systems := range []int{3, 1} {
			b := redfishtest.NewBMC(clk.Now, fake.NewPower(time.Now, fake.PowerConfig{}), "admin", bmcPassword)
			for id := 2; id <= systems; id++ {
				b.AddSystem(fmt.Sprint(id), fake.NewPower(time.Now, fake.PowerConfig{}))
			}
			if i == 0 {
				b.Quirks.SessionRequests = 6
				b.Quirks.LoginDelay = 8 * time.Millisecond
			}
			srv := b.StartTLS()
			defer srv.Close()
			cp := x509.NewCertPool()
			cp.AddCert(srv.Certificate())
			eps = append(eps, endpoint{b, srv, cp})
		}
		pool := power.NewPool(power.PoolConfig{Now: clk.Now, MaxSessions: maxSessions, CallTimeout: 5 * time.Second,
			ConnectTimeout: 5 * time.Second, AuthBackoff: authBackoff})
		closed := false
		defer func() {
			if !closed {
				_ = pool.Close()
			}
		}()
		hosts := []*emuHost{{"a", 0, "1", bmcPassword}, {"b", 0, "2", bmcPassword}, {"c", 0, "3", bmcPassword}, {"d", 1, "1", bmcPassword}}
		for _, h := range hosts {
			if rapid.Bool().Draw(t, "wrong at first "+h.name) {
				h.password = "stale-" + h.name
			}
		}
		target := func(h *emuHost) power.Target {
			ep := eps[h.bmc]
			cfg := redfish.Config{Endpoint: ep.srv.URL, SystemID: h.system, Username: "admin", Password: h.password, RootCAs: ep.pool}
			// The Config names the Secret's version, never the secret.
			return power.Target{BMC: ep.srv.URL, Config: "admin/" + redfishtest.Fingerprint("admin", h.password),
				Connect: func(ctx context.Context) (power.Controller, error) { return redfish.Connect(ctx, cfg) }}
		}

		t.Repeat(map[string]func(*rapid.T){
			"call": func(t *rapid.T) {
				h := rapid.SampledFrom(hosts).Draw(t, "host")
				cancelAfter := time.Duration(0)
				if rapid.IntRange(0, 3).Draw(t, "cancel?") == 0 {
					cancelAfter = time.Duration(rapid.IntRange(0, 12).Draw(t, "cancel after ms")) * time.Millisecond
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if cancelAfter > 0 {
					time.AfterFunc(cancelAfter, cancel)
				}
				_, err := pool.Controller(h.name, target(h)).State(ctx)
				if err != nil && h.password == bmcPassword && ctx.Err() == nil {
					t.Fatalf("host %s, whose credentials work, was refused: %v", h.name, err)
				}
				if err == nil && h.password != bmcPassword {
					t.Fatalf("host %s read its state with a wrong password", h.name)
				}
			},
			"secret": func(t *rapid.T) {
				h := rapid.SampledFrom(hosts).Draw(t, "host")
				if rapid.Bool().Draw(t, "right") {
					h.password = bmcPassword
				} else {
					h.password = fmt.Sprintf("stale-%s-%d", h.name, rapid.IntRange(0, 1).Draw(t, "which"))
				}
			},
			"forget": func(t *rapid.T) {
				pool.Forget(rapid.SampledFrom(hosts).Draw(t, "host").name)
			},
			"advance": func(t *rapid.T) {
				clk.Advance(time.Duration(rapid.Int64Range(0, int64(70*time.Second)).Draw(t, "d")))
			},
			"": func(t *rapid.T) {
				if err := power.CheckPoolInvariants(pool); err != nil {
					t.Fatal(err)
				}
				for i, ep := range eps {
					if n := ep.bmc.Sessions(); n > maxSessions {
						t.Fatalf("endpoint %d has %d sessions open, the bound is %d", i, n, maxSessions)
					}
					if n := ep.bmc.MostLoginsAtOnce(); n > 1 {
						t.Fatalf("endpoint %d answered %d logins at once", i, n)
					}
					log := ep.bmc.LoginLog()
					for j, r := range log {
						if r.OK {
							continue
						}
						for _, l := range log[j+1:] {
							if l.Credentials == r.Credentials && l.At.Sub(r.At) < authBackoff {
								t.Fatalf("endpoint %d refused credentials %s at %s and got them again %s later",
									i, r.Credentials, r.At.Format(time.TimeOnly), l.At.Sub(r.At))
							}
						}
					}
				}
			},
		})
		for _, h := range hosts {
			pool.Forget(h.name)
		}
		deadline := time.Now().Add(5 * time.Second)
		for _, ep := range eps {
			for ep.bmc.Sessions() > 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if n := ep.bmc.Sessions(); n > 0 {
				t.Fatalf("%d sessions left open after every host was forgotten", n)
			}
		}
		closed = true
		if err := pool.Close(); err != nil {
			t.Fatal(errors.Join(err))
		}
	})
}
