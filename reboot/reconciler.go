package reboot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// Store errors. Implementations of HostStore return them (wrapped is fine).
var (
	// ErrNotFound: no host of that name.
	ErrNotFound = errors.New("reboot: host not found")
	// ErrConflict: the host changed since it was read (optimistic
	// concurrency); read again and decide again.
	ErrConflict = errors.New("reboot: host changed since it was read")
)

// Host is the stored host record the Reconciler reads and writes.
type Host struct {
	// Name identifies the host.
	Name string
	// Version is the store's opaque version of the record (a Kubernetes
	// resourceVersion); Update fails with ErrConflict unless it is current.
	Version string
	// Annotations, Online, Deprovisioned and Status are as in Observed.
	Annotations   map[string]string
	Online        bool
	Deprovisioned bool
	// Unprovisioned: the host carries no provisioned image (a
	// BareMetalHost available or ready: deprovisioned after its owner
	// released it, or never provisioned). The Reconciler does not read
	// it; remediation.RebootAPIHosts does, with Deprovisioned, to tell a
	// host its owner released from an Online false reading its owner may
	// take back. A store that cannot tell leaves it false.
	Unprovisioned bool
	Status        Status
	// StaleReads and OffSettle, if positive, replace the Reconciler's
	// Config.StaleReads and Config.OffSettle for this host: set them from
	// what is known of its BMC (see Config for how to choose them).
	StaleReads, OffSettle time.Duration
}

// HostStore reads and writes host records.
type HostStore interface {
	// Get returns the host or an error wrapping ErrNotFound.
	Get(ctx context.Context, name string) (Host, error)
	// Update writes h's Annotations and Status if h.Version is the current
	// version, and returns the record with its new version. It returns an
	// error wrapping ErrConflict if the version is stale. It must write
	// annotations and status atomically, or annotations first. It writes
	// nothing once ctx has ended: it checks ctx.Err() just before it
	// writes (or sends), not only ctx.Done(), since a Guard's context
	// (ClockBound) reports the end of its lease through Err before its
	// timer closes Done; a Guard fences a write only through that
	// context, so a leader paused between its Hold and its Update is
	// stopped only by the store (reboottest.Contract checks it).
	Update(ctx context.Context, h Host) (Host, error)
}

// HostWatcher is an optional interface of a HostStore that can tell when a
// host record changes (a Kubernetes informer can; fake.RebootHosts does).
// Client's Wait methods use it to answer as soon as the controller writes,
// instead of polling every Client.Poll.
type HostWatcher interface {
	// Watch returns a channel that receives a value after every change of
	// the named host's record made after Watch returned (changes may be
	// coalesced into one value), until ctx is done; then the channel is
	// closed. Sends must never block the store's writers (a buffer of one,
	// dropped when full, is right).
	Watch(ctx context.Context, name string) (<-chan struct{}, error)
}

// Result is what one Reconcile pass did and when to run the next.
type Result struct {
	// Decision is the decision applied.
	Decision Decision
	// PowerErr is the error of the power call made, if any; it is also
	// fed into the next pass.
	PowerErr error
	// RequeueAfter is when to reconcile this host again; zero with Requeue
	// false means only when the host changes.
	RequeueAfter time.Duration
	// Requeue asks for another pass at once (after a failed power call, so
	// that the next decision can act on the failure).
	Requeue bool
	// StateErr is the error of this pass's power state read, if any (the
	// pass went on with the state unknown): report it, e.g. as an event,
	// since a BMC that refuses the credentials for ever may never get a
	// power call that would fail.
	StateErr error
	// Busy says work of this controller's is under way for the host
	// after this pass: a reboot request or a pending reboot, a host held
	// off (under Online=false, a reboot whose power-off is known done
	// with only the bare annotation left waits for Online and is not
	// busy, unless its hold was broken: see the package doc),
	// Online=false whose power-off is not yet known done (the host
	// not yet read Off by a reading that cannot echo), Online true again
	// after an Online=false power-off whose power-on is not yet decided,
	// a power call made in this pass, a power-on decided and not yet
	// confirmed (Status.OnConfirmed: also under Online=false, where it
	// is never confirmed while the host is held off), a press that may
	// still be in effect, or a power-off or press whose answer was lost
	// or is still awaited that may still land. Every host is busy for
	// LostLanding + 2x SoftTimeout + StaleReads after this Reconciler's
	// first pass and after it begins to lead (Guard; GuardTerm): a call
	// of the process or leader before it may land that late, and nothing
	// it can read says which hosts it went to. For a Deprovisioned host
	// only a power-off or press of ours that may still land counts (and
	// a pending reboot in the record a failed pass read): it is not ours
	// to power on. It is false for an idle host (Online with no
	// Online=false power-off of ours to undo, or Online=false and known
	// off) with nothing of ours in flight, even one whose power state
	// cannot be read. It is set also when Reconcile fails: from the
	// record read (and what this Reconciler remembers of its calls) when
	// the pass failed after reading it (a power controller that cannot
	// be had, a write refused, ErrNotLeader), and true when the record
	// could not be read (unknown counts as busy). Loop gives it to the
	// Runner (Next.Busy, Next.Idle): a busy host dropped from the listing
	// is still reconciled until its work is done.
	Busy bool
}

