package ipmitest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/bougou/go-ipmi/pkg/bmc"
	"github.com/bougou/go-ipmi/pkg/clock"
	"github.com/bougou/go-ipmi/pkg/hal"
	"github.com/bougou/go-ipmi/pkg/handlers"
	"github.com/bougou/go-ipmi/pkg/server"
	"github.com/bougou/go-ipmi/pkg/transport/udp"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
)

// IPMI chassis commands a BMC can be told to fail (FailNext).
const (
	Status    = "status"     // Get Chassis Status
	PowerUp   = "power-up"   // Chassis Control: power up
	PowerDown = "power-down" // Chassis Control: power down
	SoftOff   = "soft"       // Chassis Control: soft shutdown (ACPI)
	Cycle     = "cycle"      // Chassis Control: power cycle
	HardReset = "reset"      // Chassis Control: hard reset
)

// Config configures a BMC.
type Config struct {
	// Username and Password of the one account.
	Username, Password string
	// OperatorOnly limits the account to the operator privilege (enough
	// for chassis control); by default it may be administrator.
	OperatorOnly bool
	// CipherSuites offered (default 3 and 17).
	CipherSuites []uint8
	// Addr is the UDP address to listen on (default "127.0.0.1:0", a free
	// port; "[::1]:0" for IPv6).
	Addr string
	// SessionTimeout is how long an idle session lives (default 60 s, the
	// IPMI default).
	SessionTimeout time.Duration
}

// BMC is an IPMI v2.0 BMC (RMCP+, lanplus) on loopback UDP, built on
// github.com/bougou/go-ipmi's reference server, whose chassis is a Power:
// Get Chassis Status reports what the Power reports (with its lies: stale,
// flapping; a change under way shows as the state it leaves, since IPMI
// has only a power bit; a state it cannot tell is completion code CEh),
// and Chassis Control power up, power down and soft shutdown are the
// Power's On, hard Off and soft Off, with its lag, shutdown delay and
// faults. Faults come back as IPMI completion codes: busy as Node Busy
// (C0h), unsupported as Invalid Command (C1h), a timeout as Timeout (C3h),
// failed as Unspecified Error (FFh).
//
// It runs until Close. Restart simulates a BMC reset: every session is
// lost, the host's power is untouched. App Cold Reset and Warm Reset
// (ipmitool mc reset) are answered and leave the host's power and the
// sessions alone (use Restart for a reset that loses them). Not for
// production.
type BMC struct {
	Power *fake.Power
	cfg   Config

	mu       sync.Mutex
	addr     string
	srv      *server.Server
	sessions *bmc.SessionStore
	cancel   context.CancelFunc
	done     chan struct{}
	fail     map[string]ipmiFail
	commands []string // chassis commands received, in order
	packets  int      // UDP requests received
	logins   int      // RMCP+ Open Session Requests received
}

// countingConn counts the requests the BMC receives.
type countingConn struct {
	*udp.Conn
	b *BMC
}

func (c countingConn) ReadFrom(buf []byte) (int, net.Addr, error) {
	n, addr, err := c.Conn.ReadFrom(buf)
	if err == nil && n > 0 {
		c.b.mu.Lock()
		c.b.packets++
		// RMCP header (4 bytes), then RMCP+ (auth type 06h) with payload
		// type 10h: an RMCP+ Open Session Request, the start of a login.
		if n > 5 && buf[4] == 0x06 && buf[5]&0x3f == 0x10 {
			c.b.logins++
		}
		c.b.mu.Unlock()
	}
	return n, addr, err
}

// Packets returns how many UDP requests the BMC received so far: the
// round trips of its clients (retransmissions included).
func (b *BMC) Packets() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.packets
}

// Sessions returns how many RMCP+ sessions the BMC holds now, set up or
// being set up: each takes one of its few slots until Close Session or
// the session timeout.
func (b *BMC) Sessions() int {
	b.mu.Lock()
	st := b.sessions
	b.mu.Unlock()
	return st.Count()
}

// Logins returns how many logins (RMCP+ Open Session Requests, failed
// ones included) the BMC has received.
func (b *BMC) Logins() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logins
}

type ipmiFail struct {
	code    types.CompletionCode
	applied bool
}

