package ipmi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/rebootkit/rebootkit/power"
)

var _ power.Controller = (*Controller)(nil)

// Privilege levels for Config.Privilege.
const (
	PrivilegeOperator      = "OPERATOR"
	PrivilegeAdministrator = "ADMINISTRATOR"
)

// Errors.
var (
	// ErrConfig: the Config cannot work (no host, no credentials, a user
	// name over 16 bytes or a password over 20, cipher suite 0, an unknown
	// privilege). Retrying will not help.
	ErrConfig = errors.New("ipmi: invalid configuration")
	// ErrClosed: the Controller was closed.
	ErrClosed = errors.New("ipmi: controller closed")
)

// Config says how to reach one BMC.
type Config struct {
	// Host is the BMC's address: a name, an IPv4 address or an IPv6
	// literal (with or without brackets: fd00::5, [fd00::5]); Port its UDP
	// port (default 623).
	Host string
	Port int
	// Username and Password of a BMC account allowed chassis control. IPMI
	// carries at most 16 bytes of user name and 20 of password.
	Username, Password string
	// CipherSuite is the RMCP+ cipher suite (default 3: HMAC-SHA1,
	// HMAC-SHA1-96, AES-CBC-128, what ipmitool -C 3 uses; 17 is the SHA-256
	// one). Pin it: a BMC asked to negotiate may take about 10 s. Suite 0
	// (no authentication) is refused.
	CipherSuite int
	// Privilege is the session's privilege: PrivilegeOperator (the
	// default: the least privilege that controls power) or
	// PrivilegeAdministrator (for BMCs that demand it). Case-insensitive.
	Privilege string
	// Timeout is how long one UDP exchange waits for the answer (default
	// 1 s), and Retries how often it is sent again (default 2).
	Timeout time.Duration
	Retries int
}

// Lengths IPMI v2.0 carries (RAKP message 1; the 20-byte key of table
// 13-11).
const (
	maxUsername = 16
	maxPassword = 20
)

func (c Config) withDefaults() (Config, error) {
	if c.Host == "" {
		return c, fmt.Errorf("%w: no host", ErrConfig)
	}
	if c.Username == "" || c.Password == "" {
		return c, fmt.Errorf("%w: username and password are required", ErrConfig)
	}
	if len(c.Username) > maxUsername {
		return c, fmt.Errorf("%w: the user name is %d bytes long; IPMI allows at most %d", ErrConfig, len(c.Username), maxUsername)
	}
	if len(c.Password) > maxPassword {
		return c, fmt.Errorf("%w: the password is %d bytes long; IPMI v2.0 allows at most %d", ErrConfig, len(c.Password), maxPassword)
	}
	if c.Port == 0 {
		c.Port = 623
	}
	if c.CipherSuite == 0 {
		c.CipherSuite = 3
	}
	if c.CipherSuite < 1 || c.CipherSuite > 255 {
		return c, fmt.Errorf("%w: cipher suite %d", ErrConfig, c.CipherSuite)
	}
	switch strings.ToUpper(c.Privilege) {
	case "":
		c.Privilege = PrivilegeOperator
	case PrivilegeOperator, PrivilegeAdministrator:
		c.Privilege = strings.ToUpper(c.Privilege)
	default:
		return c, fmt.Errorf("%w: privilege %q", ErrConfig, c.Privilege)
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.Retries < 0 {
		c.Retries = 0
	} else if c.Retries == 0 {
		c.Retries = 2
	}
	return c, nil
}

// Controller is a power.Controller for one BMC over IPMI. It is safe for
// concurrent use; operations on one BMC run one at a time.
type Controller struct {
	cfg Config
	sem chan struct{} // held by the running operation
	cl  *client.Client
	// closed: Close was called.
	closed bool
}

// Connect opens a session with the BMC.
func Connect(ctx context.Context, cfg Config) (*Controller, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, sem: make(chan struct{}, 1)}
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) lock(ctx context.Context, op string) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &power.Error{Op: op, Class: power.ClassBusy, Message: "waiting for another operation on this BMC", Err: ctx.Err()}
	}
}