// Reconciler applies decisions for hosts: it reads the host and its power
// state, decides, persists status and annotation removals, then makes the
// power call. It is safe for concurrent use on different hosts; callers must
// not reconcile one host from two goroutines at once (controller work queues
// guarantee this).
type Reconciler struct {
	// Hosts is the host store.
	Hosts HostStore
	// Power returns the power controller of a host.
	Power func(name string) (power.Controller, error)
	// Now is the controller's clock.
	Now func() time.Time
	// Config tunes decisions.
	Config Config
	// Logger, if set, receives one line per pass that does something.
	Logger *slog.Logger
	// Monotonic returns the time elapsed on a monotonic clock (one that
	// never jumps). nil uses the process's monotonic clock. It measures
	// the real time between the passes that saw a request and the Off
	// readings that answer it (Observed.SincePending, SinceRequest,
	// OffFor) and since this Reconciler last sent a power-on to a host, or
	// first read another leader's, or began to lead (QuietFor); what it
	// did before its first pass counts as unknown.
	Monotonic func() time.Duration
	// Guard, if set, fences every store write and power call by this
	// process's leadership (see Guard); a refused pass returns an error
	// wrapping ErrNotLeader and acts no more. It is also asked at the
	// start of every pass: until a Hold succeeds (and after one is
	// refused, unless a GuardTerm's Term says the lease is still held)
	// the Reconciler stands by, and counts the power calls the
	// status shows (another leader's) as sent at every pass, then as sent
	// when its leadership began (see doc.go, Evidence); a pass that read
	// its clocks before the leadership began (another host's pass made
	// the Hold that began it) is a standby pass too. With no Guard it
	// leads from its start.
	Guard Guard

	mu      sync.Mutex
	hosts   map[string]*memory
	started bool
	start   time.Duration
	// startWall is the wall clock read with start: a value stamped later
	// was written after the start (by a previous leader finishing a pass
	// late), so it is not known since the start.
	startWall time.Time
	// leading: with a Guard, its last Hold succeeded (see noteHold); a
	// Reconciler without a Guard leads from its start.
	leading bool
	leadAt  time.Duration // monotonic: when it last began to lead (its first Hold that succeeded)
	// began is when (monotonic) this Reconciler first read a host's
	// memory or othersMayLand was first asked (begun).
	began time.Duration
	begun bool
	// term is the GuardTerm's Term at the last Hold that succeeded
	// (termSet: one was given, non-zero).
	term    uint64
	termSet bool
}

