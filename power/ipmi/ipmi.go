package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rebootkit/rebootkit/internal/termsafe"
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
	// name over 16 bytes or a password over 20, a cipher suite other than
	// 3 and 17, an unknown privilege). Connect returns it in a
	// *power.Error of class failed: retrying will not help.
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
	// CipherSuite is the RMCP+ cipher suite: 3 (the default:
	// RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128, what ipmitool -C 3 uses)
	// or 17 (RAKP-HMAC-SHA256, HMAC-SHA256-128, AES-CBC-128). Those are
	// the suites that authenticate and encrypt every packet of the
	// session; any other is ErrConfig.
	CipherSuite int
	// Privilege is the session's privilege: PrivilegeOperator (the
	// default: the least privilege that controls power) or
	// PrivilegeAdministrator (for BMCs that demand it). Case-insensitive.
	Privilege string
	// Timeout is how long one UDP exchange waits for the answer (default
	// 1 s), and Retries how often it is sent again (default 2); a step
	// waits (Retries+1)×Timeout in all. A soft shutdown, and a RAKP
	// request after an answer that did not verify, are not sent again but
	// waited for as long.
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
	if _, ok := suites[c.CipherSuite]; !ok {
		return c, fmt.Errorf("%w: cipher suite %d: pin 3 or 17, the suites that authenticate and encrypt every packet", ErrConfig, c.CipherSuite)
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
// concurrent use; operations on one BMC run one at a time, and only the
// operation running sends on the session (there is no keep-alive: a
// session the BMC evicted while idle is opened again).
type Controller struct {
	cfg  Config
	st   suite
	addr string
	sem  chan struct{} // held by the running operation
	sess *session
	// dropped counts the datagrams refused by sessions that ended.
	dropped int
	// idle is idleReopen (shorter in tests).
	idle time.Duration
	// closed: Close was called.
	closed bool
	// gate is the Pool's login gate (power.ConnectInfo.Gate), or nil:
	// every login after Connect's goes through it.
	gate power.LoginGate
}

// Connect opens a session with the BMC. Every error is a *power.Error: a
// Config that cannot work is of class failed and matches ErrConfig.
func Connect(ctx context.Context, cfg Config) (*Controller, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, &power.Error{Op: "connect", Class: power.ClassFailed, Message: "the configuration cannot work", Err: err}
	}
	host := strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "["), "]")
	c := &Controller{cfg: cfg, st: suites[cfg.CipherSuite], addr: net.JoinHostPort(host, strconv.Itoa(cfg.Port)),
		sem: make(chan struct{}, 1), idle: idleReopen, gate: power.ConnectInfoFrom(ctx).Gate}
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

// Dropped returns how many datagrams the Controller's sessions refused
// since Connect: not authenticated with the session's key, for another
// session, replayed or out of the sequence window, not encrypted, or
// authentic but not the answer to the request waiting (a retransmit's
// second answer). On a quiet network it stays 0 or near.
func (c *Controller) Dropped() int {
	c.sem <- struct{}{}
	defer c.unlock()
	n := c.dropped
	if c.sess != nil {
		n += c.sess.dropped
	}
	return n
}

// connect opens a new session (the lock is held, or c is not shared yet).
// A setup that fails past RAKP 2 after a retransmit (errLateHandshake) is
// tried once more from the start.
func (c *Controller) connect(ctx context.Context) error {
	err := c.handshake(ctx)
	var pe *power.Error
	if errors.As(err, &pe) && pe.Err == errLateHandshake && ctx.Err() == nil {
		err = c.handshake(ctx)
	}
	return err
}

// relogin opens a new session inside a call (the lock is held): through
// the Pool's gate when a Pool gave one (one login at a time per BMC, and
// the credentials' back-off, which counts a refusal), as every login
// after Connect's.
func (c *Controller) relogin(ctx context.Context) (err error) {
	if c.gate != nil {
		done, gerr := c.gate(ctx)
		if gerr != nil {
			return gerr
		}
		defer func() { done(err) }()
	}
	return c.connect(ctx)
}