func (c *Controller) unlock() { <-c.sem }

// connect opens a new session (the lock is held, or c is not shared yet).
// A handshake that fails after the BMC's RAKP 2 proved the password (see
// lateHandshake) is tried once more from the start.
func (c *Controller) connect(ctx context.Context) error {
	err := c.handshake(ctx)
	var pe *power.Error
	if errors.As(err, &pe) && pe.Err == errLateHandshake && ctx.Err() == nil {
		err = c.handshake(ctx)
	}
	return err
}

// errLateHandshake marks a session setup that failed past RAKP 2 after
// a retransmit (lateHandshake); it is never ErrAuth.
var errLateHandshake = errors.New("the session setup failed at its last step after a retransmit " +
	"(a late answer from a slow BMC or a lossy network; the password was not refused)")

// lateHandshake reports whether a failed session setup is the race of a
// retransmit: a setup message (Open Session Request, RAKP 1 or RAKP 3)
// went out more than once (resent), and the setup got past RAKP 2
// (go-ipmi checks the BMC's RAKP 2 against the password before it sends
// RAKP 3) and failed in the answer to RAKP 3. A late answer to the first
// of two requests does that: the BMC made a new session or random for the
// second, and the console went on with the first's, so RAKP 4 does not
// match or the BMC refuses RAKP 3. Without a retransmit, such a failure
// keeps its class (a refusal in RAKP 4 is ErrAuth). go-ipmi formats these
// errors with %v: the text is matched.
func lateHandshake(err error, resent bool) bool {
	return resent && strings.Contains(err.Error(), "rakp3 failed")
}

// handshake opens one session, start to end.
func (c *Controller) handshake(ctx context.Context) error {
	host := strings.TrimSuffix(strings.TrimPrefix(c.cfg.Host, "["), "]")
	cl, err := client.NewClient(host, c.cfg.Port, c.cfg.Username, c.cfg.Password)
	if err != nil {
		return c.classify("connect", err)
	}
	// go-ipmi dials through d: the address joined properly (IPv6), and
	// every Open Session Response checked against the pinned suite.
	d := &guardDialer{addr: hostPort(host, c.cfg.Port), asked: c.cfg.CipherSuite, timeout: c.cfg.Timeout}
	cl.WithUDPProxy(d)
	cl.WithInterface(client.InterfaceLanplus)
	cl.WithCipherSuiteID(types.CipherSuiteID(c.cfg.CipherSuite))
	priv := types.PrivilegeLevelAdministrator
	if c.cfg.Privilege == PrivilegeOperator {
		priv = types.PrivilegeLevelOperator
	}
	cl.WithMaxPrivilegeLevel(priv)
	cl.WithTimeout(c.cfg.Timeout)
	cl.WithRetry(c.cfg.Retries)
	if err := cl.Connect(ctx); err != nil {
		// go-ipmi's Close ends the keep-alive and the socket whatever the
		// state of the handshake.
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
		_ = cl.Close(closeCtx)
		cancel()
		if ferr := d.failure(); ferr != nil {
			msg := "refused: the BMC's answer to Open Session was malformed"
			if errors.Is(ferr, ErrDowngrade) {
				msg = "refused a cipher suite downgrade (a man in the middle, or a BMC without the pinned suite: pin one it has)"
			}
			return &power.Error{Op: "connect", Class: power.ClassFailed, Message: msg, Err: ferr}
		}
		if lateHandshake(err, d.resent()) {
			return &power.Error{Op: "connect", Class: power.ClassBusy, Err: errLateHandshake}
		}
		return c.classify("connect", err)
	}
	if ferr := d.failure(); ferr != nil { // cannot happen: the conn fails every read after it
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
		_ = cl.Close(closeCtx)
		cancel()
		return &power.Error{Op: "connect", Class: power.ClassFailed, Message: "refused", Err: ferr}
	}
	c.cl = cl
	return nil
}

// drop ends the current session without waiting long for the BMC.
func (c *Controller) drop(ctx context.Context) {
	if c.cl == nil {
		return
	}
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	_ = c.cl.Close(closeCtx)
	cancel()
	c.cl = nil
}