// memory is what a Reconciler remembers of one host between passes; a
// restart loses it, which is always safe (see Observed).
type memory struct {
	last Call
	// readLost: the last power state read got no answer (readAnswered).
	readLost bool
	lastOn   time.Duration // monotonic time of the last power-on sent
	// offSent is the monotonic time a power-off of this Reconciler's
	// last returned (not refused before it reached the hardware), valid
	// while offSet: until a power-on of ours follows it, the host may go
	// off (a soft one's OS shutdown, a hard one's lag) after a pass read
	// it on, on this process's clock whatever the wall clock or the
	// record says (busy's shutdown bound).
	offSent time.Duration
	offSet  bool
	// onSince: a power-on of this Reconciler's was sent after offSent.
	onSince bool
	// sawOff: the last reading this Reconciler took that said On or Off
	// said Off (busy: an Online host so read is owed a power-on).
	sawOff bool
	// onLost is when (monotonic) the last power-on of this Reconciler's
	// whose answer was lost, or answered busy, returned: it may land until
	// LostLanding after (A5), whatever the record says by then
	// (callsMayLand).
	onLost lostAt
	off    offState
	forgot bool // Forget was called: nothing is known from before now
	// startPass: forgotten before this process's first pass of the host,
	// so its first pass is still that one: what a previous process may
	// have sent is counted as lost there (sinceOff).
	startPass bool
	known     bool // a pass has run since the Reconciler started
	// versions are the record's versions this Reconciler read or wrote
	// lately: a store that reads from a cache may show an older one again.
	versions [4]string
	// pend and req remember when (monotonic) values of PendingRebootSince
	// and LastRequestSeen were first known, the latest few.
	pend, req anchors
	// rew and lastRew do the same for RewriteSeen and LastRewriteSeen
	// (a value that moves from the second to the first keeps its time).
	rew, lastRew anchors
	// offRun holds the monotonic times of the current unbroken run of Off
	// readings, trimmed to the latest one at least OffSettle old and those
	// after it.
	offRun []time.Duration
	// unknownSince is when (monotonic) the current unbroken run of
	// unknown readings began; valid while unknownRun.
	unknownSince time.Duration
	unknownRun   bool
	// unsureSince is when (monotonic) the current unbroken run of
	// readings neither On nor Off (unknown or transitioning) began;
	// valid while unsureRun.
	unsureSince time.Duration
	unsureRun   bool
	// unsureWhole: this controller read On or Off before the current
	// run of unsure readings began (Observed.UnsureWhole).
	unsureWhole bool
	// saneSince is as unsureSince for readings On or Off
	// (Observed.SaneFor); valid while sawSane and not unsureRun.
	saneSince time.Duration
	sawSane   bool
	// own are the values of the status that show a power-off known to
	// this controller (see sinceOff).
	own ownValues
	// hardUnsupportedAt is Observed.HardUnsupportedAt.
	hardUnsupportedAt time.Time
	// busyPress: a press was answered busy (it may go on in the
	// background, LateAnswerer) since the last late answer of a power-off.
	// busy: a call was answered busy since the last late answer or the
	// last call answered in its pass; busyFor: the work those calls were
	// decided for (zero if unknown or not all the same): the call still
	// in flight, if any, was decided for it. All outlive Forget (see
	// forgotten): the call they describe may still answer.
	busyPress bool
	busy      bool
	busyFor   Work
	// busyWas is the power-off memory from before the first power-off
	// answered busy since the last late answer (set: busyWasSet), which a
	// late answer refusing it (notCarriedOut) restores, as sentOff undoes
	// a refusal answered in its pass. A power-off or power-on press
	// carried out since drops it (its memory must stay), and so does a
	// Forget (the new memory counts from the Forget).
	busyWas    offState
	busyWasSet bool
	// lost holds the returns of the last power-off and press whose answer
	// was lost, or that this controller did not see answered
	// (Config.LostLanding); it outlives Forget too.
	lost lostCalls
	// heard is what passes run while standing by (not holding the
	// leadership) read: see lead.
	heard heard
	// quiet: off.lastOff was taken from a Status.ActingSince (quietWall)
	// at quietMono (quietBy), so Observed.ActingSince gives it back
	// unchanged while lastOff is not later.
	quiet     bool
	quietMono time.Duration
	quietWall time.Time
	// checkActing: a leadership began on heard.by (lead): the first pass
	// after it counts what the status shows as sent then if its
	// ActingSince is not leadActing (another leader wrote since).
	checkActing bool
	leadActing  time.Time
}

// heard tells which kinds of call the statuses read while standing by
// showed (another leader's, whose calls may land until its lease ends).
//
// lostPress: one showed a LastPress this controller did not know (see
// sinceOff): a press it did not see answered.
//
// by: the latest such status says (Status.ActingSince, byWall) that
// every power-off and press it shows had returned by by (bySet).
type heard struct {
	off, press, on, lostPress bool
	bySet                     bool
	by                        time.Duration
	byWall                    time.Time
}

// offState is what a Reconciler remembers of its power-offs of one host
// (Observed.SinceOff, SincePress, PressOver).
type offState struct {
	// lastOff is the monotonic time of the last power-off sent that may
	// have been carried out; noOff: none can still be in effect (none
	// sent since the start, and the status read at the start showed none
	// under way before it).
	lastOff time.Duration
	noOff   bool
	// lastPress and noPress are the same for power-offs that may press
	// the power button.
	lastPress time.Duration
	noPress   bool
	// returned: the last press returned success, at pressDone; only then
	// can an Off reading show its shutdown over (a press that timed out
	// may be carried out later).
	returned  bool
	pressDone time.Duration
	// over: an unbroken run of Off readings taken StaleReads after
	// pressDone, OffSettle long, was seen; its last reading ended at
	// overAt.
	over   bool
	overAt time.Duration
	// inRun: the readings since runStart (monotonic) that qualify are an
	// unbroken run of Off readings (unknown ones aside).
	inRun    bool
	runStart time.Duration
}

// processStart anchors the default monotonic clock.
var processStart = time.Now()

func (r *Reconciler) monotonic() time.Duration {
	if r.Monotonic != nil {
		return r.Monotonic()
	}
	return time.Since(processStart)
}

// mem returns the host's memory; r.mu must be held.
func (r *Reconciler) mem(name string, m time.Duration, wall time.Time) *memory {
	if !r.started {
		r.started, r.start, r.startWall = true, m, wall
	}
	if !r.begun {
		r.begun, r.began = true, m
	}
	if r.hosts == nil {
		r.hosts = map[string]*memory{}
	}
	h := r.hosts[name]
	if h == nil {
		// A host first read once it leads: another leader's press or
		// power-on may land until its first Hold succeeded, not only
		// until its start.
		base := max(r.start, r.leadAt)
		h = newMemory(base)
		r.hosts[name] = h
	}
	return h
}