// NewBMC starts an IPMI BMC for p on 127.0.0.1 (a free UDP port).
func NewBMC(p *fake.Power, cfg Config) (*BMC, error) {
	if cfg.Username == "" || cfg.Password == "" {
		return nil, errors.New("ipmitest: an IPMI BMC needs a username and a password")
	}
	if len(cfg.CipherSuites) == 0 {
		cfg.CipherSuites = []uint8{3, 17}
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 60 * time.Second
	}
	b := &BMC{Power: p, cfg: cfg, fail: map[string]ipmiFail{}}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
		b.cfg.Addr = cfg.Addr
	}
	if err := b.start(cfg.Addr); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *BMC) start(addr string) error {
	info := bmc.DeviceInfo{DeviceID: 0x20, DeviceRevision: 1, FirmwareMajor: 1, IPMIVersion: 0x20, ManufacturerID: 0x000157, ProductID: 1}
	var guid [16]byte
	copy(guid[:], "rebootkit-fake")
	suites := make([]types.CipherSuiteID, len(b.cfg.CipherSuites))
	for i, s := range b.cfg.CipherSuites {
		suites[i] = types.CipherSuiteID(s)
	}
	bm := bmc.New(info, guid, ipmiHAL{b}, bmc.WithClock(clock.Real), bmc.WithCipherSuites(suites), bmc.WithV15Disabled())
	bm.Sessions = bmc.NewSessionStoreWithOptions(clock.Real, bmc.WithInactivityTimeout(b.cfg.SessionTimeout))
	bm.Sessions.SetOnRemove(bm.SOL.DeactivateBySession)
	u, err := bm.Users.Add(2, b.cfg.Username)
	if err != nil {
		return fmt.Errorf("ipmitest: ipmi user: %w", err)
	}
	u.SetPassword([]byte(b.cfg.Password))
	u.Enabled = true
	maxPriv := bmc.PrivilegeLevelAdministrator
	if b.cfg.OperatorOnly {
		maxPriv = bmc.PrivilegeLevelOperator
	}
	u.ChannelAccess[1] = bmc.UserChannelAccess{MaxPrivilege: maxPriv, Enabled: true}
	var conn *udp.Conn
	for i := 0; ; i++ {
		conn, err = udp.Listen(addr, udp.WithReadTimeout(200*time.Millisecond))
		if err == nil || i >= 50 {
			break
		}
		time.Sleep(20 * time.Millisecond) // the old socket of a restart may linger
	}
	if err != nil {
		return fmt.Errorf("ipmitest: ipmi listen: %w", err)
	}
	srv := server.NewServer(bm, countingConn{conn, b}, server.WithCipherSuites(suites), server.WithV15Disabled(),
		server.WithHandlerRegistry(registry()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx)
	}()
	b.mu.Lock()
	b.addr, b.srv, b.cancel, b.done, b.sessions = conn.LocalAddr().String(), srv, cancel, done, bm.Sessions
	b.mu.Unlock()
	return nil
}

// registry is go-ipmi's standard handlers, with App Cold Reset and Warm
// Reset (IPMI v2.0 sections 20.2 and 20.3: reset the BMC, not the host)
// of our own: go-ipmi's call the chassis HAL's ColdReset and WarmReset,
// which are also its Chassis Control hard reset and soft shutdown, so they
// would power-cycle or soft-power-off the host.
func registry() *handlers.Registry {
	r := handlers.NewRegistry()
	handlers.RegisterAllHandlers(r)
	r.RegisterFunc(types.CommandColdReset, func(_ context.Context, hctx *handlers.HandlerContext, _ []byte) ([]byte, types.CompletionCode, error) {
		// A cold reset aborts a SOL parameter set in progress (table
		// 26-3), as go-ipmi's handler does; the host's power is left alone.
		hctx.BMC.SOL.Config().ResetVolatile()
		return nil, types.CodeOK, nil
	})
	r.RegisterFunc(types.CommandWarmReset, func(context.Context, *handlers.HandlerContext, []byte) ([]byte, types.CompletionCode, error) {
		return nil, types.CodeOK, nil
	})
	return r
}

// Addr returns the BMC's host:port.
func (b *BMC) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

// Host and Port return the two halves of Addr.
func (b *BMC) Host() string { h, _, _ := net.SplitHostPort(b.Addr()); return h }

// Port returns the UDP port.
func (b *BMC) Port() int {
	_, p, _ := net.SplitHostPort(b.Addr())
	n, _ := strconv.Atoi(p)
	return n
}

// Close stops the BMC.
func (b *BMC) Close() error {
	b.mu.Lock()
	srv, cancel, done := b.srv, b.cancel, b.done
	b.srv = nil
	b.mu.Unlock()
	if srv == nil {
		return nil
	}
	cancel()
	err := srv.Close()
	<-done
	return err
}

// Restart resets the BMC: it stops, loses every session, and listens again
// on the same port. The host's power is untouched.
func (b *BMC) Restart() error {
	addr := b.Addr()
	if err := b.Close(); err != nil {
		return err
	}
	return b.start(addr)
}

// FailNext makes the next command cmd (Status, PowerUp, ...) fail
// with IPMI completion code cc; with applied, a power command takes effect
// all the same (as when a BMC answers late or wrongly).
func (b *BMC) FailNext(cmd string, cc uint8, applied bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail[cmd] = ipmiFail{code: types.CompletionCode(cc), applied: applied}
}

