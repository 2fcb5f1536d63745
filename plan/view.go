package plan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Index summarizes a whole plan so that a pass needs to read only the
// reboots it may change: the ones in flight and the next pending ones.
// Reboots start in plan order, so the reboots that left StepPending are
// always the first Started ones, and core servers are always the first
// Core ones (Decode and the stores check both).
//
// NextView keeps the index up to date; stores persist it with the plan's
// header, in the same write as the reboot records it summarizes.
type Index struct {
	// Total is the number of reboots; Core the number of core servers
	// (the first Core reboots).
	Total int `json:"total"`
	Core  int `json:"core"`
	// Started: the first Started reboots left StepPending.
	Started int `json:"started"`
	// Done and Failed count the reboots in StepDone and StepFailed.
	Done   int `json:"done"`
	Failed int `json:"failed"`
	// Released counts the reboots in StepReleased (never started, the
	// plan ended while they were held).
	Released int `json:"released,omitempty"`
	// Failures counts the reboots with canceled_at set (failed, or failing
	// while their job is cancelled or the shard unfrozen): what the failure
	// budget is checked against.
	Failures int `json:"failures"`
	// InFlight are the positions of the reboots in flight, ascending.
	InFlight []int `json:"in_flight,omitempty"`
	// DoneTime is the sum of how long they took (job created, or started
	// for older plans, to operational) over the DoneTimed
	// done reboots that have both times: the ETA's mean.
	DoneTime  time.Duration `json:"done_time,omitempty"`
	DoneTimed int           `json:"done_timed,omitempty"`
	// DoneMax is the longest of them: how long a reboot may plausibly
	// take, for the maintenance windows.
	DoneMax time.Duration `json:"done_max,omitempty"`
	// DoneHist counts them by duration: the maintenance windows' robust
	// estimate (Need).
	DoneHist Hist `json:"done_hist,omitempty"`
	// CoreDone counts the core reboots done: the canary ramp counts only
	// the others (its first stage is never spent on the headnode).
	CoreDone int `json:"core_done,omitempty"`
}

// IndexOf computes the index of a whole plan, in O(servers).
func IndexOf(p Plan) Index {
	ix := Index{Total: len(p.Reboots)}
	for i, r := range p.Reboots {
		if r.Core {
			ix.Core = i + 1
		}
		if r.Step != StepPending {
			ix.Started = i + 1
		}
		if r.Step.InFlight() {
			ix.InFlight = append(ix.InFlight, i)
		}
	}
	t := tally(p.Reboots)
	ix.Done, ix.Failed, ix.Released, ix.Failures, ix.DoneTime, ix.DoneTimed, ix.DoneMax = t.done, t.failed, t.released, t.failures, t.doneTime, t.doneTimed, t.doneMax
	ix.DoneHist, ix.CoreDone = t.hist, t.coreDone
	return ix
}

// counts are one set of reboots' contributions to an Index.
type counts struct {
	done, failed, released, failures, doneTimed, coreDone int
	doneTime, doneMax                                     time.Duration
	hist                                                  Hist
}

func tally(rs []Reboot) counts {
	var c counts
	for _, r := range rs {
		switch r.Step {
		case StepDone:
			c.done++
			c.coreDone += b2i(r.Core)
			if d, ok := took(r); ok {
				c.doneTime += d
				c.doneTimed++
				c.doneMax = max(c.doneMax, d)
				c.hist = c.hist.add(d, 1)
			}
		case StepFailed:
			c.failed++
		case StepReleased:
			c.released++
		}
		if r.CanceledAt != nil {
			c.failures++
		}
	}
	return c
}

