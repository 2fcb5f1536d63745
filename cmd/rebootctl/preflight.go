package main

// The dry run (plan create -n): a preflight of every server of the plan
// that changes no power and stores nothing (issue 27).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power"
)

// Preflight timeouts: every check is bounded.
const (
	dialTimeout  = 5 * time.Second
	loginTimeout = 30 * time.Second
	stateTimeout = 15 * time.Second
	// preflightParallel bounds the servers checked at once.
	preflightParallel = 16
)

// Check results in the table.
const (
	resOK      = "ok"
	resFail    = "FAIL"
	resSkipped = "-" // not checked: an earlier check failed
	resNone    = "none"
)

// preflightRow is one server's checks.
type preflightRow struct {
	Order    int    `json:"order"`
	Hostname string `json:"hostname"`
	Role     string `json:"role,omitempty"`
	BMC      string `json:"bmc"`
	Login    string `json:"login"`
	Power    string `json:"power"`
	Health   string `json:"health"`
	Drain    string `json:"drain"`
	// Problems say what would fail and what to do, in order.
	Problems []string `json:"problems,omitempty"`
}

func (r preflightRow) failed() bool { return len(r.Problems) > 0 }

// connectFunc opens a server's power controller (one login).
type connectFunc func(ctx context.Context, b inventory.BMC) (power.Controller, error)

// preflight checks every server of p, at most preflightParallel at once.
// Logins go through a power.Pool, the owner of BMC connections: one login
// per server (or one per BMC and credentials, shared), counted by its
// back-off, logged out once the server is checked.
func preflight(ctx context.Context, inv inventory.Inventory, p plan.Plan, connect connectFunc) []preflightRow {
	pool := power.NewPool(power.PoolConfig{ConnectTimeout: loginTimeout, CallTimeout: stateTimeout})
	defer pool.Close()
	rows := make([]preflightRow, len(p.Reboots))
	sem := make(chan struct{}, preflightParallel)
	var wg sync.WaitGroup
	for i, r := range p.Reboots {
		s, _ := inv.Server(r.ServerUUID)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rows[i] = checkServer(ctx, inv, s, pool, connect)
			rows[i].Order = i + 1
			rows[i].Role = role(r)
		}()
	}
	wg.Wait()
	return rows
}

func role(r plan.Reboot) string {
	switch {
	case r.Headnode:
		return "head"
	case r.Core:
		return "core"
	}
	return ""
}