// errLateHandshake marks a session setup that failed past RAKP 2 after
// a retransmit; it is never ErrAuth.
var errLateHandshake = errors.New("the session setup failed at its last step after a retransmit " +
	"(a late answer from a slow BMC or a lossy network; the password was not refused)")

// errAfterVerified marks a session setup that failed at RAKP 3 or 4 after
// the BMC's RAKP 2 proved it knows the password; it is never ErrAuth.
var errAfterVerified = errors.New("the session setup failed after the BMC proved it knows the password " +
	"(RAKP 3 refused or RAKP 4 did not verify): a forged answer on the network, or a BMC key (Kg), which this client does not support")

func (c *Controller) privilege() uint8 {
	if c.cfg.Privilege == PrivilegeOperator {
		return privOperator
	}
	return privAdministrator
}

// handshake opens one session, start to end: Get Channel Authentication
// Capabilities on a socket of its own, then on a new socket Open Session,
// RAKP 1 to 4 and Set Session Privilege Level.
func (c *Controller) handshake(ctx context.Context) error {
	pl, err := dialLink(ctx, c.addr, c.cfg.Timeout, c.cfg.Retries)
	if err != nil {
		return c.classify("connect", err)
	}
	err = probe(ctx, pl, c.privilege())
	pl.close()
	c.dropped += pl.dropped
	if err != nil {
		return c.classify("connect", err)
	}
	l, err := dialLink(ctx, c.addr, c.cfg.Timeout, c.cfg.Retries)
	if err != nil {
		return c.classify("connect", err)
	}
	su := &setup{cfg: c.cfg, st: c.st, link: l}
	s, err := su.open(ctx)
	if err == nil {
		c.sess = s
		return nil
	}
	if s != nil {
		c.end(s)
	} else {
		l.close()
		c.dropped += l.dropped
	}
	return c.setupError(ctx, su, err)
}

// setupError turns a failed session setup into a *power.Error.
func (c *Controller) setupError(ctx context.Context, su *setup, err error) error {
	var (
		de *DowngradeError
		pe *ProtocolError
		re *RefusedError
	)
	late := su.resent && su.step == "RAKP 3" && ctx.Err() == nil
	switch {
	case errors.As(err, &de):
		return &power.Error{Op: "connect", Class: power.ClassFailed,
			Message: "refused a cipher suite downgrade (a man in the middle, or a BMC without the pinned suite: pin one it has)", Err: de}
	case errors.As(err, &pe):
		return &power.Error{Op: "connect", Class: power.ClassFailed, Message: "refused: the session setup broke the protocol", Err: pe}
	case late && (errors.As(err, &re) || errors.Is(err, errRAKP4) || errors.Is(err, errNoAnswer)):
		return &power.Error{Op: "connect", Class: power.ClassBusy, Err: errLateHandshake}
	case su.step == "RAKP 3" && (errors.As(err, &re) || errors.Is(err, errRAKP4)):
		// RAKP 2 verified with the password, so what fails after it is
		// no proof of a wrong password: a refusal is an unauthenticated
		// status (another sender's RAKP 3 may have made the BMC drop the
		// session), and a RAKP 4 that fails its integrity check may be a
		// forgery or a BMC key (Kg), which this client does not support.
		// Not ErrAuth (whose back-off would block a right password), and
		// whatever the caller's deadline made of the wait.
		return &power.Error{Op: "connect", Class: power.ClassFailed, Err: errAfterVerified}
	case errors.As(err, &re):
		if re.Step == "Open Session" && refusalKind(re.Status) == "suite" {
			if l, lerr := dialLink(ctx, c.addr, c.cfg.Timeout, 0); lerr == nil {
				re.Offered = listSuites(ctx, l)
				l.close()
			}
		}
		pwe := &power.Error{Op: "connect", Class: power.ClassFailed, Status: int(re.Status), Message: "session refused", Err: re}
		switch {
		case re.auth():
			pwe.Message = "authentication failed (username, password or privilege)"
			pwe.Err = fmt.Errorf("%w: %w", power.ErrAuth, re)
		case re.busy():
			pwe.Class = power.ClassBusy
		}
		return pwe
	case errors.Is(err, errRAKP2), errors.Is(err, errRAKP4), errors.Is(err, errPrivilege):
		return &power.Error{Op: "connect", Class: power.ClassFailed, Message: "authentication failed (username, password or privilege)",
			Err: fmt.Errorf("%w: %s", power.ErrAuth, c.redact(err.Error()))}
	}
	return c.classify("connect", err)
}