// View is the part of a plan one pass works on: the header (every field of
// Plan but Reboots), the reboots it may change (Plan.Reboots: every reboot
// in flight, then pending ones in plan order), where they stand in the
// whole plan (Pos), the whole plan's Index, and the plan's servers
// (Members). A view of a whole plan (FullView) has Pos and Members nil.
type View struct {
	Plan
	// Pos[k] is the position of Plan.Reboots[k] in the whole plan,
	// ascending; nil when every reboot is loaded.
	Pos []int
	// Index summarizes the whole plan.
	Index Index
	// Members maps every server of the plan to its position; nil when
	// every reboot is loaded. It is shared between views of one plan and
	// never modified.
	Members map[string]int
	// Domains is the plan's DomainTableOf, for a partial view of a plan
	// with DomainLimits (nil otherwise; the Executor fills it in when a
	// store does not). Without it a pass counts every server it did not
	// load that is offline in every domain (safe; it may hold the plan).
	Domains *DomainTable
	// MaxInFlight, when positive, is how many reboots of the plan a store
	// can hold in flight (its header lists them): NextView starts none
	// while that many are in flight, and the plan waits (its reboots in
	// flight go on, end, and free room). 0: no such limit.
	MaxInFlight int

	// base is what a store read, so that PutView writes only what changed.
	base *viewBase
}

// viewBase is a store's record of what it loaded into a view.
type viewBase struct {
	header []byte   // the header record as read
	orig   []Reboot // the loaded reboots as read (never modified)
	// raws and vers are the bytes and versions of the records orig was
	// decoded from (BoltStore), one per loaded reboot; nil when not known.
	raws [][]byte
	vers []uint64
	// enc are the records to write for the loaded reboots that changed
	// (EncodeView), nil for the others, and encFrom the reboots they were
	// encoded from; nil when not encoded ahead.
	enc     [][]byte
	encFrom []Reboot
}

// SameReboot reports whether a and b are identical: every field equal,
// times compared as values with their location and monotonic reading, so
// that identical reboots encode identically (a store writes a record only
// when it is not the same as the one it read).
func SameReboot(a, b Reboot) bool { return sameReboot(a, b) }

func sameReboot(a, b Reboot) bool {
	sameTime := func(x, y *time.Time) bool { return x == y || x != nil && y != nil && *x == *y }
	return a.ServerUUID == b.ServerUUID && a.ServerHostname == b.ServerHostname && a.BootPlatform == b.BootPlatform &&
		a.CurrentPlatform == b.CurrentPlatform && a.Headnode == b.Headnode && a.JobUUID == b.JobUUID &&
		sameTime(a.StartedAt, b.StartedAt) && sameTime(a.FinishedAt, b.FinishedAt) && sameTime(a.OperationalAt, b.OperationalAt) &&
		sameTime(a.CanceledAt, b.CanceledAt) && a.Core == b.Core && a.Step == b.Step && sameTime(a.StepSince, b.StepSince) &&
		a.Frozen == b.Frozen && a.Error == b.Error && a.JobSeen == b.JobSeen && sameTime(a.DrainSince, b.DrainSince) &&
		sameTime(a.JobCreatedAt, b.JobCreatedAt) && sameTime(a.AskedAt, b.AskedAt) && sameTime(a.ShowFrom, b.ShowFrom) &&
		samePhases(a.Phases, b.Phases) &&
		maps.Equal(a.Labels, b.Labels)
}

// FullView is the view of a whole plan (O(servers)).
func FullView(p Plan) View { return View{Plan: p, Index: IndexOf(p)} }

// Full reports whether every reboot of the plan is loaded.
func (v View) Full() bool { return v.Pos == nil && len(v.Reboots) == v.Index.Total }

// pos is the position of loaded reboot k in the whole plan.
func (v View) pos(k int) int {
	if v.Pos == nil {
		return k
	}
	return v.Pos[k]
}

// Unfinished reports whether the plan may still reboot servers: it is not
// finished, or reboots are still in flight.
func (v View) Unfinished() bool { return !v.State.Finished() || len(v.Index.InFlight) > 0 }

// SummaryAt is Summary with the ETA counting only the time the
// maintenance windows are open from now on.
func (v View) SummaryAt(now time.Time) Summary {
	return v.Summary().inWindows(v.Windows, v.Index.DoneHist, now)
}