// checkServer runs the checks of one server: the BMC answers, the login
// works (one login), the power state reads, the health check passes, the
// drain and undrain commands exist. It never changes the power.
func checkServer(ctx context.Context, inv inventory.Inventory, s inventory.Server, pool *power.Pool, connect connectFunc) preflightRow {
	row := preflightRow{Hostname: s.Hostname, BMC: resSkipped, Login: resSkipped, Power: resSkipped, Health: resFail, Drain: resOK}
	b := inv.BMCOf(s)
	problem := func(format string, a ...any) { row.Problems = append(row.Problems, fmt.Sprintf(format, a...)) }

	// The BMC answers, the login works, the power state reads: one login
	// (the connection's answer is the BMC's answer).
	if pass, err := b.Password(); err != nil {
		row.Login = resFail
		problem("no password: %v", strings.TrimPrefix(err.Error(), "inventory: "))
	} else {
		addr := b.Redfish + b.IPMI
		var mu sync.Mutex // the Pool may run Connect on its own goroutine
		var loginErr error
		loggedIn := false
		// The login's identity: a fingerprint of everything the login
		// uses (never the secret in clear), so a server with a wrong
		// password never backs off another's login to the same BMC, and
		// servers with the same credentials share one (issue 35).
		login := power.CredentialsKey(addr, b.Username, pass, b.CAFile, strconv.FormatBool(b.InsecureSkipVerify()),
			strconv.FormatBool(b.UseBasicAuth()), b.Privilege, strconv.Itoa(b.CipherSuite))
		defer pool.Forget(s.UUID) // checked: its session goes now, not at the end of the run
		ctrl := pool.Controller(s.UUID, power.Target{BMC: addr, Config: addr, Login: login, Connect: func(ctx context.Context) (power.Controller, error) {
			c, err := connect(ctx, b)
			mu.Lock()
			loginErr, loggedIn = err, err == nil
			mu.Unlock()
			return c, err
		}})
		sctx, cancel := context.WithTimeout(ctx, loginTimeout+stateTimeout)
		st, err := ctrl.State(sctx)
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if !loggedIn && loginErr == nil {
			loginErr = err // not even tried (or no answer in time)
		}
		switch {
		case !loggedIn && noAnswer(loginErr):
			row.BMC = resFail
			problem("the BMC at %s does not answer (%s): check the address and the network", addr, shortNetErr(loginErr))
		case !loggedIn && badCertificate(loginErr):
			row.BMC, row.Login = resOK, resFail
			problem("the BMC at %s has a certificate this machine does not trust: give its CA in ca_file (or insecure: true)", addr)
		case !loggedIn && loginRefused(loginErr):
			row.BMC, row.Login = resOK, resFail
			problem("the BMC refused the login of %q: check the username and the password (%s)", b.Username, passwordSource(b))
		case !loggedIn:
			row.BMC, row.Login = resOK, resFail
			problem("login to the BMC at %s failed: %v", addr, loginErr)
		case err != nil:
			row.BMC, row.Login, row.Power = resOK, resOK, resFail
			problem("the power state does not read: %v", err)
		case st == power.StateUnknown:
			row.BMC, row.Login, row.Power = resOK, resOK, resFail
			problem("the BMC reports the power state as unknown")
		default:
			row.BMC, row.Login, row.Power = resOK, resOK, st.String()
		}
	}

	// The health check passes (the server is up before its reboot).
	if err := inv.CheckHealth(ctx, s); err != nil {
		problem("the health check fails now (%s): the plan would count the server as down", shortNetErr(err))
	} else {
		row.Health = resOK
	}

	// The drain, undrain and reboot commands exist.
	if len(s.Drain) == 0 && len(s.Undrain) == 0 {
		row.Drain = resNone
	}
	for _, c := range []struct {
		name string
		argv []string
	}{{"drain", s.Drain}, {"undrain", s.Undrain}, {"reboot", s.Reboot}} {
		if len(c.argv) == 0 {
			continue
		}
		if _, err := exec.LookPath(c.argv[0]); err != nil {
			row.Drain = resFail
			problem("the %s command %q is not found on this machine", c.name, c.argv[0])
		}
	}
	return row
}