// Forget drops what the Reconciler remembers of a host, as a process
// restart would: the host counts as possibly powered on just now, its
// requests as seen just now, and its record as changed. (A restarted
// process knows less: its first pass counts from its start.) A power call
// of a pass still running when the host is forgotten, or sent by it
// after, is recorded in the new memory, as it would have been in the old:
// a power-on counts from its sending (or from the Forget, if later), a
// power-off from its return. (The status write of such a pass is noted
// only in the memory it began with: the new memory takes the record it
// reads next as changed and its values as known from then.)
func (r *Reconciler) Forget(name string) {
	m := r.monotonic()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[name] = r.mem(name, m, r.Now()).forgotten(m)
}

// current returns the memory the Reconciler holds for the host now: hm,
// unless Forget replaced it meanwhile (another goroutine may forget a host
// while a pass's power call runs; its outcome belongs in the new memory,
// where the next pass reads it:
// TestReview36j_ForgetDuringPressCountsItFromForget). r.mu must be held.
func (r *Reconciler) current(name string, hm *memory) *memory {
	if cur := r.hosts[name]; cur != nil {
		return cur
	}
	return hm
}

// newMemory returns the memory of a host first read by a controller that
// started (or began to lead) at base: a power-off, press or power-on may
// have been sent until then, and a call of unknown work may be in flight
// (a LateAnswerer's call made before the start: busy with busyFor zero,
// so that its late answer escalates nothing).
func newMemory(base time.Duration) *memory {
	return &memory{lastOn: base, off: offState{lastOff: base, lastPress: base}, busy: true}
}

// forgotten returns a new memory for a host whose memory h is forgotten
// at m (Forget): nothing is known from before m but what the calls still
// in flight need when their late answers come (LateAnswerer): whether one
// may be a press, and what it was decided for.
func (h *memory) forgotten(m time.Duration) *memory {
	return &memory{lastOn: m, off: offState{lastOff: m, lastPress: m}, forgot: true,
		startPass: !h.known && (!h.forgot || h.startPass),
		busyPress: h.busyPress, busy: h.busy, busyFor: h.busyFor, lost: h.lost,
		// A power-off of ours that may still turn the host off is kept:
		// a record deleted and created again does not stop its OS
		// shutdown (busy, shutdownMayRun).
		offSent: h.offSent, offSet: h.offSet, onSince: h.onSince, onLost: h.onLost}
}

// probe asks the Guard, if any, whether this process holds the
// leadership now, and notes the answer (noteHold). It acts on nothing: a
// refused probe makes the pass one of a standby, which reads and decides
// (its writes and calls are refused by their own Holds).
func (r *Reconciler) probe(ctx context.Context) {
	if r.Guard == nil {
		return
	}
	_, cancel, err := hold(ctx, r.Guard, "reboot: leadership")
	cancel()
	r.noteHold(err == nil)
}

// noteHold notes the outcome of a Guard Hold that just returned: a refusal
// makes this Reconciler stand by; the first success after standing by (or
// after its start) begins its leadership now, and every host's values read
// while it stood by count as sent now (memory.lead), if later: the Guard
// promises that the previous leader's calls, bounded by its lease, are
// over by then. A leadership begun also opens othersMayLand's window
// (from leadAt).
//
// With a GuardTerm, a refusal while its Term is still that of the last
// success is one inside the lease's margin: the lease is held (within
// the clock assumption, see GuardTerm), and the Reconciler does not
// stand by: its writes and calls are refused all the same, and values
// another writer wrote meanwhile still count as another's where it reads
// them (memory.own). A success in a Term other than the
// last success's begins a leadership even without a refusal seen in
// between: the lease was lost or lapsed meanwhile (a process paused
// between two passes).
func (r *Reconciler) noteHold(ok bool) {
	if r.Guard == nil {
		return
	}
	var term uint64
	tg, termed := r.Guard.(GuardTerm)
	if termed {
		term = tg.Term()
	}
	m := r.monotonic()
	r.mu.Lock()
	defer r.mu.Unlock()
	same := termed && term != 0 && r.termSet && term == r.term
	if !ok {
		if !same {
			r.leading = false
		}
		return
	}
	begin := !r.leading || termed && !same
	if termed {
		r.term, r.termSet = term, term != 0
	}
	if !begin {
		return
	}
	r.leading, r.leadAt = true, m
	for _, h := range r.hosts {
		h.lead(m)
		if !h.known {
			// Not read since it was created or forgotten: as a host first
			// read now (mem's leadAt base), and as Tracker.Leading.
			h.lastOn, h.off.lastOff, h.off.lastPress = max(h.lastOn, m), max(h.off.lastOff, m), max(h.off.lastPress, m)
		}
	}
}

