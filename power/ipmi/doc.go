// Package ipmi implements power.Controller over IPMI v2.0 (RMCP+, the
// lanplus interface), with an RMCP+ client of its own written from the
// IPMI v2.0 specification: the few messages power control needs, and
// nothing else (package ipmitest's emulator is built on
// github.com/bougou/go-ipmi's server; this package does not use go-ipmi).
//
// Connect opens one session (cipher suite 3 unless told 17, at the
// operator privilege, the least that controls power, unless told
// otherwise): Get Channel Authentication Capabilities on a socket of its
// own, then Open Session, RAKP 1 to 4 and Set Session Privilege Level on
// the session's socket. It keeps the session: reading the power state
// costs one round trip (Get Chassis Status) and a power change two (read,
// Chassis Control; a hard power-off one, it does not read first). A
// session that lost an answer or that the BMC dropped (it reset, or
// evicted an idle session) is ended and opened again once, and the
// operation repeated once: every command this package sends is
// idempotent, but for a soft shutdown (a press of the power button on
// some BMCs), which is never repeated: its lost answer is busy. Nothing is sent between operations (no keep-alive, no
// goroutine): one session has one sender, so no answer can meet a request
// it was not sent for. A session idle for 30 s is ended (Close Session,
// not waited for) and a new one opened before the next operation, since
// BMCs evict idle sessions.
//
// What IPMI says and what this adapter does about it:
//   - Every datagram of an established session is checked before any of
//     it is parsed as an answer: an IPMI payload, authenticated with the
//     session's integrity key K1 (HMAC-SHA1-96 for suite 3,
//     HMAC-SHA256-128 for 17, over the whole packet from the
//     authentication type to the next header), encrypted with K2
//     (AES-CBC-128), for this session's ID, with a session sequence
//     number past the last one accepted and at most 32 past it (no replay,
//     no old answer reordered after a newer one), and then the answer to
//     the request waiting (network function, command, IPMI sequence
//     number). Anything else is dropped and counted (Controller.Dropped):
//     a man in the middle without the password can delay and drop, never
//     answer. A session that only ever receives forgeries ends busy, never
//     with a state.
//   - The RMCP+ Open Session exchange is not authenticated: a man in the
//     middle (or a BMC without the pinned suite) can answer with weaker
//     algorithms. After the Open Session Request the only acceptable
//     datagram is an RMCP+ Open Session Response to it (payload type 11h,
//     its message tag and console session ID) naming the pinned suite's
//     algorithms. One naming others, another payload type or IPMI v1.5
//     framing is a *DowngradeError (ErrDowngrade); a truncated or
//     malformed one, or one for another request, a *ProtocolError
//     (ErrProtocol); both are of class failed, and nothing more is sent.
//   - The BMC's RAKP 2 is checked with the password and its RAKP 4 with
//     the session key before the session is used. Neither is
//     authenticated until it verifies, so a RAKP 2 or 4 for this setup
//     that does not (a bad authentication code, a refusal status, a
//     truncated message) is dropped and counted, and the step waits on
//     for the BMC's, without sending its request again (the BMC would
//     count a wrong password twice); only when the step's time is up
//     ((Retries+1)×Timeout from its first send, however many such
//     answers come) with nothing verifying is it the step's error. Of
//     several, one that does not verify with the password or session
//     key (status 0, as the BMC answers a wrong password) is reported
//     before a refusal status, and that before a malformed message. A
//     setup that fails after RAKP 3 went out sends Close Session (not
//     waited for), since the BMC may hold the session active. A BMC key
//     (Kg) is not supported: such a BMC fails at RAKP 4, of class failed
//     (not ErrAuth: its RAKP 2 proved the password).
//   - A non-zero RMCP+ status code in the answer to Open Session, RAKP 1
//     or RAKP 3 is a *RefusedError (ErrRefused) naming the status and the
//     fix. A BMC without the pinned suite is of class failed (retrying
//     will not help), and the error lists the suites the BMC offers (Get
//     Channel Cipher Suites, outside a session: not authenticated, so at
//     most 8 requests, each suite once, at most 16) when it answers; no
//     free session slot is busy; a refused account is
//     power.ErrAuth.
//   - IPv6 literals (fd00::5 or [fd00::5]) are dialled bracketed.
//   - A user name over 16 bytes, a password over 20, or a cipher suite
//     other than 3 and 17 is ErrConfig at Connect, in a *power.Error of
//     class failed, before anything is sent.
//   - Get Chassis Status has one power bit. Any failure to read it (a
//     completion code, a timeout, session trouble) is power.StateUnknown
//     with a classified error, never a guess. IPMI has no "transitioning":
//     the bit follows the power-good line, which some BMCs read late, so a
//     read right after a change may show the state from before it (the
//     reboot package's decisions wait for evidence, not for one read).
//   - On is Chassis Control power up; Off hard is power down; Off soft is
//     soft shutdown (ACPI, "emulate a fatal overtemperature" in the spec).
//     Power down is sent whatever the state reads: a read of off may be a
//     stale echo of a host powered on a moment ago. Power up is sent
//     unless a fresh read says the host is on (also when the read fails).
//     A soft shutdown is sent only when a fresh read says the host is on:
//     when the read fails, Off soft returns that read's error (busy for
//     most) and sends nothing; when the first read says off, Off soft
//     succeeds and sends nothing (powering off a host that is off
//     succeeds; that read may be an echo, see below). A soft shutdown is
//     sent at most once per call of Off, never retransmitted: when its
//     answer is lost, Off returns busy and sends nothing more (it may
//     have been carried out, and a second one may be a press of the power
//     button; no read right after it can tell). Once a power-off went out, only
//     the BMC's authenticated answer is success: a power-off that the BMC
//     does not carry out (busy, no answer, a timeout) is an error even
//     when the state then reads off, since that read may be a
//     stale echo; of the refusals, only one authenticated with completion
//     code D5h ("not supported in present state") followed by a read of
//     off is success, in both modes. IPMI cannot say
//     whether the operating system honoured a soft shutdown: as with
//     Redfish, the soft path relies on the reboot decision's timeout and
//     fall back to hard (reboot.Config). Power up and power down set the
//     power, they never toggle it; a soft shutdown may be a press of the
//     power button on some BMCs, so Controller.TogglesOff reports it as
//     one (reboot.Toggler) and the reboot controller sends it only on an
//     On reading that cannot be an echo.
//   - A host that reads on gets no power up, and one that reads off gets
//     no soft shutdown (some BMCs press the power button for it). That read
//     may itself be an old echo: the reboot package sends a power-off again
//     when a later read says On, and falls back to hard.
//   - Completion codes: invalid command, not supported, parameter out of
//     range (and their kin) are power.ErrUnsupported; node busy, timeout,
//     out of space, "cannot provide response", firmware or SDR update in
//     progress, and session trouble (no answer, a session the BMC no
//     longer knows) are power.ErrBusy; everything else is power.ErrFailed.
//     A refused login (a RAKP 2 that does not verify with the password,
//     an RMCP+ status refusing the name, role or integrity check value,
//     Set Session Privilege Level refused) is power.ErrAuth, of class
//     failed; but once the BMC's RAKP 2 verified with the password, a
//     RAKP 3 refused or a RAKP 4 that does not verify is never ErrAuth
//     (class failed: a forgery on the network or a BMC key). Except after
//     a retransmit:
//     a session setup in which Open Session, RAKP 1 or RAKP 3 went out
//     twice and that failed at RAKP 3 or 4 (the race of a late answer to
//     the first, after the BMC's RAKP 2 proved the password) is tried once
//     more from the start, and if that fails the same way it is
//     power.ErrBusy, never ErrAuth.
//     Each power.Error carries the completion code or RMCP+ status
//     (Status) and its name (Message), never a credential.
//
// # The caller's duties
//
//   - Reach the BMC on a management network: IPMI v2.0 encrypts and
//     authenticates with the account's password (cipher suite 3 or 17), but
//     the protocol has known weaknesses (the RAKP hash can be brute-forced
//     offline); keep BMCs off shared networks.
//   - Give an account with at least the operator privilege (ask for
//     administrator with Config.Privilege only if the BMC demands it), and
//     pin a cipher suite the BMC supports (3 or 17).
//   - Do not trust one read after a change: decide on evidence over time
//     (the reboot package does, with Config.StaleReads).
//   - Close the Controller: BMCs have few session slots.
//
// # Guarantees
//
//   - No datagram is sent after an answer to Open Session that is not an
//     RMCP+ Open Session Response naming the pinned suite's algorithms.
//   - No state and no success is taken from a datagram that is not
//     authenticated and encrypted with the session's keys, or that was
//     accepted before (replay).
//   - No command is sent that can power a host on unless On was asked,
//     except a soft shutdown on a BMC that implements it as a press of the
//     power button; it is sent only when a fresh read says the host is on,
//     at most once per call of Off (TogglesOff reports it).
//   - A state that cannot be read is power.StateUnknown with an error,
//     never a guess.
//   - Every error of Connect and of a Controller is a *power.Error of a
//     class, with the completion code or status, and never contains the
//     password or the username.
//   - One operation at a time per Controller; every operation honours its
//     context while it waits for another.
package ipmi