// end closes session s without waiting long for the BMC.
func (c *Controller) end(s *session) {
	s.abandon()
	c.dropped += s.dropped
}

// drop ends the current session without waiting for the BMC.
func (c *Controller) drop() {
	if c.sess == nil {
		return
	}
	c.end(c.sess)
	c.sess = nil
}

// idleReopen: a session unused for this long is ended and a new one
// opened before the next operation, rather than found dead by a timeout
// (BMCs evict sessions idle for 60 s by default, IPMI v2.0 section 6.12.15;
// this package sends no keep-alive).
const idleReopen = 30 * time.Second

// Close ends the session.
func (c *Controller) Close() error { return c.CloseContext(context.Background()) }

// CloseContext ends the session (Close Session, one try), giving up on
// the BMC's answer when ctx is done or after one Timeout (the socket is
// closed either way). Later operations fail with ErrClosed.
func (c *Controller) CloseContext(ctx context.Context) error {
	if err := c.lock(ctx, "close"); err != nil {
		return err
	}
	defer c.unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.sess == nil {
		return nil
	}
	s := c.sess
	c.sess = nil
	closeCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	err := s.closeSession(closeCtx)
	c.dropped += s.dropped
	if err != nil {
		return c.classify("close", err)
	}
	return nil
}

// do runs f on the session (opening one if needed); on session trouble
// (anything but a completion code or the caller's context) it ends the
// session, opens a new one once and runs f again. Every f here is
// idempotent. A session that lost an answer is never used again: an
// answer withheld by someone on the network cannot come back later, since
// a new session has new keys.
func (c *Controller) do(ctx context.Context, op string, f func(*session) error) error {
	if c.closed {
		return &power.Error{Op: op, Class: power.ClassFailed, Message: "the controller was closed", Err: ErrClosed}
	}
	if c.sess != nil && time.Since(c.sess.lastAnswer) > c.idle {
		c.drop()
	}
	// sentAny: an attempt of this call sent a datagram; last: the error
	// of the attempt before this one.
	sentAny := false
	var last error
	for attempt := 0; ; attempt++ {
		if c.sess == nil {
			if err := c.relogin(ctx); err != nil {
				if attempt == 0 {
					// Nothing of this call went out.
					return notSent(op, c.classify(op, err))
				}
				if op == "state" {
					return err // a read: nothing it sent changed anything
				}
				// A command went out on the first session and its answer
				// was lost: its outcome stands (it may have been carried
				// out); the failed login is told, not matched (this
				// command was tried: not ErrBackoff's "not tried").
				return c.classify(op, fmt.Errorf("%w; no new session to repeat it on: %s", last, c.redact(err.Error())))
			}
		}
		sess, sentBefore := c.sess, c.sess.sent
		err := f(sess)
		sentAny = sentAny || sess.sent != sentBefore
		if err == nil {
			return nil
		}
		var ce completionError
		if errors.As(err, &ce) {
			return c.classify(op, err)
		}
		if errors.Is(err, errUnsent) {
			return err // f sent nothing: the session stays
		}
		if ctx.Err() != nil && !sentAny {
			// The call ended before f sent a datagram (a deadline gone
			// by during a pause): nothing went out, and the session
			// stays.
			return notSent(op, c.classify(op, err))
		}
		c.drop()
		if ctx.Err() != nil || attempt > 0 || errors.Is(err, errNoRepeat) {
			return c.classify(op, err)
		}
		last = err
	}
}

// notSent marks err (classified: it holds a *power.Error), the error of
// a call that sent nothing (no session could be opened, or the state it
// needs could not be read), with power.ErrNotSent: it certainly changed
// nothing.
func notSent(op string, err error) error {
	var pe *power.Error
	if !errors.As(err, &pe) {
		return &power.Error{Op: op, Class: power.ClassBusy, Message: "not sent", Err: power.ErrNotSent}
	}
	return &power.Error{Op: pe.Op, Class: pe.Class, Status: pe.Status, Message: pe.Message, Err: fmt.Errorf("%w: %w", power.ErrNotSent, pe)}
}