// knownSinceStart reports whether a timestamp v read in a host's first
// pass since the start (first) may count as known since the start: only
// if it is not later than the wall clock at the start. A later one was
// written after the start, by someone who read the clock after it: a
// previous leader that paused between its read and its write across a
// handover, whose write the store's compare-and-swap accepts when this
// Reconciler has not written the host since. Counting it from the start
// would date the evidence it anchors late (issue 36); it counts from now.
func (r *Reconciler) knownSinceStart(first bool, v time.Time) bool {
	return first && !v.After(r.startWall)
}

// anchors remembers when (on the monotonic clock) this Reconciler first
// knew a few values of one timestamp.
type anchors struct {
	at   [4]time.Time
	mono [4]time.Duration
	n    int
}

// since returns how long ago (monotonic) v was first known; a value not
// remembered is known from m (from the Reconciler's start when it is the
// first value read after a restart).
func (a *anchors) since(v time.Time, m, start time.Duration, first bool) time.Duration {
	for i := 0; i < a.n; i++ {
		if a.at[i].Equal(v) {
			return m - a.mono[i]
		}
	}
	known := m
	if first {
		known = start
	}
	a.add(v, known)
	return m - known
}

func (a *anchors) add(v time.Time, m time.Duration) {
	for i := 0; i < a.n; i++ {
		if a.at[i].Equal(v) {
			return
		}
	}
	copy(a.at[1:], a.at[:len(a.at)-1])
	copy(a.mono[1:], a.mono[:len(a.mono)-1])
	a.at[0], a.mono[0] = v, m
	a.n = min(a.n+1, len(a.at))
}

// sinceOff returns Observed.SinceOff and SincePress. What a previous
// process sent is unknown, so the time since the start counts, unless the
// status read in the host's first pass shows that no power-off of a
// previous process can still be in effect: no reboot pending and the host
// not being powered off for Online=false (a power-off is sent only after a
// versioned write that shows one of them, and a reboot ends only once the
// host was off), and for presses no Status.LastPress either (Online may
// have flipped back while the OS still shuts down), nor a press a status
// of an older format may hide (Status.hidesPress). A LastPress later than
// the wall clock at the start (up to Config.Precision before it: it is
// truncated) was written after it (by a previous leader finishing late):
// its press counts from now. Otherwise a Status.ActingSince (acted.bound)
// says by when the previous processes' calls had returned: they count
// from then, if earlier than the start.
//
// In any later pass, a status that shows a power-off this controller did
// not write (a PendingRebootSince, OfflineSince or LastPress value it
// neither wrote nor knew: another leader's) counts as a power-off, and a
// LastPress (or a press an older format may hide) as a press, sent now:
// from when this controller first saw it, never earlier, and whatever it
// remembered of its own presses (their shutdown is no longer known over).
//
// In a pass run while standing by (standby: not holding the leadership),
// every power-off and press the status shows counts as sent now, at every
// such pass: another leader writes its value before it sends the call,
// which may land until its lease ends, after this read; unless the status
// has a Status.ActingSince: they returned by then (another leader clears
// it before its next call). lead then counts them as sent when this
// controller's leadership began, if later, or by that ActingSince, and
// the first pass after it checks that ActingSince is unchanged.
//
// Every power-off and press counted so (not seen answered by this
// controller) may have been lost: it is noted in h.lost as returned then,
// so that it counts as sent Config.LostLanding later (A5).
func (h *memory) sinceOff(first bool, st Status, m time.Duration, late, standby, onToggles bool, acted actedBound) (time.Duration, time.Duration) {
	o := &h.off
	if first && (!h.forgot || h.startPass) {
		noOff := !st.Pending() && st.OfflineSince.IsZero() && !acted.offlineOffRecent(st)
		// Every press (a power-off's, or a pressing power-on's) writes
		// Status.LastPress before it is sent (Decide): a status without
		// one shows no press a previous process may have sent, whatever
		// else is pending (TestReview36q_RestartPendingHardFenceWaitsLostLanding),
		// unless it is of an older format and may hide one
		// (Status.hidesPress).
		noPress := !st.showsPress(onToggles)
		if !h.forgot {
			o.noOff, o.noPress = noOff, noPress
			if late {
				o.lastPress = m
			} else if b, ok := acted.bound(st); ok {
				// Status.ActingSince: every power-off and press a
				// previous process sent had returned by b.
				h.quietBy(b, st.ActingSince)
			}
		}
		// What a previous process sent it did not see answered: it may
		// have been lost, and land LostLanding after it is counted (A5).
		// A memory forgotten before this first pass counts it from the
		// Forget (its lastOff, lastPress).
		h.lost.unseen(!noOff, false, o.lastOff)
		h.lost.unseen(false, !noPress, o.lastPress)
	}
	off, press := h.own.foreign(st, onToggles)
	off, press = off && !first, press && !first
	if h.checkActing && !standby {
		// The first pass after a leadership began on a bound
		// (memory.lead): a status whose ActingSince changed since was
		// written by another leader, whose calls it shows count from now.
		h.checkActing = false
		if !st.ActingSince.Equal(h.leadActing) {
			p := st.showsPress(onToggles)
			off, press = off || p || st.Pending() || !st.OfflineSince.IsZero() || acted.offlineOffRecent(st), press || p
		}
	}
	lostPress := press
	at := m // when the calls counted in this pass count as sent
	if standby {
		press = st.showsPress(onToggles)
		off = press || st.Pending() || !st.OfflineSince.IsZero() || acted.offlineOffRecent(st)
		h.heard.off, h.heard.press = h.heard.off || off, h.heard.press || press
		// A LastPress this controller wrote is its own press (noted lost
		// at its return if it was: sentOff), no press it did not see
		// answered: another leader's press writes its own, later,
		// LastPress before it is sent.
		lostPress = press && !h.own.wrotePress.has(st.LastPress)
		h.heard.lostPress = h.heard.lostPress || lostPress
		// The latest status read while standing by says by when the
		// calls it shows had returned, if it does (Status.ActingSince):
		// they count from then, not from this pass. Calls another leader
		// decides after this read clear it before they are sent: a later
		// pass, or the first once this controller leads (checkActing),
		// sees that.
		h.heard.by, h.heard.bySet = acted.bound(st)
		h.heard.byWall = st.ActingSince
		if h.heard.bySet && h.heard.by < at {
			at = h.heard.by
		}
	}
	// Another writer's calls: this controller did not see them answered
	// (A5).
	h.lost.unseen(off, lostPress, at)
	if off {
		o.noOff, o.lastOff = false, max(o.lastOff, at)
		if o.lastOff == at && at < m {
			h.quiet, h.quietMono, h.quietWall = true, at, st.ActingSince
		}
		if press && at > o.lastPress {
			*o = offState{lastOff: o.lastOff, lastPress: at}
		}
	}
	h.own.note(st)
	sinceOff, sincePress := m-o.lastOff, m-o.lastPress
	if o.noOff {
		sinceOff = math.MaxInt64
	}
	if o.noPress {
		sincePress = math.MaxInt64
	}
	return sinceOff, sincePress
}

