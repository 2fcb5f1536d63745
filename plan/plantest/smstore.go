package plantest

import (
	"context"
	"crypto/sha256"
	"errors"
	"maps"
	"slices"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// world is one case of StateMachine: the fake fleet (the ground truth),
// the store under test, and what the kit did to them.
type world struct {
	t     *rapid.T
	ctx   context.Context
	clk   *fake.Clock
	fleet *fake.Fleet
	store plan.Store // the store under test, as newStore gave it
	uuid  string
	conc  int             // the plan's concurrency, as created
	core  map[string]bool // the core servers (the headnode among them)

	// Ground truth at job starts (started): the first violation, and
	// whether a server that is not core got a job.
	violation      string
	nonCoreStarted bool
	// refuse: servers whose BMC refuses now; refuseForGood: for good,
	// through the liveness phase too.
	refuse, refuseForGood map[string]bool

	// The operator: the last command that landed, and the stop or cancel
	// in force ("" after a run).
	lastCmd, halted string

	// versions maps every Version the store returned to the hash of the
	// document it came with; last is the plan as last read.
	versions map[string][32]byte
	last     plan.Plan
	// hook, if set, writes once in the next pass of the main executor,
	// between its read and its save; raced is the version that write
	// left, which the pass's save must not replace.
	hook   func()
	inHook bool
	raced  string
	// held is a plan read earlier, for a write with its stale version.
	held plan.Plan
}

// read reads the plan through the store's Get and checks its version: a
// version returned before comes back only with the document it came with
// (a write that lands changes it, and a version is never reused for
// other contents, or a writer that read it long ago would overwrite what
// it never saw).
func (w *world) read() plan.Plan {
	p, err := w.store.Get(w.ctx, w.uuid)
	if err != nil {
		w.t.Fatalf("Get %s: %v", w.uuid, err)
	}
	if p.Version == "" {
		w.t.Fatalf("Get %s returned no Version: compare-and-swap has nothing to compare", w.uuid)
	}
	doc, err := plan.Encode(p)
	if err != nil {
		w.t.Fatalf("Get %s returned a plan that does not encode: %v", w.uuid, err)
	}
	sum := sha256.Sum256(doc)
	if old, ok := w.versions[p.Version]; ok && old != sum {
		w.t.Fatalf("Version %q came back with another plan than it had (the last write did not change the version, or reused an old one): a writer holding it overwrites changes it never read:\n%s",
			p.Version, plan.Table(p))
	}
	w.versions[p.Version] = sum
	w.last = p
	return p
}

// commands are the operator's commands as rebootctl applies them.
var commands = map[string]func(plan.Plan) (plan.Plan, error){"run": plan.Run, "stop": plan.Stop, "cancel": plan.Cancel}

// command applies an operator's command as rebootctl does (CommandView,
// with the command recorded in the plan).
func (w *world) command(name string) {
	_, err := plan.CommandView(w.ctx, w.store, w.uuid, plan.Record(name, w.clk.Now(), commands[name]))
	switch {
	case err == nil:
		w.lastCmd = name
		if w.halted != "cancel" {
			w.halted = map[string]string{"run": "", "stop": "stop", "cancel": "cancel"}[name]
		}
	case !errors.Is(err, plan.ErrState):
		w.t.Fatalf("operator's %s: %v", name, err)
	}
	w.read()
}

// rewrite is a second tool that rewrites the whole plan as it read it
// (Edit): every write of the executors racing it must lose.
func (w *world) rewrite() {
	if _, err := plan.Edit(w.ctx, w.store, w.uuid, func(p plan.Plan) (plan.Plan, error) { return p, nil }); err != nil {
		w.t.Fatalf("a second writer's Edit: %v", err)
	}
	w.read()
}

// between runs the hook, if one is due, in a pass that read version base.
func (w *world) between(base string) {
	if w.hook == nil || w.inHook {
		return
	}
	h := w.hook
	w.hook, w.inHook = nil, true
	h()
	w.inHook = false
	if p := w.read(); p.Version != base {
		w.raced = p.Version
	}
}

// afterPass checks that a pass whose read was overtaken by the hook's
// write did not save over it (its version was stale).
func (w *world) afterPass() { w.overtaken(w.read().Version) }

// overtaken checks, after a pass that the hook's write overtook and before
// anything else wrote, that the store holds the version that write left:
// the pass's save, whose version was stale, did not land.
func (w *world) overtaken(version string) {
	if w.raced == "" {
		return
	}
	raced := w.raced
	w.raced = ""
	if version != raced {
		w.t.Fatalf("a write with a stale Version landed: a second writer wrote version %q between the executor's read and its save, and the save replaced it (version %q):\n%s",
			raced, version, plan.Table(w.read()))
	}
}

// staleMark is what a write with a stale version sets; it must never be
// read back.
const staleMark = "plantest: a write with a stale version"

// staleWrite writes the current plan with the version of the one held
// (read before a write since), through each write method the store has:
// each must fail with plan.ErrConflict and write nothing.
func (w *world) staleWrite(method int) {
	cur := w.read()
	if w.held.Version == "" || w.held.Version == cur.Version {
		return
	}
	var err error
	name := "Put"
	hs, head := w.store.(plan.HeadStore)
	vs, view := w.store.(plan.ViewStore)
	switch {
	case method == 1 && head:
		name = "PutHead"
		h, gerr := hs.GetHead(w.ctx, w.uuid)
		if gerr != nil {
			w.t.Fatalf("GetHead: %v", gerr)
		}
		h.Version, h.Waiting = w.held.Version, staleMark
		err = hs.PutHead(w.ctx, h)
	case method == 2 && view:
		name = "PutView"
		v, gerr := vs.GetView(w.ctx, w.uuid)
		if gerr != nil {
			w.t.Fatalf("GetView: %v", gerr)
		}
		v.Version, v.Waiting = w.held.Version, staleMark
		err = vs.PutView(w.ctx, v)
	default:
		q := cur.Clone()
		q.Version, q.Waiting = w.held.Version, staleMark
		err = w.store.Put(w.ctx, q)
	}
	if !errors.Is(err, plan.ErrConflict) {
		w.t.Fatalf("%s with the stale version %q (the stored one is %q): %v, want an error wrapping plan.ErrConflict (an operator's cancel would be overwritten)",
			name, w.held.Version, cur.Version, err)
	}
	if p := w.read(); p.Version != cur.Version || p.Waiting == staleMark {
		w.t.Fatalf("%s with a stale version was refused but wrote: version %q, was %q:\n%s", name, p.Version, cur.Version, plan.Table(p))
	}
}

// check checks what must hold after every step: the job starts (ground
// truth, world.started), one job and one reboot per server (ground
// truth), and the operator's last command in force in the stored plan.
func (w *world) check() {
	if w.violation != "" {
		w.t.Fatalf("%s:\n%s", w.violation, plan.Table(w.last))
	}
	for s, n := range w.fleet.JobsCreated() {
		if n > 1 {
			w.t.Fatalf("server %s got %d reboot jobs:\n%s", s, n, plan.Table(w.last))
		}
	}
	for s, n := range w.fleet.Reboots() {
		if n > 1 {
			w.t.Fatalf("server %s was rebooted %d times (ground truth):\n%s", s, n, plan.Table(w.last))
		}
	}
	ok := map[string][]plan.State{"": nil, "cancel": {plan.StateCanceled},
		"stop": {plan.StateStopped, plan.StateComplete, plan.StateFailed},
		"run":  {plan.StateRunning, plan.StateComplete, plan.StateFailed}}[w.lastCmd]
	if ok != nil && !slices.Contains(ok, w.last.State) {
		w.t.Fatalf("the operator's last command was %s, the stored plan is %s: a write lost it:\n%s", w.lastCmd, w.last.State, plan.Table(w.last))
	}
}

// sortedKeys returns m's keys in order (for draws that must replay).
func sortedKeys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}