// errUnsent marks an error of f that sent nothing (its check refused
// the command): do returns it as it is and keeps the session.
var errUnsent = errors.New("ipmi: not sent")

// errNoRepeat marks an error of f that do must not repeat f after, on a
// new session or at all (a soft shutdown whose answer was lost).
var errNoRepeat = errors.New("ipmi: not repeated")

// State reads the power bit (Get Chassis Status, one round trip).
func (c *Controller) State(ctx context.Context) (power.State, error) {
	if err := c.lock(ctx, "state"); err != nil {
		return power.StateUnknown, err
	}
	defer c.unlock()
	return c.readState(ctx)
}

// chassisOn sends Get Chassis Status and returns its power bit (IPMI
// v2.0 table 28-3: bit 0 of the current power state).
func chassisOn(ctx context.Context, s *session) (bool, error) {
	d, err := s.command(ctx, netFnChassis, cmdChassisSts, nil)
	if err != nil {
		return false, err
	}
	if len(d) < 3 {
		return false, fmt.Errorf("the answer to Get Chassis Status has %d data bytes, at least 3 are due", len(d))
	}
	return d[0]&0x01 != 0, nil
}

func (c *Controller) readState(ctx context.Context) (power.State, error) {
	var on bool
	err := c.do(ctx, "state", func(s *session) error {
		var err error
		on, err = chassisOn(ctx, s)
		return err
	})
	if err != nil {
		return power.StateUnknown, err
	}
	if on {
		return power.StateOn, nil
	}
	return power.StateOff, nil
}

// Chassis Control commands (IPMI v2.0 table 28-4).
const (
	chassisPowerDown    = 0x00
	chassisPowerUp      = 0x01
	chassisHardReset    = 0x03
	chassisSoftShutdown = 0x05
)

// On powers the host on (Chassis Control power up), unless a fresh read
// says it is on (also when the read fails: power up never toggles).
func (c *Controller) On(ctx context.Context) error {
	return c.change(ctx, "on", power.StateOn, chassisPowerUp, nil)
}

// OnChecked powers the host on as On does, calling check after the state
// read and just before each sending of the Chassis Control, after any
// session opened for it (power.CheckedOner): if it refuses, nothing more
// is sent (and if a first sending lost its answer, the error says it
// may have been carried out and does not match power.ErrNotSent).
func (c *Controller) OnChecked(ctx context.Context, check func(context.Context) error) error {
	return c.change(ctx, "on", power.StateOn, chassisPowerUp, check)
}

var _ power.CheckedOner = (*Controller)(nil)

// Off powers the host off: hard is Chassis Control power down, sent
// whatever the state reads; soft is soft shutdown (ACPI), sent only when a
// fresh read says the host is on (a read that fails is returned as the
// error, and nothing is sent: some BMCs press the power button for it).
func (c *Controller) Off(ctx context.Context, m power.Mode) error {
	if m == power.ModeHard {
		return c.change(ctx, power.OpName(m), power.StateOff, chassisPowerDown, nil)
	}
	return c.change(ctx, power.OpName(m), power.StateOff, chassisSoftShutdown, nil)
}

// alreadyCodes are the completion codes a BMC gives a Chassis Control it
// refuses because the chassis already is in the state asked: "not
// supported in present state" (IPMI v2.0 table 5-2).
var alreadyCodes = map[completionError]bool{0xd5: true}