// Summary is the plan's progress, from the index (no reboot is read). Its
// ETA does not know the time: it ignores the maintenance windows
// (SummaryAt counts them).
func (v View) Summary() Summary {
	ix := v.Index
	s := Summary{Total: ix.Total, Done: ix.Done, Failed: ix.Failed, InFlight: len(ix.InFlight),
		Left: ix.Total - ix.Started + ix.Released, Waiting: v.Waiting, State: v.State}
	if ix.DoneTimed > 0 && v.State == StateRunning {
		mean := ix.DoneTime / time.Duration(ix.DoneTimed)
		s.ETA = time.Duration(float64(mean) * (float64(s.Left) + float64(s.InFlight)/2) / float64(max(v.Concurrency, 1)))
	}
	return s
}

// check verifies what NextView relies on: positions ascending and inside
// the plan, every reboot in flight loaded, and the loaded reboots agreeing
// with the index (started ones before Started, pending ones after).
func (v View) check() error {
	ix := v.Index
	if ix.Total < 0 || ix.Started < 0 || ix.Started > ix.Total || ix.Core > ix.Total || ix.Done+ix.Failed+ix.Released+len(ix.InFlight) != ix.Started {
		return fmt.Errorf("plan %s: inconsistent index %+v", v.UUID, summaryOf(ix))
	}
	if v.Pos != nil && len(v.Pos) != len(v.Reboots) || v.Pos == nil && len(v.Reboots) != ix.Total {
		return fmt.Errorf("plan %s: view positions do not match its reboots", v.UUID)
	}
	last := -1
	for k, r := range v.Reboots {
		p := v.pos(k)
		if p <= last || p >= ix.Total {
			return fmt.Errorf("plan %s: view position %d out of order", v.UUID, p)
		}
		last = p
		if (r.Step == StepPending) != (p >= ix.Started) {
			return fmt.Errorf("plan %s: reboot %d (%s) is %q, index says %d started", v.UUID, p, r.ServerUUID, r.Step, ix.Started)
		}
		if r.Core != (p < ix.Core) {
			return fmt.Errorf("plan %s: reboot %d (%s): core flag disagrees with the index", v.UUID, p, r.ServerUUID)
		}
		if _, in := slices.BinarySearch(ix.InFlight, p); in != r.Step.InFlight() {
			return fmt.Errorf("plan %s: reboot %d (%s) is %q, index disagrees", v.UUID, p, r.ServerUUID, r.Step)
		}
	}
	loaded := v.positions()
	for _, p := range ix.InFlight {
		if _, in := slices.BinarySearch(loaded, p); !in {
			return fmt.Errorf("plan %s: reboot %d is in flight and not loaded", v.UUID, p)
		}
	}
	return nil
}

// ErrViewIncomplete: a view written does not load a reboot the stored plan
// has in flight, or its first pending reboot. Its index could then drop a
// reboot whose job runs (and end the plan over it) or start one whose
// record stays pending. Read the plan again with GetView (which loads them)
// and decide on that view.
var ErrViewIncomplete = errors.New("plan: the view does not load every reboot the stored plan has in flight and its first pending one: read it again with GetView")