// sawState notes a reading of state taken between the monotonic times m
// and after: Off readings taken StaleReads after the last press returned
// show the hardware off after it, so its shutdown is over, once their
// unbroken run (unknown readings do not break it) is OffSettle (settle)
// long, as the evidence rule asks (A1: a BMC may say Off up to OffSettle
// before the hardware is off).
func (o *offState) sawState(state power.State, m, after, stale, settle time.Duration) {
	if o.noPress || !o.returned || o.over {
		return
	}
	switch {
	case state == power.StateOff && m-stale >= o.pressDone:
		if !o.inRun {
			o.inRun, o.runStart = true, m
		}
		if m-o.runStart >= settle {
			o.over, o.overAt = true, after
		}
	case state != power.StateUnknown:
		o.inRun = false
	}
}

// seenVersion reports whether v was handled lately: read by a pass that
// applied its decision, or written.
func (h *memory) seenVersion(v string) bool {
	for _, x := range h.versions {
		if x == v && x != "" {
			return true
		}
	}
	return false
}

// noteVersion remembers v as handled.
func (h *memory) noteVersion(v string) {
	if h.seenVersion(v) {
		return
	}
	copy(h.versions[1:], h.versions[:len(h.versions)-1])
	h.versions[0] = v
}

// failedBusy is Result.Busy for a pass that read h and then failed,
// before it decided (d nil) or after deciding d: the stored record's work
// (storedBusy: what was written before still stands), the decision's
// (busy), or a call of ours that may still land.
func (r *Reconciler) failedBusy(name string, h Host, d *Decision) bool {
	cfg := r.Config.withDefaults().forHost(Observed{StaleReads: h.StaleReads, OffSettle: h.OffSettle})
	if storedBusy(h, cfg.Policy) {
		return true
	}
	m := r.monotonic()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.othersMayLand(m, cfg) {
		return true
	}
	hm := r.hosts[name]
	if d != nil {
		if hm == nil {
			hm = &memory{}
		}
		return busy(h, *d, hm, m, cfg)
	}
	return hm != nil && hm.mayChangeFor(h, cfg, m)
}