// change sends Chassis Control ctl for want; check, if set, is called
// after the state read, just before each sending (after any session do
// opens for it), and refusing it sends nothing more (power.CheckedOner).
func (c *Controller) change(ctx context.Context, op string, want power.State, ctl uint8, check func(context.Context) error) error {
	if err := c.lock(ctx, op); err != nil {
		return err
	}
	defer c.unlock()
	// Power up and power down set the power, they never toggle it: power
	// up is sent also when the state cannot be read (CEh), and power down
	// whatever the state reads, so that a fence is not held up by a BMC
	// that cannot tell (issue 24); a read of off may be a stale echo of a
	// host powered on a moment ago, and power down can power nothing on.
	// A power-on is skipped when the state reads on. A soft shutdown is
	// sent only when the state reads on: some BMCs implement it as a press
	// of the power button, which would power on a host that really is off
	// (the reboot decision falls back to hard), so neither a read of off
	// nor a failed read lets it go out.
	switch {
	case want == power.StateOn:
		if cur, err := c.readState(ctx); err == nil && cur == want {
			return nil
		}
	case ctl == chassisSoftShutdown:
		cur, err := c.readState(ctx)
		if err != nil {
			return c.unread(op, err)
		}
		if cur == want {
			return nil
		}
	}
	// lost: the error of the last Chassis Control that went out and got
	// no authenticated answer; softLost: a soft shutdown went out, its
	// answer was lost, and nothing more was sent.
	var lost error
	softLost := false
	// refused: the last Chassis Control was answered, authenticated, with
	// this completion code (0: not refused, or not answered).
	var refused completionError
	// checkErr: check refused the command (called just before each
	// sending, after any new session do opened for it: a login, after a
	// lost answer, whose answer may come late).
	var checkErr error
	err := c.do(ctx, op, func(s *session) error {
		refused = 0
		if check != nil {
			if checkErr = check(ctx); checkErr != nil {
				return fmt.Errorf("%w: %w", errUnsent, checkErr)
			}
		}
		var err error
		if ctl == chassisSoftShutdown {
			// Sent once, never retransmitted nor repeated on a new
			// session: a soft shutdown whose answer was lost may have
			// been applied, and some BMCs press the power button for it,
			// so a second could power on a host the first turned off. No
			// read taken now can tell (it may be an echo of the state
			// before the first): the caller decides on reads over time
			// (the reboot package sends a press only on an On reading
			// taken SoftTimeout + StaleReads after its last power-off).
			_, err = s.commandOnce(ctx, netFnChassis, cmdChassisCtl, []byte{ctl})
			if err != nil && (!errors.As(err, &refused) || unknownCodes[uint8(refused)]) {
				// No answer, or one saying the outcome is unknown
				// (C3h, CEh): it may have been carried out.
				softLost, lost = true, err
				return fmt.Errorf("%w: %w", errNoRepeat, err)
			}
			return err
		}
		_, err = s.command(ctx, netFnChassis, cmdChassisCtl, []byte{ctl})
		if !errors.As(err, &refused) {
			lost = err
		}
		return err
	})
	if checkErr != nil {
		if lost == nil {
			return power.CheckRefused(op, checkErr)
		}
		// The first Chassis Control went out and its answer was lost:
		// it may have been carried out; the check refused a second.
		return &power.Error{Op: op, Class: power.ClassBusy,
			Message: "the answer to the power-on was lost (" + c.redact(fmt.Sprint(lost)) + "); it may have been carried out, and its check refused sending it again", Err: checkErr}
	}
	if softLost {
		return &power.Error{Op: op, Class: power.ClassBusy,
			Message: "the answer to the soft shutdown was lost (" + c.redact(fmt.Sprint(lost)) + "); it may have been carried out, and a second one may be a press of the power button: nothing more was sent (read the state over time before sending another)"}
	}
	if err != nil && want == power.StateOff && alreadyCodes[refused] {
		// Some BMCs refuse a power-off of a chassis that is off, with an
		// authenticated completion code saying so: success if a fresh read
		// agrees. Never after busy, no answer or a timeout: the read may be
		// a stale echo of a host that runs (the caller retries and decides
		// on reads over time).
		if cur, rerr := c.readState(ctx); rerr == nil && cur == want {
			return nil
		}
	}
	return err
}