// CheckLoads returns an error wrapping ErrViewIncomplete unless v loads
// every reboot in flight by the stored index, the stored first pending
// reboot (position stored.Started, when one is left; what a GetView of
// that index loads) and every reboot v's index starts past it (positions
// stored.Started up to v.Index.Started). It returns one wrapping
// ErrStepBack when v's index counts fewer reboots started than stored. A ViewStore checks it before it writes v's index over
// the stored one. A full view (Pos nil) loads every reboot.
func (v View) CheckLoads(stored Index) error {
	if v.Pos == nil {
		return nil
	}
	loaded := func(p int) bool {
		_, in := slices.BinarySearch(v.Pos, p)
		return in
	}
	for _, p := range stored.InFlight {
		if !loaded(p) {
			return fmt.Errorf("%w: plan %s: reboot %d is in flight and not in the view", ErrViewIncomplete, v.UUID, p)
		}
	}
	if stored.Started < stored.Total && !loaded(stored.Started) {
		return fmt.Errorf("%w: plan %s: reboot %d is the first pending one and not in the view", ErrViewIncomplete, v.UUID, stored.Started)
	}
	if v.Index.Started < stored.Started {
		return fmt.Errorf("%w: plan %s: the view says %d reboots started, the stored plan %d", ErrStepBack, v.UUID, v.Index.Started, stored.Started)
	}
	for p := stored.Started; p < v.Index.Started; p++ {
		if !loaded(p) {
			return fmt.Errorf("%w: plan %s: the view starts reboot %d and does not load it", ErrViewIncomplete, v.UUID, p)
		}
	}
	return nil
}

// ErrStepBack: a view written moves a reboot in a way no pass does: a
// started reboot back to pending, an ended one (done, failed, released)
// to another step, a reboot released whose job the fleet has shown
// (JobSeen) or that is past its job (services, unfreeze, cancel), or it
// counts fewer reboots started than the stored plan. A started reboot's
// job may run, and a plan that forgets it could end (or start another
// reboot) over it. Read the plan again with GetView and decide on that
// view.
var ErrStepBack = errors.New("plan: the view moves a reboot in a way no pass does (a started reboot back, or released over its job): read the plan again with GetView")

// CheckStepForward returns an error wrapping ErrStepBack when next (the
// view's reboot at position pos of plan uuid) is not a step a pass can
// reach from stored (the stored one), with any number of passes between:
//   - a started reboot never goes back to pending;
//   - an ended reboot (done, failed, released) never moves again;
//   - a reboot is released only from pending, wait_headnode, freeze, or
//     job while its job was never shown (a job asked for, taken for lost
//     after ShowTimeout, held and released in one pass), and only while
//     neither side has JobSeen: the fleet showed its job, it may run;
//   - a reboot that holds the database shard frozen (Frozen) never ends
//     with it still set (done, released, or failed from failed_unfreeze:
//     a pass ends it only once the shard is unfrozen), but failed from
//     unfreeze (the shard unhealthy past ServicesTimeout: left frozen on
//     purpose, for a person to look at); nothing would unfreeze it after.
//
// A ViewStore checks it on every reboot it writes.
func CheckStepForward(uuid string, pos int, stored, next Reboot) error {
	bad := ""
	switch {
	case endsFrozen(stored, next):
		bad = "holds the database shard frozen, and nothing would unfreeze it once it ended"
	case stored.Step == next.Step:
	case stored.Step != StepPending && next.Step == StepPending:
		bad = "started"
	case stored.Step.Ended():
		bad = "ended"
	case next.Step == StepReleased && !releasable(stored, next):
		bad = "may have a running job, so it cannot be released"
	}
	if bad == "" {
		return nil
	}
	return fmt.Errorf("%w: plan %s: reboot %d (%s) is %q (%s), the view says %q", ErrStepBack, uuid, pos, stored.ServerHostname, stored.Step, bad, next.Step)
}

// endsFrozen reports whether next ends the reboot with Frozen still set
// where no pass does: every end but failed from unfreeze (left frozen),
// or an end stored so already.
func endsFrozen(stored, next Reboot) bool {
	switch {
	case !next.Frozen || !next.Step.Ended():
		return false
	case stored.Step == next.Step && stored.Frozen:
		return false // as stored
	}
	return !(next.Step == StepFailed && stored.Step == StepUnfreeze)
}

// releasable reports whether a pass may move stored to StepReleased (next):
// the reboot never had its job shown by the fleet (advance releases it
// only from wait_headnode, reached from pending, freeze, or a job never
// seen).
func releasable(stored, next Reboot) bool {
	if stored.JobSeen || next.JobSeen {
		return false
	}
	switch stored.Step {
	case StepPending, StepWaitHead, StepFreeze, StepJob:
		return true
	}
	return false
}