// Close ends the session.
func (c *Controller) Close() error { return c.CloseContext(context.Background()) }

// CloseContext ends the session, giving up on the BMC's answer when ctx is
// done (the socket is closed either way). Later operations fail with
// ErrClosed.
func (c *Controller) CloseContext(ctx context.Context) error {
	if err := c.lock(ctx, "close"); err != nil {
		return err
	}
	defer c.unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.cl == nil {
		return nil
	}
	err := c.cl.Close(ctx)
	c.cl = nil
	if err != nil {
		return c.classify("close", err)
	}
	return nil
}

// do runs f on the session (opening one if needed); on session trouble
// (anything but a completion code or the caller's context) it opens a new
// session once and runs f again. Every f here is idempotent.
func (c *Controller) do(ctx context.Context, op string, f func(*client.Client) error) error {
	if c.closed {
		return ErrClosed
	}
	for attempt := 0; ; attempt++ {
		if c.cl == nil {
			if err := c.connect(ctx); err != nil {
				return err
			}
		}
		err := f(c.cl)
		if err == nil {
			return nil
		}
		if _, coded := types.IsResponseError(err); coded || ctx.Err() != nil || attempt > 0 {
			return c.classify(op, err)
		}
		c.drop(ctx) // the BMC may have forgotten the session: a new one
	}
}

// State reads the power bit (Get Chassis Status, one round trip).
func (c *Controller) State(ctx context.Context) (power.State, error) {
	if err := c.lock(ctx, "state"); err != nil {
		return power.StateUnknown, err
	}
	defer c.unlock()
	return c.readState(ctx)
}

func (c *Controller) readState(ctx context.Context) (power.State, error) {
	var on bool
	err := c.do(ctx, "state", func(cl *client.Client) error {
		res, err := cl.GetChassisStatus(ctx)
		if err != nil {
			return err
		}
		on = res.PowerIsOn
		return nil
	})
	if err != nil {
		return power.StateUnknown, err
	}
	if on {
		return power.StateOn, nil
	}
	return power.StateOff, nil
}

// On powers the host on (Chassis Control power up), unless a fresh read
// says it is on (also when the read fails).
func (c *Controller) On(ctx context.Context) error {
	return c.change(ctx, "on", power.StateOn, chassis.ChassisControlPowerUp)
}

// Off powers the host off: hard is Chassis Control power down, soft is
// soft shutdown (ACPI), each sent unless a fresh read says it is off (also
// when the read fails: none of them toggles).
func (c *Controller) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeHard {
		return c.change(ctx, power.OpName(m), power.StateOff, chassis.ChassisControlPowerDown)
	}
	return c.change(ctx, power.OpName(m), power.StateOff, chassis.ChassisControlSoftShutdown)
}

func (c *Controller) change(ctx context.Context, op string, want power.State, ctl chassis.ChassisControl) error {
	if err := c.lock(ctx, op); err != nil {
		return err
	}
	defer c.unlock()
	// Power up, power down and soft shutdown set the power, they never
	// toggle it: sent also when the state cannot be read (CEh), so that a
	// fence is not held up by a BMC that cannot tell (issue 24). A
	// power-off is sent even when the state reads off: that read may be a
	// stale echo of a host powered on a moment ago, and power down can
	// power nothing on. A power-on is skipped when the state reads on, and
	// so is a soft shutdown when it reads off: some BMCs implement soft
	// shutdown as a press of the power button, which would power on a host
	// that really is off (the reboot decision falls back to hard).
	if want == power.StateOn || ctl == chassis.ChassisControlSoftShutdown {
		if cur, err := c.readState(ctx); err == nil && cur == want {
			return nil
		}
	}
	sent := false
	err := c.do(ctx, op, func(cl *client.Client) error {
		if sent && ctl == chassis.ChassisControlSoftShutdown {
			// The first soft shutdown may have been applied although its
			// answer was lost, and the host may be off now: send it again
			// only after a fresh read on the new session says on (some
			// BMCs press the power button for it).
			res, err := cl.GetChassisStatus(ctx)
			if err != nil {
				return err
			}
			if !res.PowerIsOn {
				return nil
			}
		}
		sent = true
		_, err := cl.ChassisControl(ctx, ctl)
		return err
	})
	if err != nil && want == power.StateOff && power.Classify(err) != power.ClassFailed {
		// Some BMCs refuse a power-off of a chassis that is off.
		if cur, rerr := c.readState(ctx); rerr == nil && cur == want {
			return nil
		}
	}
	return err
}