// unread is the error of a soft shutdown not sent because the state could
// not be read: of the read's class (busy for most), with its status.
func (c *Controller) unread(op string, err error) error {
	var pe *power.Error
	if !errors.As(err, &pe) {
		return notSent(op, c.classify(op, err))
	}
	return &power.Error{Op: op, Class: pe.Class, Status: pe.Status,
		Message: "no soft shutdown sent: the power state could not be read, and on some BMCs a soft shutdown presses the power button (retry, or power off hard)",
		Err:     fmt.Errorf("%w: %w", power.ErrNotSent, pe)}
}

// Completion codes by class (IPMI v2.0 table 5-2).
var (
	unsupportedCodes = map[uint8]bool{0xc1: true, 0xc2: true, 0xc9: true, 0xcc: true, 0xcd: true, 0xd5: true, 0xd6: true}
	busyCodes        = map[uint8]bool{0xc0: true, 0xc3: true, 0xc4: true, 0xc5: true, 0xce: true, 0xd0: true, 0xd1: true, 0xd2: true, 0xd3: true}
	// unknownCodes say the BMC has no answer for the command, not that it
	// refused it: C3h "timeout while processing command, response
	// unavailable", CEh "command response could not be provided". The
	// command may have been carried out (its outcome is unknown).
	unknownCodes = map[uint8]bool{0xc3: true, 0xce: true}
)

// classify turns an error of a session into a *power.Error without
// credentials.
func (c *Controller) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *power.Error
	if errors.As(err, &pe) {
		return err
	}
	var ce completionError
	if errors.As(err, &ce) {
		class := power.ClassFailed
		switch {
		case unsupportedCodes[uint8(ce)]:
			class = power.ClassUnsupported
		case busyCodes[uint8(ce)]:
			class = power.ClassBusy
		}
		return &power.Error{Op: op, Class: class, Status: int(ce), Message: ce.Error()}
	}
	var cause error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		cause = context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		cause = context.Canceled
	}
	// No completion code: the BMC did not answer, or not with an answer
	// authenticated for this session. Busy: the caller retries.
	return &power.Error{Op: op, Class: power.ClassBusy, Message: "no usable answer: " + c.redact(err.Error()), Err: cause}
}

// maxMessage bounds what is kept of an error text.
const maxMessage = 512

// redact removes the adapter's credentials and a peer's control
// characters (termsafe.Clean) from an error text, and bounds its length.
func (c *Controller) redact(s string) string {
	for _, secret := range []string{c.cfg.Password, c.cfg.Username} {
		if len(secret) >= 1 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	s = termsafe.Clean(s) // no control character of a peer's reaches an error
	if len(s) > maxMessage {
		s = s[:maxMessage] + "..."
	}
	return s
}

// Reset restarts the host without a power-off (power.Resetter): Chassis
// Control hard reset, sent only when a fresh read says the host is on
// (a failed read is returned as the error, and nothing is sent). It is
// sent once, never retransmitted nor repeated on a new session: a reset
// whose answer was lost may have been carried out, and a second would
// restart the host again; that outcome is busy, and nothing more is sent.
func (c *Controller) Reset(ctx context.Context) error {
	const op = "reset"
	if err := c.lock(ctx, op); err != nil {
		return err
	}
	defer c.unlock()
	cur, err := c.readState(ctx)
	if err != nil {
		return err
	}
	if cur != power.StateOn {
		return &power.Error{Op: op, Class: power.ClassBusy, Message: fmt.Sprintf("the state reads %s, not on: no reset sent", cur)}
	}
	var lost error
	err = c.do(ctx, op, func(s *session) error {
		_, err := s.commandOnce(ctx, netFnChassis, cmdChassisCtl, []byte{chassisHardReset})
		var refused completionError
		if err != nil && !errors.As(err, &refused) {
			lost = err
			return fmt.Errorf("%w: %w", errNoRepeat, err)
		}
		return err
	})
	if lost != nil {
		return &power.Error{Op: op, Class: power.ClassBusy,
			Message: "the answer to the hard reset was lost (" + c.redact(fmt.Sprint(lost)) + "); it may have been carried out: nothing more was sent",
			Err:     cause(lost)}
	}
	return err
}

// cause is context.DeadlineExceeded or context.Canceled if err is one,
// else nil.
func cause(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return context.Canceled
	}
	return nil
}

var _ power.Resetter = (*Controller)(nil)