func summaryOf(ix Index) string {
	return fmt.Sprintf("total %d core %d started %d done %d failed %d in flight %d", ix.Total, ix.Core, ix.Started, ix.Done, ix.Failed, len(ix.InFlight))
}

func (v View) positions() []int {
	if v.Pos != nil {
		return v.Pos
	}
	out := make([]int, len(v.Reboots))
	for i := range out {
		out[i] = i
	}
	return out
}

// offlineOthers returns the positions of the servers of the plan that
// are not loaded in v and are offline by obs: observed down or not
// observed. With a partial observation (Observations.Partial), those are
// the ones listed in obs.Offline. A partial view without Members counts
// every server it did not load as offline (nothing is known of them:
// safe, and it stalls): unknown is how many, positions unknown.
func offlineOthers(v View, obs Observations) (pos []int, unknown int) {
	if v.Full() {
		return nil, 0
	}
	loaded := func(s string) (int, bool) {
		p, ok := v.Members[s]
		if !ok {
			return 0, false
		}
		_, in := slices.BinarySearch(v.Pos, p)
		return p, !in
	}
	if v.Members == nil {
		return nil, v.Index.Total - len(v.Reboots)
	}
	if obs.Partial {
		var seen map[string]bool
		for _, s := range obs.Offline {
			if p, other := loaded(s); other {
				if seen == nil {
					seen = map[string]bool{}
				}
				if !seen[s] {
					seen[s] = true
					pos = append(pos, p)
				}
			}
		}
		return pos, 0
	}
	for s := range v.Members {
		if p, other := loaded(s); other {
			if o, ok := obs.Servers[s]; !ok || o.Down {
				pos = append(pos, p)
			}
		}
	}
	return pos, 0
}