// Reconcile runs one pass for the named host.
func (r *Reconciler) Reconcile(ctx context.Context, name string) (Result, error) {
	h, err := r.Hosts.Get(ctx, name)
	if err != nil {
		// Nothing read: whether work is under way is unknown, and
		// unknown counts as busy (Result.Busy).
		return Result{Busy: true}, fmt.Errorf("reboot: get host %s: %w", name, err)
	}
	pc, err := r.Power(name)
	if err != nil {
		return Result{Busy: r.failedBusy(name, h, nil)}, fmt.Errorf("reboot: power controller for %s: %w", name, err)
	}
	// Is this process the leader? Asked before the clocks are read: a
	// pass that counts from its leadership counts from before m.
	r.probe(ctx)
	// The clocks are read before the power state: the evidence a reading
	// gives is stamped no later than the reading.
	now := r.Now()
	m := r.monotonic()
	state, perr := pc.State(ctx)
	if perr != nil {
		state = power.StateUnknown
	}
	mRead := r.monotonic() // the reading ended by now
	// The answer of a call that outlived its pass (LateAnswerer): taken
	// before this pass makes a call of its own.
	var late *LateAnswer
	var mLate time.Duration // when the late answer was taken
	if la, ok := pc.(LateAnswerer); ok {
		if a, ok := la.LateAnswer(); ok {
			late, mLate = &a, r.monotonic()
		}
	}
	cfg := r.Config.withDefaults().forHost(Observed{StaleReads: h.StaleReads, OffSettle: h.OffSettle})

	r.mu.Lock()
	hm := r.mem(name, m, now)
	// A pass whose clocks were read before this Reconciler's leadership
	// began (another host's pass made the first successful Hold meanwhile:
	// the Reconciler is concurrent across hosts) read its status while
	// another leader's calls could still land: it is a standby pass, and
	// what it reads counts as sent when the leadership began (lead below).
	leadLate := r.Guard != nil && r.leading && m < r.leadAt
	standby := r.Guard != nil && !r.leading || leadLate
	first := !hm.known
	hm.known = true
	hm.readAnswered(perr)
	if late != nil {
		t, ok := pc.(Toggler)
		press := ok && t.TogglesOff(late.Mode)
		if late.Action == ActionPowerOn {
			press = togglesOn(pc)
		}
		hm.late(*late, now, mLate, press)
	}
	// A value read in this host's first pass is known since the start
	// only if it was stamped before it (see knownSinceStart).
	fromStart := first && !hm.forgot
	o := Observed{
		Annotations:   h.Annotations,
		Online:        h.Online,
		Deprovisioned: h.Deprovisioned,
		Status:        h.Status,
		Power:         state,
		LastCall:      hm.last,
		QuietFor:      hm.quietFor(first, h.Status, m, fromStart && h.Status.LastPoweredOn.After(r.startWall), standby),
		SincePending:  hm.pend.since(h.Status.PendingRebootSince, m, r.start, r.knownSinceStart(fromStart, h.Status.PendingRebootSince)),
		SinceRequest:  hm.req.since(h.Status.LastRequestSeen, m, r.start, r.knownSinceStart(fromStart, h.Status.LastRequestSeen)),
		SinceRewrite:  hm.rew.since(h.Status.RewriteSeen, m, r.start, r.knownSinceStart(fromStart, h.Status.RewriteSeen)),
		SinceLastRewrite: hm.lastRew.since(h.Status.LastRewriteSeen, m, r.start,
			r.knownSinceStart(fromStart, h.Status.LastRewriteSeen)),
		Changed:           !hm.seenVersion(h.Version) || first,
		StaleReads:        h.StaleReads,
		OffSettle:         h.OffSettle,
		HardUnsupportedAt: hm.hardUnsupportedAt,
	}
	if t, ok := pc.(Toggler); ok {
		o.SoftToggles, o.HardToggles = t.TogglesOff(power.ModeSoft), t.TogglesOff(power.ModeHard)
	}
	o.OnToggles = togglesOn(pc)
	o.SinceOff, o.SincePress = hm.sinceOff(first, h.Status, m, first && !hm.forgot && stampedAfter(h.Status.LastPress, r.startWall, cfg.Precision),
		standby, o.OnToggles, actedBound{set: true, start: r.start, startWall: r.startWall, precision: cfg.Precision,
			now: now, nowMono: m, shutdown: cfg.shutdownBound()})
	if !standby {
		o.ActingSince = hm.quietSince(r.start, r.startWall, m, now)
	}
	o.SinceOff, o.SincePress = hm.lost.since(o.SinceOff, o.SincePress, m, cfg.LostLanding)
	o.PressOver, o.PressOverFor = hm.sawState(state, m, mRead, cfg.StaleReads, cfg.OffSettle)
	switch state {
	case power.StateOff:
		hm.sawOff = true
	case power.StateOn:
		hm.sawOff = false
	}
	o.OffFor, o.UnknownFor, o.UnsureFor, o.SaneFor = hm.reading(state, m, cfg.OffSettle)
	o.UnsureWhole = hm.unsureRun && hm.unsureWhole
	if leadLate {
		hm.lead(r.leadAt)
	}
	r.mu.Unlock()

	d := r.Config.Decide(o, now)
	res := Result{Decision: d, RequeueAfter: d.RequeueAfter, StateErr: perr}

	if d.UpdateStatus {
		nh := h
		nh.Status = d.Status
		if len(d.RemoveAnnotations) > 0 {
			nh.Annotations = make(map[string]string, len(h.Annotations))
			for k, v := range h.Annotations {
				nh.Annotations[k] = v
			}
			for _, k := range d.RemoveAnnotations {
				delete(nh.Annotations, k)
			}
		}
		var written Host
		err := Fenced(ctx, r.Guard, "reboot: update host "+name, func(ctx context.Context) (err error) {
			r.noteHold(true)
			// Noted before the write (see memory.writing): a write whose
			// answer is lost may have been applied.
			r.mu.Lock()
			hm.writing(d.Status)
			r.mu.Unlock()
			written, err = r.Hosts.Update(ctx, nh)
			return err
		})
		if errors.Is(err, ErrNotLeader) {
			r.noteHold(false)
			res.Busy = r.failedBusy(name, h, &d)
			return res, err
		}
		if err != nil {
			// The record stays unhandled: a change seen in this pass is
			// seen again in the next.
			res.Busy = r.failedBusy(name, h, &d)
			return res, fmt.Errorf("reboot: update host %s: %w", name, err)
		}
		r.mu.Lock()
		hm.noteVersion(h.Version)
		hm.noteVersion(written.Version)
		hm.wrote(o, d.Status, m)
		r.mu.Unlock()
	}

	if !d.UpdateStatus {
		r.mu.Lock()
		hm.noteVersion(h.Version)
		r.mu.Unlock()
	}
	if d.Power != ActionNone {
		pctx, cancel, err := hold(ctx, r.Guard, "reboot: "+d.Power.String()+" "+name)
		r.noteHold(err == nil)
		if err != nil {
			res.Busy = r.failedBusy(name, h, &d)
			return res, err
		}
		defer cancel()
		ctx := pctx
		if d.Power == ActionPowerOn {
			// Noted before the call, in the memory held now (the host
			// may have been forgotten since the pass took hm, during its
			// status write: TestReview36k_ForgetBeforePowerOnCountsItFromForget):
			// from now on an Off reading may echo the state before it,
			// whatever the call returns. A Forget during the call dates
			// the new memory's last power-on at the Forget, later still.
			m := r.monotonic()
			r.mu.Lock()
			hm = r.current(name, hm)
			hm.lastOn, hm.onSince = max(hm.lastOn, m), true
			r.mu.Unlock()
			err = pc.On(ctx)
			done := r.monotonic()
			r.mu.Lock()
			cur := r.current(name, hm)
			cur.sentOn(togglesOn(pc), err, done)
			if answerLost(err) || errors.Is(err, power.ErrBusy) {
				cur.onLost.note(done)
			}
			r.mu.Unlock()
		} else {
			// Noted before the call, as a power-on is, in the memory held
			// now: a shutdown may start whatever the call returns, unless
			// it was refused before it reached the hardware
			// (notCarriedOut).
			press := o.toggles(d.Mode)
			m := r.monotonic()
			r.mu.Lock()
			hm = r.current(name, hm)
			was := hm.sendingOff(press, m)
			r.mu.Unlock()
			err = pc.Off(ctx, d.Mode)
			done := r.monotonic()
			r.mu.Lock()
			if cur := r.current(name, hm); cur != hm {
				// Forgotten during the call: the new memory counts every
				// power-off from the Forget, and this one from its return.
				hm, was = cur, cur.off
			}
			hm.sentOff(was, press, err, done)
			if !notCarriedOut(err) {
				hm.offSent, hm.offSet, hm.onSince = max(hm.offSent, done), true, false
			}
			r.mu.Unlock()
		}
		call := Call{Action: d.Power, Mode: d.Mode, Class: CallClass(err), At: r.Now(), For: d.For}
		r.mu.Lock()
		r.current(name, hm).answered(call, err)
		r.mu.Unlock()
		res.PowerErr = err
		if err != nil {
			res.Requeue, res.RequeueAfter = true, 0
		}
	}
	r.mu.Lock()
	mb := r.monotonic()
	res.Busy = r.othersMayLand(mb, cfg) || busy(h, d, r.current(name, hm), mb, cfg)
	r.mu.Unlock()
	if r.Logger != nil && (d.UpdateStatus || d.Power != ActionNone || len(d.Warnings) > 0) {
		attrs := []slog.Attr{slog.String("host", name), slog.String("phase", d.Phase.String()),
			slog.String("power", d.Power.String()), slog.String("reason", d.Reason)}
		if d.Power == ActionPowerOff {
			attrs = append(attrs, slog.String("mode", d.Mode.String()))
		}
		if res.PowerErr != nil {
			attrs = append(attrs, slog.String("powerError", res.PowerErr.Error()))
		}
		for _, w := range d.Warnings {
			attrs = append(attrs, slog.String("warning", w.Error()))
		}
		r.Logger.LogAttrs(ctx, slog.LevelInfo, "reboot decision", attrs...)
	}
	return res, nil
}