// noAnswer: nothing answered at the BMC's address (refused, unreachable,
// no answer in time).
func noAnswer(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	m := strings.ToLower(err.Error())
	for _, s := range []string{"connection refused", "no route to host", "i/o timeout", "network is unreachable", "no such host", "timed out", "timeout"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// badCertificate: the TLS handshake failed on the BMC's certificate.
func badCertificate(err error) bool {
	m := err.Error()
	return strings.Contains(m, "x509:") || strings.Contains(m, "certificate")
}

// loginRefused: the BMC answered and refused the credentials.
func loginRefused(err error) bool {
	if errors.Is(err, power.ErrAuth) {
		return true
	}
	var pe *power.Error
	if errors.As(err, &pe) && (pe.Status == 401 || pe.Status == 403) {
		return true
	}
	m := strings.ToLower(err.Error())
	return strings.Contains(m, "401") || strings.Contains(m, "unauthorized") || strings.Contains(m, "authentication failed")
}

// passwordSource says where the password comes from, never what it is.
func passwordSource(b inventory.BMC) string {
	if b.PasswordEnv != "" {
		return "password_env " + b.PasswordEnv
	}
	return "password_file " + b.PasswordFile
}

// shortNetErr drops the Go-ish prefixes of network errors ("dial tcp
// 127.0.0.1:1: connect: connection refused" becomes "connection refused").
func shortNetErr(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	m := err.Error()
	if i := strings.LastIndex(m, ": "); i >= 0 && (strings.Contains(m, "dial ") || strings.Contains(m, "Get \"")) {
		return m[i+2:]
	}
	return m
}

// writePreflight prints the table and the verdict; it reports whether
// anything would fail.
func writePreflight(w io.Writer, p plan.Plan, rows []preflightRow) bool {
	fmt.Fprintf(w, "dry run: %d server(s) into platform %s, concurrency %d; nothing was stored and no power was changed\n",
		len(p.Reboots), targetOf(p), p.Concurrency)
	hw := len("HOSTNAME")
	for _, r := range rows {
		hw = max(hw, len(r.Hostname))
	}
	fmt.Fprintf(w, "%-5s  %-*s  %-4s  %-4s  %-5s  %-5s  %-6s  %-5s  %s\n", "ORDER", hw, "HOSTNAME", "ROLE", "BMC", "LOGIN", "POWER", "HEALTH", "DRAIN", "WOULD FAIL BECAUSE")
	var bad []string
	for _, r := range rows {
		problem := ""
		if r.failed() {
			bad = append(bad, r.Hostname)
			problem = r.Problems[0]
		}
		line := fmt.Sprintf("%-5d  %-*s  %-4s  %-4s  %-5s  %-5s  %-6s  %-5s  %s", r.Order, hw, r.Hostname, r.Role, r.BMC, r.Login, r.Power, r.Health, r.Drain, problem)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		if len(r.Problems) > 1 {
			for _, more := range r.Problems[1:] {
				fmt.Fprintf(w, "%*s%s\n", 5+2+hw+2+4+2+4+2+5+2+5+2+6+2+5+2, "", more)
			}
		}
	}
	if len(bad) == 0 {
		fmt.Fprintf(w, "dry run: every check passed on the %d server(s)\n", len(rows))
		return false
	}
	fmt.Fprintf(w, "dry run: %d of %d server(s) would fail: %s\n", len(bad), len(rows), list(bad, 20))
	return true
}

func targetOf(p plan.Plan) string {
	if len(p.Reboots) == 0 {
		return "?"
	}
	return p.Reboots[0].BootPlatform
}

// dryRun is plan create -n: the plan as it would be created (warnings
// and other plans reported, never refused or stored), then the preflight
// of each server. Exit 0 when nothing would fail, else exitDryRun (or
// exitWarnings when only the warnings would refuse the real plan).
func (e *env) dryRun(inv inventory.Inventory, p plan.Plan, warns []plan.Warning, ignore bool, err error, chosen func() []plan.Reboot, existing []plan.Plan) int {
	if errors.Is(err, plan.ErrInOtherPlan) {
		fmt.Fprintf(e.errw, "rebootctl: dry run: the real plan would not be created: %s\n", inOtherPlans(chosen(), existing))
		return exitDryRun
	}
	if err != nil {
		return e.fail(fmt.Errorf("dry run: %s", explain(err, p.UUID)))
	}
	rows := preflight(e.ctx, inv, p, e.connect)
	noteSelf(inv, p, rows, thisMachine())
	if e.json {
		e.printJSON(map[string]any{"dry_run": true, "servers": rows, "warnings": warnStrings(warns), "concurrency": p.Concurrency})
	} else if writePreflight(e.out, p, rows) {
		return exitDryRun
	}
	for _, r := range rows {
		if r.failed() {
			return exitDryRun
		}
	}
	if len(warns) > 0 && !ignore {
		fmt.Fprintf(e.errw, "rebootctl: dry run: the real plan would not be created: %d warning(s) above (-W creates it anyway)\n", len(warns))
		return exitWarnings
	}
	return exitOK
}

// thisMachine is what the dry run knows of the machine it runs on, without
// name lookups: its hostname, machine ID and addresses.
func thisMachine() inventory.Machine {
	m := inventory.Machine{MachineID: machineID()}
	m.Hostname, _ = os.Hostname()
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				m.Addrs = append(m.Addrs, p.Addr())
			}
		}
	}
	return m
}

// noteSelf fails the row of the server the dry run's machine is, when it
// has no reboot command: an executor run there (the default) never powers
// it off through its BMC, so its reboot would fail at once.
func noteSelf(inv inventory.Inventory, p plan.Plan, rows []preflightRow, m inventory.Machine) {
	self, _ := inv.Identify(m)
	for i, r := range p.Reboots {
		s, ok := inv.Server(r.ServerUUID)
		if r.ServerUUID != self || !ok || len(s.Reboot) > 0 {
			continue
		}
		rows[i].Problems = append(rows[i].Problems, fmt.Sprintf("this machine is %s, and it has no reboot command: an executor run here never powers its own server off "+
			"through the BMC, so this reboot would fail at once; give %s a reboot command (reboot: [systemctl, reboot]) in the inventory, "+
			"or run the executor on another machine (--self none)", s.Hostname, s.Hostname))
	}
}