// NextView is Next on a view: it costs O(loaded reboots) plus the length
// of obs.Offline, whatever the size of the plan. v must hold every reboot
// in flight and the pending ones that may start, in plan order (a store's
// GetView does this; a view with fewer pending reboots starts fewer, never
// more). The returned view has its Index updated; v is not modified.
func (c Config) NextView(v View, obs Observations, now time.Time) (View, []Action) {
	c = c.withDefaults()
	w := v
	w.Plan = v.Plan.Clone()
	w.Index.InFlight = slices.Clone(v.Index.InFlight)
	w.Index.DoneHist = v.Index.DoneHist.clone()
	ps := &pass{c: c, q: &w.Plan, obs: obs, now: now, done: v.Index.Done - v.Index.CoreDone, hist: v.Index.DoneHist.clone(), failures: v.Index.Failures}
	if len(ps.hist) == 0 && v.Index.DoneMax > 0 {
		ps.hist = ps.hist.add(v.Index.DoneMax, 1) // an index written before DoneHist: its longest reboot
	}
	before := tally(v.Reboots)
	w.Waiting, w.WaitingOutput = "", ""
	others, unknown := offlineOthers(v, obs)
	ps.offline = len(others) + unknown
	if len(w.DomainLimits) > 0 {
		ps.dom = &domainCount{limits: w.DomainLimits, loaded: w.Reboots, unknown: unknown}
		switch {
		case v.Full():
			ps.dom.table = DomainTableOf(v.Plan)
		case v.Domains.fits(v):
			ps.dom.table = v.Domains
		}
		for range w.DomainLimits {
			ps.dom.off = append(ps.dom.off, map[string]int{})
		}
		for _, p := range others {
			if ps.dom.table == nil {
				ps.dom.unknown++
				continue
			}
			for k := range w.DomainLimits {
				if val := ps.dom.table.values[k][p]; val != "" {
					ps.dom.off[k][val]++
				}
			}
		}
	}
	for i := range w.Reboots {
		if r := &w.Reboots[i]; Offline(*r, obs) {
			ps.offline++
			if ps.dom != nil {
				ps.dom.add(r, 1)
			}
		}
	}
	ps.setHold()
	// Reboots whose job the fleet shows (or showed) first, then those
	// that may create one: the failures of the first decide whether the
	// failure budget is spent before any job is created in this pass.
	for _, mayCreate := range []bool{false, true} {
		for i := range w.Reboots {
			if r := w.Reboots[i]; r.Step.InFlight() && mayStart(r, obs) == mayCreate {
				ps.advance(i)
			}
		}
	}
	ps.setHold() // reboots done in this pass may have made the longest longer
	failures := v.Index.Failures - before.failures + tally(w.Reboots).failures
	if w.State == StateRunning && failures <= w.FailureBudget {
		ours, coreBusy := 0, false
		for _, r := range w.Reboots {
			if r.Step.InFlight() {
				ours += b2i(Offline(r, obs))
				// A core reboot in failed_unfreeze failed (its job
				// ended): like a failed one, it no longer holds the
				// core order while it asks for the unfreeze.
				coreBusy = coreBusy || r.Core && r.Step != StepFailFreeze
			}
		}
		// Core servers are the first ones and start in order: one is still
		// pending exactly when fewer than Core reboots started.
		corePending := v.Index.Started < v.Index.Core
		flying := inFlightNow(v, w)
		for i := range w.Reboots {
			r := &w.Reboots[i]
			if r.Step != StepPending {
				continue
			}
			if coreBusy || !r.Core && corePending {
				break // core servers first, one at a time
			}
			if ps.hold != "" {
				w.Waiting, w.WaitingOutput = ps.hold, ps.holdOutput
				break
			}
			if v.MaxInFlight > 0 && flying >= v.MaxInFlight {
				w.Waiting = fmt.Sprintf("waiting: %d reboot(s) in flight, the most the plan store holds for one plan; the next starts when one ends", flying)
				break
			}
			self := Offline(*r, obs)
			if lim := ps.limit(); ps.offline-b2i(self) >= lim {
				// Starting it would make (or keep) more servers offline
				// than allowed, whoever took them down.
				if ps.offline > ours || lim < w.Concurrency {
					w.Waiting = fmt.Sprintf("waiting: %d server(s) offline (%d rebooting, %d down or unknown for other reasons), %s",
						ps.offline, ours, ps.offline-ours, ps.concurrencyWord())
				}
				break
			}
			// A reboot whose failure domain is full is held in
			// wait_headnode (its server is not offline because of it),
			// and the next one is tried: a domain limit holds only its
			// own domain.
			ps.enter(r, StepWaitHead)
			ps.advance(i)
			ours += b2i(Offline(*r, obs) && r.Step.InFlight())
			flying += b2i(r.Step.InFlight())
			if r.Core {
				break // one core server at a time
			}
		}
	}
	after := tally(w.Reboots)
	ix := &w.Index
	ix.Done += after.done - before.done
	ix.Failed += after.failed - before.failed
	ix.Released += after.released - before.released
	ix.Failures += after.failures - before.failures
	ix.DoneTime += after.doneTime - before.doneTime
	ix.DoneTimed += after.doneTimed - before.doneTimed
	ix.DoneMax = max(ix.DoneMax, after.doneMax)
	ix.CoreDone += after.coreDone - before.coreDone
	for k, n := range after.hist {
		ix.DoneHist = ix.DoneHist.addKey(k, n)
	}
	for k, n := range before.hist {
		ix.DoneHist = ix.DoneHist.addKey(k, -n)
	}
	loaded := v.positions()
	fly := ix.InFlight[:0:0]
	for _, p := range v.Index.InFlight {
		if _, in := slices.BinarySearch(loaded, p); !in {
			fly = append(fly, p) // not loaded (a view that breaks the contract): unchanged
		}
	}
	for k, r := range w.Reboots {
		if r.Step.InFlight() {
			fly = append(fly, loaded[k])
		}
		if r.Step != StepPending {
			ix.Started = max(ix.Started, loaded[k]+1)
		}
	}
	slices.Sort(fly)
	ix.InFlight = fly
	settle(&w.Plan, *ix)
	// What the fleet said is kept bounded: a record never outgrows a page.
	for k := range w.Reboots {
		w.Reboots[k].Error = BoundText(w.Reboots[k].Error, MaxErrorBytes)
	}
	if w.Waiting == "" {
		w.Waiting = ps.services
	}
	w.Waiting = BoundText(w.Waiting, MaxErrorBytes)
	return w, ps.acts
}