// Commands returns the chassis commands received so far (Status,
// PowerUp, ...), in order, failed ones included.
func (b *BMC) Commands() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.commands...)
}

// take records cmd and returns its queued failure, if any.
func (b *BMC) take(cmd string) (ipmiFail, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.commands = append(b.commands, cmd)
	f, ok := b.fail[cmd]
	delete(b.fail, cmd)
	return f, ok
}

// completion maps a Power error to an IPMI completion code.
func completion(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return types.CodeProcessTimeout
	case power.Classify(err) == power.ClassBusy:
		return types.CodeNodeBusy
	case power.Classify(err) == power.ClassUnsupported:
		return types.CodeInvalidCommand
	}
	return types.CodeUnspecifiedError
}

// ipmiHAL is the go-ipmi hardware abstraction over the BMC's Power: a
// chassis and nothing else.
type ipmiHAL struct{ b *BMC }

func (h ipmiHAL) Chassis() hal.ChassisHAL { return ipmiChassis(h) }
func (ipmiHAL) Sensors() hal.SensorHAL    { return nil }
func (ipmiHAL) Storage() hal.StorageHAL   { return nil }
func (ipmiHAL) Network() hal.NetworkHAL   { return nil }
func (ipmiHAL) GPIO() hal.GPIOHAL         { return nil }
func (ipmiHAL) I2C() hal.I2CHAL           { return nil }
func (ipmiHAL) Console() hal.ConsoleHAL   { return nil }
func (ipmiHAL) Close() error              { return nil }

type ipmiChassis struct{ b *BMC }

// PowerState is Get Chassis Status: the Power's reported state. IPMI has
// only a power bit, so a change under way shows as the state it leaves,
// and a state the Power cannot tell (Report.Unknown) is answered with
// completion code CEh (cannot provide response) rather than a bit.
func (c ipmiChassis) PowerState(ctx context.Context) (bool, error) {
	if f, ok := c.b.take(Status); ok {
		return false, f.code
	}
	rd, err := c.b.Power.Read(ctx)
	if err != nil {
		return false, completion(err)
	}
	switch rd.State {
	case power.StateOn:
		return true, nil
	case power.StateTransitioning:
		return rd.Target == power.StateOff, nil
	case power.StateUnknown:
		// A BMC that cannot tell answers with an error code rather than
		// a bit it does not know.
		return false, types.CodeCannotProvideResponse
	}
	return false, nil
}

func (c ipmiChassis) command(cmd string, f func() error) error {
	if fl, ok := c.b.take(cmd); ok {
		if fl.applied {
			_ = f()
		}
		return fl.code
	}
	return completion(f())
}

// SetPower is Chassis Control power up (on) or power down (off, hard).
func (c ipmiChassis) SetPower(ctx context.Context, on bool) error {
	if on {
		return c.command(PowerUp, func() error { return c.b.Power.On(ctx) })
	}
	return c.command(PowerDown, func() error { return c.b.Power.Off(ctx, power.ModeHard) })
}

// WarmReset is what go-ipmi's handler calls for Chassis Control soft
// shutdown (ACPI): the Power's soft Off, which the operating system may
// take its time over or ignore (PowerConfig.SoftDelay, IgnoreSoft).
func (c ipmiChassis) WarmReset(ctx context.Context) error {
	return c.command(SoftOff, func() error { return c.b.Power.Off(ctx, power.ModeSoft) })
}

// PowerCycle (and hard reset) power the host off hard and on again.
func (c ipmiChassis) PowerCycle(ctx context.Context) error {
	return c.command(Cycle, func() error {
		if err := c.b.Power.Off(ctx, power.ModeHard); err != nil {
			return err
		}
		return c.b.Power.On(ctx)
	})
}

// ColdReset is what go-ipmi's handler calls for Chassis Control hard
// reset: the Power's Reset, a restart without a power-off (refused, with
// no effect, when the hardware is off).
func (c ipmiChassis) ColdReset(ctx context.Context) error {
	return c.command(HardReset, func() error { return c.b.Power.Reset(ctx) })
}

func (ipmiChassis) Identify(context.Context, uint8) error { return nil }
func (ipmiChassis) IntrusionState(context.Context) (bool, error) {
	return false, hal.ErrNotSupported
}
func (ipmiChassis) SetBootFlags(context.Context, *types.BootOptionParam_BootFlags) error {
	return hal.ErrNotSupported
}
func (ipmiChassis) GetBootFlags(context.Context) (*types.BootOptionParam_BootFlags, error) {
	return nil, hal.ErrNotSupported
}
func (ipmiChassis) SetBootInfoAcknowledge(context.Context, *types.BootOptionParam_BootInfoAcknowledge) error {
	return hal.ErrNotSupported
}
func (ipmiChassis) GetBootInfoAcknowledge(context.Context) (*types.BootOptionParam_BootInfoAcknowledge, error) {
	return nil, hal.ErrNotSupported
}
