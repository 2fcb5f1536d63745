// Package ipmi implements power.Controller over IPMI v2.0 (RMCP+, the
// lanplus interface), with github.com/bougou/go-ipmi.
//
// Connect opens one session (cipher suite 3 unless told otherwise, at the
// operator privilege, the least that controls power, unless told
// otherwise) and keeps it: reading the
// power state costs one round trip (Get Chassis Status) and a power change
// two (read, Chassis Control). A session that the BMC dropped (it reset,
// or evicted an idle session) is opened again once, and the operation
// repeated once: every command this package sends is idempotent.
//
// What IPMI says and what this adapter does about it:
//   - The RMCP+ Open Session exchange is not authenticated: a man in the
//     middle (or a BMC without the pinned suite) can answer with weaker
//     algorithms, and go-ipmi adopts whatever the answer names. This
//     adapter hands go-ipmi a dialer whose connection checks every Open
//     Session Response against the pinned cipher suite; one that names any
//     other authentication, integrity or confidentiality algorithm is
//     refused with a *DowngradeError (ErrDowngrade, class failed) naming
//     the suite asked and the one offered, and the connection sends
//     nothing more.
//   - IPv6 literals (fd00::5 or [fd00::5]) are dialled bracketed.
//   - A user name over 16 bytes or a password over 20 is ErrConfig at
//     Connect, before anything is sent.
//   - Get Chassis Status has one power bit. Any failure to read it (a
//     completion code, a timeout, session trouble) is power.StateUnknown
//     with a classified error, never a guess. IPMI has no "transitioning":
//     the bit follows the power-good line, which some BMCs read late, so a
//     read right after a change may show the state from before it (the
//     reboot package's decisions wait for evidence, not for one read).
//   - On is Chassis Control power up; Off hard is power down; Off soft is
//     soft shutdown (ACPI, "emulate a fatal overtemperature" in the spec).
//     Power down is sent whatever the state reads: a read of off may be a
//     stale echo of a host powered on a moment ago. Power up and soft
//     shutdown are sent unless a fresh read says the host is already in
//     the wanted state (also when the read fails). IPMI cannot say
//     whether the operating system honoured a soft shutdown: as with
//     Redfish, the soft path relies on the reboot decision's timeout and
//     fall back to hard (reboot.Config). None of these commands toggles
//     the power, so none can power on a host that is off unless On was
//     asked.
//   - A host that reads on gets no power up, and one that reads off gets
//     no soft shutdown (some BMCs press the power button for it). That read
//     may itself be an old echo: the reboot package sends a power-off again
//     when a later read says On, and falls back to hard.
//   - Completion codes: invalid command, not supported, parameter out of
//     range (and their kin) are power.ErrUnsupported; node busy, timeout,
//     out of space, "cannot provide response", firmware or SDR update in
//     progress, and session trouble (no answer, a session the BMC no
//     longer knows) are power.ErrBusy; everything else is power.ErrFailed.
//     A refused login (RAKP authentication code mismatch, RMCP+ status
//     unauthorized name, unauthorized role or invalid integrity check
//     value) is power.ErrAuth, of class failed. Except after a retransmit:
//     a session setup in which Open Session, RAKP 1 or RAKP 3 went out
//     twice and that failed at RAKP 3 or 4 (the race of a late answer to
//     the first, after the BMC's RAKP 2 proved the password) is tried once
//     more from the start, and if that fails the same way it is
//     power.ErrBusy, never ErrAuth.
//     Each power.Error carries the completion code (Status) and its name
//     (Message), never a credential: go-ipmi's own error text is redacted of
//     the username and password before it is kept.
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
//   - No datagram is sent on a session whose Open Session Response named
//     other algorithms than the pinned suite's.
//   - No command is sent that can power a host on unless On was asked
//     (there is no toggle in this package).
//   - A state that cannot be read is power.StateUnknown with an error,
//     never a guess.
//   - Errors are *power.Error values of a class, with the completion code,
//     and never contain the password or the username.
//   - One operation at a time per Controller; every operation honours its
//     context while it waits for another.
package ipmi