// inFlightNow is how many reboots of the plan are in flight in w, the
// view v after its reboots in flight advanced: the index's count, with the
// loaded reboots counted as they are in w.
func inFlightNow(v, w View) int {
	n := len(v.Index.InFlight)
	for k := range v.Reboots {
		n += b2i(w.Reboots[k].Step.InFlight()) - b2i(v.Reboots[k].Step.InFlight())
	}
	return n
}

// settle moves the plan to its end state when nothing is left to do.
func settle(q *Plan, ix Index) {
	if q.State == StateRunning && ix.Failures > q.FailureBudget {
		q.State = StateFailed // over budget: no new reboots
		return
	}
	if q.State != StateRunning && q.State != StateStopped {
		return
	}
	if ix.Done+ix.Failed+ix.Released < ix.Total {
		return
	}
	if ix.Failures > 0 || ix.Released > 0 {
		// A running plan releases a reboot only when the fleet never
		// showed its job: not every reboot succeeded.
		q.State = StateFailed
	} else {
		q.State = StateComplete
	}
}

// ViewStore is a Store that loads and saves part of a plan, so that a pass
// costs O(reboots in flight) whatever the plan's size.
type ViewStore interface {
	Store
	// GetView returns the plan's header and index, every reboot in
	// flight, and the first PendingInView pending ones, with the plan's
	// Version.
	GetView(ctx context.Context, uuid string) (View, error)
	// PutView writes the view's header, index and loaded reboots if
	// v.Version is the stored version (else ErrConflict), in one atomic,
	// durable write that changes only the records that changed. A view
	// that does not load every reboot the stored plan has in flight, its
	// first pending one and every reboot it starts is refused
	// (ErrViewIncomplete, View.CheckLoads), and one that sets a started
	// reboot back to pending (ErrStepBack, CheckStepForward).
	PutView(ctx context.Context, v View) error
}

// ViewFleet is a Fleet that observes part of a plan.
type ViewFleet interface {
	Fleet
	// ObserveView observes the servers of v.Reboots and their jobs, the
	// headnode and the shard (Servers, Jobs and the rest, as Observe does),
	// sets Partial, and lists in Offline every server it knows to be down
	// or cannot observe, in the plan or not: a server of the plan that it
	// does not list is taken to be up. A fleet that cannot list the
	// servers it does not know must not implement ViewFleet.
	ObserveView(ctx context.Context, v View) (Observations, error)
}

// Views gives any Store the ViewStore methods: GetView reads the whole
// plan and returns the part a pass needs; PutView merges the loaded
// reboots into the stored plan with compare-and-swap. It costs what Get
// and Put cost (O(servers)); it is for stores without records of their
// own, and for testing NextView against Next. A store that is a ViewStore
// already is returned as it is.
func Views(s Store) ViewStore {
	if vs, ok := s.(ViewStore); ok {
		return vs
	}
	return viewAdapter{s}
}

type viewAdapter struct{ Store }

func (a viewAdapter) GetView(ctx context.Context, uuid string) (View, error) {
	p, err := a.Get(ctx, uuid)
	if err != nil {
		return View{}, err
	}
	ix := IndexOf(p)
	return Cut(p, ix, PendingInView(p), nil), nil
}