// Completion codes by class (IPMI v2.0 table 5-2).
var (
	unsupportedCodes = map[types.CompletionCode]bool{
		types.CodeInvalidCommand: true, types.CodeInvalidCommandForLUN: true, types.CodeParameterOutOfRange: true,
		types.CodeRequestDataFieldInvalid: true, types.CodeIllegalCommand: true, types.CodeNotSupported: true,
		types.CodeSubFnDisabled: true,
	}
	busyCodes = map[types.CompletionCode]bool{
		types.CodeNodeBusy: true, types.CodeProcessTimeout: true, types.CodeOutOfSpace: true,
		types.CodeReservationCanceled: true, types.CodeCannotProvideResponse: true,
		types.CodeCannotProvideResponseSDRRInUpdate: true, types.CodeCannotProvideResponseFirmwareUpdate: true,
		types.CodeCannotProvideResponseBMCInitialize: true, types.CodeDestinationUnavailable: true,
	}
)

// classify turns a go-ipmi error into a *power.Error without credentials.
func (c *Controller) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if re, ok := types.IsResponseError(err); ok {
		cc := re.CompletionCode()
		class := power.ClassFailed
		switch {
		case unsupportedCodes[cc]:
			class = power.ClassUnsupported
		case busyCodes[cc]:
			class = power.ClassBusy
		}
		return &power.Error{Op: op, Class: class, Status: int(cc),
			Message: fmt.Sprintf("completion code %#02x (%s)", uint8(cc), c.redact(cc.String()))}
	}
	// go-ipmi does not always wrap it (it formats with %v): match its text.
	if isAuthFailure(err) {
		return &power.Error{Op: op, Class: power.ClassFailed, Message: "authentication failed (username, password or privilege)", Err: power.ErrAuth}
	}
	var cause error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		cause = context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		cause = context.Canceled
	}
	// No completion code: the BMC did not answer, or not within a session
	// it knows. Busy: the caller retries.
	return &power.Error{Op: op, Class: power.ClassBusy, Message: "no usable answer: " + c.redact(err.Error()), Err: cause}
}

// authStatuses are the RMCP+ status codes (IPMI v2.0 table 13-15) by
// which a BMC refuses the account: unauthorized role or privilege (0Ah),
// unauthorized name (0Dh), invalid integrity check value (0Fh: a RAKP
// message 3 made with another password).
var authStatuses = []types.RmcpStatusCode{
	types.RmcpStatusCodeUnauthorizedRoleOfPriLevel, types.RmcpStatusCodeUnauthorizedName,
	types.RmcpStatusCodeInvalidIntegrityCheckValue,
}

// isAuthFailure reports whether err says the BMC refused the credentials.
// go-ipmi formats its session-setup errors with %v, so the text is matched
// as well as the chain.
func isAuthFailure(err error) bool {
	if errors.Is(err, client.ErrRAKPAuthentication) || strings.Contains(err.Error(), client.ErrRAKPAuthentication.Error()) {
		return true
	}
	var se *types.RmcpStatusError
	if errors.As(err, &se) && slices.Contains(authStatuses, se.StatusCode()) {
		return true
	}
	for _, s := range authStatuses {
		if strings.Contains(err.Error(), types.NewRmcpStatusError(s).Error()) {
			return true
		}
	}
	return false
}

// maxMessage bounds what is kept of an error text.
const maxMessage = 512

func (c *Controller) redact(s string) string {
	for _, secret := range []string{c.cfg.Password, c.cfg.Username} {
		if len(secret) >= 1 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	if len(s) > maxMessage {
		s = s[:maxMessage] + "..."
	}
	return s
}