func (a viewAdapter) PutView(ctx context.Context, v View) error {
	p, err := a.Get(ctx, v.UUID)
	if err != nil {
		return err
	}
	if p.Version != v.Version {
		return fmt.Errorf("plan %s: %w", v.UUID, ErrConflict)
	}
	if err := v.check(); err != nil {
		return err
	}
	if v.Index.Total != len(p.Reboots) {
		return fmt.Errorf("plan %s: view of %d reboots, stored %d", v.UUID, v.Index.Total, len(p.Reboots))
	}
	if err := v.CheckLoads(IndexOf(p)); err != nil {
		return err
	}
	q := v.Plan
	q.Reboots = slices.Clone(p.Reboots)
	for k, r := range v.Reboots {
		if q.Reboots[v.pos(k)].ServerUUID != r.ServerUUID {
			return fmt.Errorf("%w: plan %s: reboot %d is %s, view says %s", ErrCorrupt, v.UUID, v.pos(k), q.Reboots[v.pos(k)].ServerUUID, r.ServerUUID)
		}
		if err := CheckStepForward(v.UUID, v.pos(k), q.Reboots[v.pos(k)], r); err != nil {
			return err
		}
		q.Reboots[v.pos(k)] = r
	}
	return a.Put(ctx, q)
}

// Cut returns the view of plan p (whose index is ix) that a pass needs:
// every reboot in flight and the first pending ones, at most pending of
// them. members is the plan's member map (MembersOf), built if nil.
func Cut(p Plan, ix Index, pending int, members map[string]int) View {
	v := View{Plan: p, Index: ix, Members: members, Pos: cutPositions(ix, pending)}
	v.Reboots = nil
	for _, i := range v.Pos {
		v.Reboots = append(v.Reboots, p.Reboots[i])
	}
	if v.Members == nil {
		v.Members = MembersOf(p)
	}
	if len(p.DomainLimits) > 0 {
		v.Domains = DomainTableOf(p)
	}
	return v
}

// ViewPositions are the positions of the reboots a view of a plan with
// index ix loads: every reboot in flight and the first pending ones, at
// most pending of them (PendingInView), ascending. Stores use it.
func ViewPositions(ix Index, pending int) []int { return cutPositions(ix, pending) }

// Check verifies what NextView relies on (stores call it on the views
// they read and are asked to write): positions ascending and inside the
// plan, every reboot in flight loaded, the loaded reboots agreeing with
// the index, and the header valid.
func (v View) Check() error {
	if err := v.Plan.validate(); err != nil {
		return err
	}
	return v.check()
}

// cutPositions are the positions a view loads: every reboot in flight and
// the first pending ones, at most pending of them.
func cutPositions(ix Index, pending int) []int {
	pos := make([]int, 0, len(ix.InFlight)+max(pending, 0))
	pos = append(pos, ix.InFlight...)
	for i := ix.Started; i < ix.Total && i < ix.Started+max(pending, 0); i++ {
		pos = append(pos, i)
	}
	slices.Sort(pos)
	return slices.Compact(pos)
}

// MembersOf maps each server of p to its position.
func MembersOf(p Plan) map[string]int {
	m := make(map[string]int, len(p.Reboots))
	for i, r := range p.Reboots {
		m[r.ServerUUID] = i
	}
	return m
}

// PendingInView is how many pending reboots (the next ones in the plan's
// order) a view of plan p (header) loads: the concurrency plus one, as
// many as could start in one pass when every reboot in flight ends in it.
// Pending servers that are down already start without adding to the
// offline count, so with several of them a pass may start fewer than it
// could with the whole plan; the next pass goes on (never more).
func PendingInView(p Plan) int {
	return max(p.Concurrency, 0) + 1
}

// PendingWindow is PendingInView: a count of reboots, not a time window.
//
// Deprecated: use PendingInView.
func PendingWindow(p Plan) int { return PendingInView(p) }
