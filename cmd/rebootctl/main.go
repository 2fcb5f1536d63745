// Command rebootctl creates and runs rolling reboot plans over real
// servers: the seed's `sdcadm reboot-plan` commands, with an inventory of
// servers and their BMCs (Redfish or IPMI) and an executor that survives
// its own restarts.
//
//	rebootctl plan create --target PLATFORM [--core|--non-core|--all|SERVER...] [-N rate] [-n] [-W] [-s] [-r] [-w]
//	rebootctl plan run|stop|cancel|watch|show|report PLAN
//	rebootctl plan list
//	rebootctl plan abandon PLAN SERVER
//	rebootctl executor
//
// plan create -n is a dry run: it checks every server of the plan without
// changing its power (the BMC answers, one login works, the power state
// reads, the health check passes, the drain command exists), prints what
// would fail and stores nothing. plan report writes the plan's timeline
// as one self-contained HTML file.
//
// Exit codes: 0 done; 1 an error; 2 a usage error; 3 the plan was not
// created because of warnings (-W creates it anyway); 4 the plan ended
// with failed reboots; 5 the plan was canceled; 6 the dry run (-n) found
// servers that would fail; 130 watch was interrupted (the plan keeps
// running).
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/muesli/termenv"
	"golang.org/x/term"

	"github.com/rebootkit/rebootkit/inventory"
	"github.com/rebootkit/rebootkit/plan"
)

// Exit codes.
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitWarnings  = 3
	exitFailed    = 4
	exitCanceled  = 5
	exitInterrupt = 130
	exitDryRun    = 6 // the dry run found servers that would fail
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `rebootctl: rolling reboots of real servers, core servers first.

Usage:
  rebootctl plan create --target PLATFORM [--core|--non-core|--all|SERVER...] [options]
  rebootctl plan run PLAN [-w]
  rebootctl plan stop PLAN
  rebootctl plan cancel PLAN
  rebootctl plan watch PLAN [--json]
  rebootctl plan show PLAN [--json]
  rebootctl plan report PLAN [-o FILE]
  rebootctl plan list [--json]
  rebootctl plan abandon PLAN SERVER
  rebootctl executor [--json] [options]

Every command takes --store FILE (default $REBOOTCTL_STORE or ./rebootctl.db)
and --inventory FILE (default $REBOOTCTL_INVENTORY or ./inventory.yaml).
Relative paths are from the current directory: the executor and every
command must name the same store, so give a systemd unit absolute paths
(the store file's own: a symbolic link is refused).
"plan run", "plan stop" and "plan cancel" record the command next to the
store (FILE.commands), where it lands at once whatever the executor
writes; where that file is another user's or would be unusable by the
store's owner or group, the command is applied to the store itself
(waiting for the executor's write) and says why and the fix.
Run "rebootctl plan create -h" or "rebootctl executor -h" for their options.
"plan create -n" is a dry run: it checks every server (BMC, login, power
state, health check, drain command), changes nothing and stores nothing.
"plan report" writes the plan's timeline as one HTML file (no network).
"plan abandon" gives up on one server: the executor never powers it on or
off again, ends its job (undrained, failed) and shows its last known state.
In an ended plan it is refused while another plan reboots the server (it
names that plan).

Exit codes: 0 done; 1 error; 2 usage; 3 not created because of warnings;
4 the plan ended with failures; 5 the plan was canceled; 6 the dry run
found servers that would fail; 130 watch interrupted (the plan keeps
running).
`

// env holds what every command shares.
type env struct {
	ctx context.Context
	// turns shares the executor's passes among its plans (plan.Turns).
	turns     plan.Turns
	out, errw io.Writer
	store     string
	inventory string
	json      bool
	// connect opens a BMC's power controller (one login).
	connect connectFunc
	// creating: this command may create the store (plan create only).
	creating bool
	// named puts hostnames for server UUIDs in the executor's pass
	// errors (set by the executor).
	named *strings.Replacer
	// skippedAbandons: the recorded abandons (server and plan) of
	// servers the inventory no longer lists, each logged once.
	skippedAbandons map[string]bool
	// pending: which plans have commands waiting next to the store
	// (lockedStore.CommandPending).
	pending pendingCmds
	// writes: whether other processes wrote the store since this
	// executor's pass read a plan (lockedStore.CommandPending).
	writes storeWrites
	// sideSaid: why the side files are not used, each said once
	// (sideNote).
	sideMu   sync.Mutex
	sideSaid map[string]bool
	// checkStore, when set (by the executor: executorOwnsFile), judges
	// the store's file each open opened, before a byte of it is read.
	checkStore func(*os.File) error
	// leaseID, when set (by the executor, once it claimed the store), is
	// its lease's ID: the executor's writes of plans land only while the
	// store's lease is that one (lockedStore.fence).
	leaseID string
}

func commonFlags(fs *flag.FlagSet, e *env) {
	fs.StringVar(&e.store, "store", "", "the plan store, a bbolt file (default $REBOOTCTL_STORE, else rebootctl.db)")
	fs.StringVar(&e.inventory, "inventory", "", "the inventory, YAML (default $REBOOTCTL_INVENTORY, else inventory.yaml)")
}

// jsonFlag adds --json to the commands that honour it (each says how in
// help); the others refuse it.
func jsonFlag(fs *flag.FlagSet, e *env, help string) {
	fs.BoolVar(&e.json, "json", false, help)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, args []string, out, errw io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(out, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	e := &env{ctx: ctx, out: out, errw: errw, connect: inventory.Connect}
	switch args[0] {
	case "executor":
		return e.executor(args[1:])
	case "plan":
		if len(args) < 2 {
			fmt.Fprint(errw, usage)
			return exitUsage
		}
		switch args[1] {
		case "create":
			return e.create(args[2:])
		case "run", "stop", "cancel":
			return e.command(args[1], args[2:])
		case "watch":
			return e.watchCmd(args[2:])
		case "show":
			return e.show(args[2:])
		case "list":
			return e.list(args[2:])
		case "report":
			return e.report(args[2:])
		case "abandon":
			return e.abandon(args[2:])
		}
	}
	fmt.Fprintf(errw, "rebootctl: unknown command %q\n\n%s", strings.Join(args, " "), usage)
	return exitUsage
}

// parse parses a subcommand's flags (allowing flags after arguments).
func (e *env) parse(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	fs.SetOutput(e.errw)
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		if fs.NArg() == 0 {
			if e.store == "" {
				e.store = envOr("REBOOTCTL_STORE", "rebootctl.db")
			}
			if e.inventory == "" {
				e.inventory = envOr("REBOOTCTL_INVENTORY", "inventory.yaml")
			}
			return rest, 0, true
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// oneUUID reports whether the command got exactly one plan UUID, and says
// so when it did not.
func (e *env) oneUUID(command string, rest []string) bool {
	if len(rest) != 1 {
		fmt.Fprintf(e.errw, "rebootctl plan %s: give one plan UUID\n", command)
		return false
	}
	return true
}

// operator records an operator's command in the plan (for its report).
func (e *env) operator(name string, f func(plan.Plan) (plan.Plan, error)) func(plan.Plan) (plan.Plan, error) {
	return plan.Record(name, time.Now().UTC(), f)
}

func (e *env) fail(err error) int {
	fmt.Fprintf(e.errw, "rebootctl: %v\n", err)
	return exitError
}

// openStore opens the plan store, waiting while the executor holds it
// (it opens it for each read and write only, and lets a command that
// waits go first: storewait.go).
func (e *env) openStore() (*plan.BoltStore, error) {
	if err := e.storeExists(); err != nil {
		return nil, err
	}
	defer announceWait(e.store)()
	return e.waitStore()
}

// waitStore opens the plan store, waiting at most 30 s for its lock, and
// applies first the operators' stops and cancels recorded next to it
// (cmdfile.go): no one reads or writes a plan the store has not yet seen
// stopped or canceled.
func (e *env) waitStore() (*plan.BoltStore, error) {
	s, _, err := e.waitStoreNext()
	return s, err
}

// waitStoreNext is waitStore, and the side file's mark as the open
// applied it: every command recorded up to it is in the store.
func (e *env) waitStoreNext() (*plan.BoltStore, cmdMark, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := plan.OpenBoltWith(e.store, plan.BoltOptions{Check: e.checkStore})
		if err == nil {
			next, err := applyCommands(e.ctx, s, e.store, e.sideNote)
			if err != nil {
				s.Close()
				return nil, cmdMark{}, err
			}
			return s, next, nil
		}
		if !errors.Is(err, plan.ErrLocked) || time.Now().After(deadline) {
			return s, cmdMark{}, err
		}
		select {
		case <-e.ctx.Done():
			return nil, cmdMark{}, e.ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errNoStore: the plan store named does not exist (only plan create makes
// one): a typo, or another directory, must not look like an empty store.
var errNoStore = errors.New("no plan store")

// storeExists refuses a store file that does not exist, unless the command
// creates plans.
func (e *env) storeExists() error {
	if e.creating {
		return nil
	}
	if _, err := os.Stat(e.store); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w at %s: it does not exist. Give the store plans were created in (--store or REBOOTCTL_STORE), or create a plan first with \"rebootctl plan create\"", errNoStore, e.store)
	}
	return nil
}

func (e *env) create(args []string) int {
	e.creating = true
	fs := flag.NewFlagSet("rebootctl plan create", flag.ContinueOnError)
	commonFlags(fs, e)
	jsonFlag(fs, e, "print the plan created (or the dry run's findings) as JSON")
	target := fs.String("target", "", "the boot platform the servers reboot into (required)")
	core := fs.Bool("core", false, "reboot the core servers (the headnode included)")
	nonCore := fs.Bool("non-core", false, "reboot the servers that are not core")
	all := fs.Bool("all", false, "reboot every server, core first")
	fs.BoolVar(all, "a", false, "same as --all")
	rate := fs.String("rate", "5", "servers offline at once: a count, or a percentage like 10%")
	fs.StringVar(rate, "N", "5", "same as --rate")
	dry := fs.Bool("dry-run", false, "dry run: check every server without changing its power (BMC, login, power state, health check, drain command), print what would fail, store nothing")
	fs.BoolVar(dry, "n", false, "same as --dry-run")
	ignore := fs.Bool("ignore-warnings", false, "create the plan despite warnings (servers already on the target platform, downgrades)")
	fs.BoolVar(ignore, "W", false, "same as --ignore-warnings")
	skip := fs.Bool("skip-current", false, "leave out servers already on the target platform")
	fs.BoolVar(skip, "s", false, "same as --skip-current")
	runNow := fs.Bool("run", false, "run the plan right after creating it")
	fs.BoolVar(runNow, "r", false, "same as --run")
	watch := fs.Bool("watch", false, "watch the plan (with --run: its execution)")
	fs.BoolVar(watch, "w", false, "same as --watch")
	budget := fs.Int("failure-budget", 0, "reboots that may fail before the plan stops starting new ones")
	id := fs.String("uuid", "", "the plan's UUID: "+uuidRule+" (default: a random one)")
	pf := &policyFlags{}
	pf.register(fs)
	servers, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	sel := plan.SelectList
	n := 0
	for _, b := range []struct {
		on bool
		s  plan.Selection
	}{{*core, plan.SelectCore}, {*nonCore, plan.SelectNonCore}, {*all, plan.SelectAll}} {
		if b.on {
			sel = b.s
			n++
		}
	}
	if n > 1 || n == 1 && len(servers) > 0 || n == 0 && len(servers) == 0 {
		fmt.Fprintln(e.errw, "rebootctl plan create: give one of --core, --non-core, --all, or servers")
		return exitUsage
	}
	if *target == "" {
		fmt.Fprintln(e.errw, "rebootctl plan create: --target is required")
		return exitUsage
	}
	conc, err := parseRate(*rate)
	if err != nil {
		fmt.Fprintf(e.errw, "rebootctl plan create: --rate: %v\n", err)
		return exitUsage
	}
	if *id != "" {
		if err := plan.ValidUUID(*id); err != nil {
			fmt.Fprintf(e.errw, "rebootctl plan create: --uuid %q: %s\n", *id, uuidRule)
			return exitUsage
		}
	}
	if *dry && (*runNow || *watch) {
		fmt.Fprintln(e.errw, "rebootctl plan create: a dry run (-n) only checks the servers: it has nothing to run or watch")
		return exitUsage
	}
	inv, err := inventory.Load(e.inventory)
	if err != nil {
		return e.fail(err)
	}
	if *id == "" {
		*id = newUUID()
	}
	// A dry run stores nothing: it reads the store if there is one, and
	// creates none where there is not.
	var st *plan.BoltStore
	var existing []plan.Plan
	var lerr error
	if _, serr := os.Stat(e.store); !*dry || serr == nil {
		if st, err = e.openStore(); err != nil {
			return e.fail(err)
		}
		existing, lerr = st.List(e.ctx)
	}
	closeStore := func() {
		if st != nil {
			st.Close()
		}
	}
	opts := plan.CreateOptions{UUID: *id, Target: *target, Select: sel, Servers: servers,
		Concurrency: conc, FailureBudget: plan.Count(*budget), IgnoreWarnings: *ignore || *dry, SkipCurrent: *skip,
		Existing: existing, CreatedAt: time.Now().UTC()}
	if err := pf.apply(inv, &opts); err != nil {
		closeStore()
		fmt.Fprintf(e.errw, "rebootctl plan create: %v\n", err)
		return exitUsage
	}
	fleetNow, reach := platformsReached(inv.PlanServers(), existing)
	p, warns, err := plan.Create(fleetNow, opts)
	for _, w := range warns {
		r, ok := reach[w.Server]
		fmt.Fprintf(e.errw, "warning: %s%s\n", warningText(w), reachedNote(r, ok))
	}
	if *dry {
		closeStore()
		return e.dryRun(inv, p, warns, *ignore, err, func() []plan.Reboot { return chosen(fleetNow, opts) }, existing)
	}
	if errors.Is(err, plan.ErrWarnings) {
		st.Close()
		fmt.Fprintf(e.errw, "rebootctl: %s\n", warningsRefused(warns))
		return exitWarnings
	}
	if errors.Is(err, plan.ErrInOtherPlan) || errors.Is(err, plan.ErrServerInPlan) {
		st.Close()
		fmt.Fprintf(e.errw, "rebootctl: %s\n", inOtherPlans(chosen(fleetNow, opts), existing))
		return exitError
	}
	if err == nil {
		err = st.Create(e.ctx, p)
		if errors.Is(err, plan.ErrServerInPlan) { // a plan created since we listed
			others, _ := st.List(e.ctx)
			st.Close()
			fmt.Fprintf(e.errw, "rebootctl: %s\n", inOtherPlans(p.Reboots, others))
			return exitError
		}
	}
	if err == nil && *runNow {
		p, err = plan.Command(e.ctx, st, p.UUID, e.operator("run", plan.Run))
	}
	st.Close()
	if err != nil {
		if lerr != nil {
			fmt.Fprintf(e.errw, "rebootctl: store: %v\n", lerr)
		}
		return e.fail(errors.New(explain(err, *id)))
	}
	if e.json {
		e.printJSON(map[string]any{"uuid": p.UUID, "state": p.State, "servers": len(p.Reboots), "concurrency": p.Concurrency, "warnings": warnStrings(warns)})
	} else {
		fmt.Fprintf(e.out, "created plan %s: %d server(s), concurrency %d, %s\n", p.UUID, len(p.Reboots), p.Concurrency, p.State)
		for _, l := range policyLines(p) {
			fmt.Fprintf(e.out, "  %s\n", l)
		}
		if !*runNow {
			fmt.Fprintf(e.out, "run it with: rebootctl plan run %s\n", p.UUID)
		}
	}
	if *watch {
		return e.watch(p.UUID)
	}
	return exitOK
}

func warnStrings(ws []plan.Warning) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.String())
	}
	return out
}

func parseRate(s string) (plan.Limit, error) {
	pct := strings.HasSuffix(s, "%")
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || n < 1 || pct && n > 100 {
		return plan.Limit{}, fmt.Errorf("%q: want a count >= 1 or a percentage 1%%-100%%", s)
	}
	if pct {
		return plan.Percent(n), nil
	}
	return plan.Count(n), nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (e *env) command(name string, args []string) int {
	fs := flag.NewFlagSet("rebootctl plan "+name, flag.ContinueOnError)
	commonFlags(fs, e)
	jsonFlag(fs, e, "print the plan's state as JSON")
	watch := false
	if name == "run" {
		fs.BoolVar(&watch, "watch", false, "watch the plan's execution")
		fs.BoolVar(&watch, "w", false, "same as --watch")
	}
	rest, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if !e.oneUUID(name, rest) {
		return exitUsage
	}
	v, err := e.operatorCommand(name, rest[0])
	if errors.Is(err, errNoStore) {
		return e.fail(err)
	}
	p := v.Plan
	if errors.Is(err, plan.ErrState) {
		return e.fail(fmt.Errorf("plan %s is %s: it cannot be %s", p.UUID, p.State, map[string]string{"run": "run again (create a new plan)", "stop": "stopped", "cancel": "canceled"}[name]))
	}
	if err != nil {
		return e.fail(errors.New(explain(err, rest[0])))
	}
	if err := notInEffect(name, v); err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(map[string]any{"uuid": p.UUID, "state": p.State, "in_flight": len(v.Index.InFlight)})
	} else {
		fmt.Fprintln(e.out, commandDone(name, v))
	}
	if watch {
		return e.watch(p.UUID)
	}
	return exitOK
}

// operatorCommand runs, stops or cancels plan uuid: it records the
// command next to the store first (cmdfile.go), where it lands at once
// whatever the executor is writing, then opens the store (which applies
// it, unless the executor did already) for its outcome and what is still
// in flight.
func (e *env) operatorCommand(name, uuid string) (plan.View, error) {
	// A typo ('p1 ') is refused here, never recorded: the store would
	// refuse it anyway (applyCommands), but only once opened.
	if err := plan.ValidUUID(uuid); err != nil {
		return plan.View{}, err
	}
	if err := e.storeExists(); err != nil {
		return plan.View{}, err
	}
	if err := sideUsable(e.store); err != nil {
		// A side file this user made would keep the executor's user
		// from its store (or the group's operators from theirs), or
		// the side files are another user's: the command goes to the
		// store itself, as soon as the executor lets it go.
		e.sideNote(err)
		fmt.Fprintf(e.warnw(), "rebootctl: the %s is not recorded next to the store; it is applied to the store directly, which may wait for the executor's write\n", name)
		return e.commandDirect(name, uuid)
	}
	seq, err := recordCommand(e.ctx, e.store, uuid, name, time.Now().UTC())
	if err != nil {
		return plan.View{}, err
	}
	return e.commandOutcome(name, uuid, seq)
}

// sideNote says err, why the side files of the store are not used (or
// not all), once per process.
func (e *env) sideNote(err error) {
	e.sideMu.Lock()
	defer e.sideMu.Unlock()
	msg := err.Error()
	if e.sideSaid[msg] {
		return
	}
	if e.sideSaid == nil {
		e.sideSaid = map[string]bool{}
	}
	e.sideSaid[msg] = true
	fmt.Fprintf(e.warnw(), "rebootctl: %s\n", clean(msg))
}

// warnw is where warnings go: e.errw, or nowhere when it is not set.
func (e *env) warnw() io.Writer {
	if e.errw == nil {
		return io.Discard
	}
	return e.errw
}

// commandDirect applies the command to the store itself (no side file):
// it lands once the store is open (openStore waits for the executor to
// let it go).
func (e *env) commandDirect(name, uuid string) (plan.View, error) {
	st, err := e.openStore()
	if err != nil {
		return plan.View{}, err
	}
	defer st.Close()
	return plan.CommandView(e.ctx, st, uuid, e.operator(name, cmdFuncs[name]))
}

// commandOutcome opens the store (which applies the commands recorded
// next to it) and returns the outcome of the command seq recorded there,
// with the plan's header and what it has in flight.
func (e *env) commandOutcome(name, uuid string, seq int64) (plan.View, error) {
	st, err := e.openStore()
	if err != nil {
		return plan.View{}, fmt.Errorf("the %s is recorded (no reboot starts any more) and is applied when the store opens; reading its outcome: %w", name, err)
	}
	defer st.Close()
	rec, found, err := commandOutcome(e.ctx, e.store, seq)
	if err != nil {
		return plan.View{}, err
	}
	if !found || !rec.Applied {
		return plan.View{}, fmt.Errorf("the %s of plan %s was recorded but is no longer in %s: another program rewrote that file", name, uuid, cmdFilePath(e.store))
	}
	v, herr := st.GetHead(e.ctx, uuid)
	if err := errOutcome(rec); err != nil {
		return v, err
	}
	return v, herr
}

func (e *env) show(args []string) int {
	fs := flag.NewFlagSet("rebootctl plan show", flag.ContinueOnError)
	commonFlags(fs, e)
	jsonFlag(fs, e, "print the whole plan as JSON")
	rest, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if !e.oneUUID("show", rest) {
		return exitUsage
	}
	st, err := e.openStore()
	if err != nil {
		return e.fail(err)
	}
	p, err := st.Get(e.ctx, rest[0])
	ex := e.readExecutor(st)
	st.Close()
	if err != nil {
		return e.fail(errors.New(explain(err, rest[0])))
	}
	if e.json {
		doc, err := plan.Encode(p)
		if err != nil {
			return e.fail(err)
		}
		fmt.Fprintf(e.out, "%s\n", doc)
		return exitOK
	}
	// Everything printed may hold a peer's text (a BMC's error, a
	// command's output): control characters dropped.
	fmt.Fprint(e.out, cleanBlock(plan.Table(p)))
	for _, l := range policyLines(p) {
		fmt.Fprintln(e.out, clean(l))
	}
	s := plan.Summarize(p, time.Now())
	fmt.Fprintln(e.out, s.Line(40))
	for _, l := range outputLines(p.WaitingOutput) {
		fmt.Fprintln(e.out, clean(l))
	}
	for _, r := range p.Reboots {
		for _, note := range serverNotes(ex, r.ServerUUID, time.Now()) {
			fmt.Fprintf(e.out, "  %-20s %s\n", clean(r.ServerHostname), clean(note))
		}
	}
	if p.Unfinished() {
		for _, l := range executorLines(ex, e.store, time.Now()) {
			fmt.Fprintln(e.out, clean(l))
		}
	}
	return exitOK
}

func (e *env) list(args []string) int {
	fs := flag.NewFlagSet("rebootctl plan list", flag.ContinueOnError)
	commonFlags(fs, e)
	jsonFlag(fs, e, "print the plans as JSON")
	if _, code, ok := e.parse(fs, args); !ok {
		return code
	}
	st, err := e.openStore()
	if err != nil {
		return e.fail(err)
	}
	plans, err := st.List(e.ctx)
	ex := e.readExecutor(st)
	st.Close()
	type row struct {
		UUID     string     `json:"uuid"`
		State    plan.State `json:"state"`
		Servers  int        `json:"servers"`
		Done     int        `json:"done"`
		Failed   int        `json:"failed"`
		InFlight int        `json:"in_flight"`
		Created  string     `json:"created_at,omitempty"`
		DryRun   bool       `json:"dry_run,omitempty"`
	}
	rows := []row{}
	for _, p := range plans {
		s := plan.Summarize(p, time.Now())
		r := row{UUID: p.UUID, State: p.State, Servers: s.Total, Done: s.Done, Failed: s.Failed, InFlight: s.InFlight, DryRun: p.DryRun}
		if p.CreatedAt != nil {
			r.Created = p.CreatedAt.UTC().Format(time.RFC3339)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Created < rows[j].Created })
	if e.json {
		e.printJSON(rows)
	} else {
		uw, sw := len("UUID"), len("STATE")
		state := func(r row) string {
			if r.DryRun { // stored by an older rebootctl: it rebooted nothing
				return string(r.State) + " (dry run)"
			}
			return string(r.State)
		}
		for _, r := range rows {
			uw, sw = max(uw, len(r.UUID)), max(sw, len(state(r)))
		}
		fmt.Fprintf(e.out, "%-*s  %-*s  %7s  %5s  %6s  %9s  %s\n", uw, "UUID", sw, "STATE", "SERVERS", "DONE", "FAILED", "IN FLIGHT", "CREATED")
		for _, r := range rows {
			fmt.Fprintf(e.out, "%-*s  %-*s  %7d  %5d  %6d  %9d  %s\n", uw, r.UUID, sw, state(r), r.Servers, r.Done, r.Failed, r.InFlight, r.Created)
		}
		for _, l := range executorLines(ex, e.store, time.Now()) {
			fmt.Fprintln(e.out, l)
		}
	}
	if err != nil {
		return e.fail(err)
	}
	return exitOK
}

func (e *env) printJSON(v any) {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (e *env) watchCmd(args []string) int {
	fs := flag.NewFlagSet("rebootctl plan watch", flag.ContinueOnError)
	commonFlags(fs, e)
	jsonFlag(fs, e, "print one JSON object per line each time the plan's progress changes")
	rest, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if !e.oneUUID("watch", rest) {
		return exitUsage
	}
	return e.watch(rest[0])
}

// watch draws the plan's progress until it ends (exit code by its end
// state) or the user interrupts (the plan keeps running).
func (e *env) watch(uuid string) int {
	f, isFile := e.out.(*os.File)
	tty := !e.json && isFile && term.IsTerminal(int(f.Fd()))
	var tout *termenv.Output
	if tty {
		tout = termenv.NewOutput(f)
		tout.HideCursor()
		defer tout.ShowCursor()
	}
	lastLines, last := 0, ""
	var seen plan.View
	for {
		v, ex, err := e.view(uuid)
		if err != nil && !errors.Is(err, context.Canceled) {
			return e.fail(errors.New(explain(err, uuid)))
		}
		if err == nil && e.json {
			seen = v
			if doc := watchJSON(v); doc != last {
				fmt.Fprintln(e.out, doc)
				last = doc
			}
		} else if err == nil {
			seen = v
			lines := render(v, ex, e.store, time.Now())
			// On a pipe, print when something changes other than the
			// "for 12s" counters (they change every second).
			text := strings.Join(render(v, ex, e.store, time.Time{}), "\n")
			switch {
			case tty:
				if lastLines > 0 {
					tout.ClearLines(lastLines) // from the line below the view up to its first line
				}
				width := 0
				if w, _, err := term.GetSize(int(f.Fd())); err == nil {
					width = w
				}
				lines = fitWidth(lines, width)
				for _, l := range lines {
					fmt.Fprintln(e.out, l)
				}
				lastLines = len(lines)
			case text != last:
				fmt.Fprintf(e.out, "%s %s\n", time.Now().UTC().Format("15:04:05"), strings.Join(lines, "\n         "))
			}
			last = text
		}
		if err == nil {
			if !v.Unfinished() {
				switch v.State {
				case plan.StateFailed:
					return exitFailed
				case plan.StateCanceled:
					return exitCanceled
				}
				return exitOK
			}
		}
		select {
		case <-e.ctx.Done():
			if seen.UUID == "" {
				seen.UUID, seen.State = uuid, plan.StateRunning
			}
			fmt.Fprint(e.errw, interrupted(seen))
			return exitInterrupt
		case <-time.After(time.Second):
		}
	}
}

func (e *env) view(uuid string) (plan.View, *executorStatus, error) {
	st, err := e.openStore()
	if err != nil {
		return plan.View{}, nil, err
	}
	defer st.Close()
	v, err := st.GetView(e.ctx, uuid)
	return v, e.readExecutor(st), err
}

// render is the watch view: a header, the progress bar, why it waits, and
// one line per reboot in flight (with how long it has been in its step,
// unless now is zero), what the executor says of its server, and when the
// executor was last seen (unless store is "").
func render(v plan.View, ex *executorStatus, store string, now time.Time) []string {
	s := v.Summary()
	if !now.IsZero() {
		s = v.SummaryAt(now)
	}
	head := fmt.Sprintf("plan %s: %s, concurrency %d", v.UUID, v.State, v.Concurrency)
	if v.DryRun {
		head += " (dry run: nothing is rebooted)"
	}
	lines := []string{head, s.Line(40)}
	lines = append(lines, outputLines(v.WaitingOutput)...)
	for _, r := range v.Reboots {
		if !r.Step.InFlight() {
			continue
		}
		since := "-"
		if r.StepSince != nil && !now.IsZero() {
			since = now.Sub(*r.StepSince).Round(time.Second).String()
		}
		role := ""
		if r.Headnode {
			role = " (headnode)"
		} else if r.Core {
			role = " (core)"
		}
		lines = append(lines, fmt.Sprintf("  %-20s %-16s for %s%s", r.ServerHostname, r.Step, since, role))
		for _, note := range serverNotes(ex, r.ServerUUID, now) {
			lines = append(lines, "      "+note)
		}
	}
	if v.Unfinished() && store != "" {
		lines = append(lines, executorLines(ex, store, now)...)
	}
	for i, l := range lines {
		lines[i] = clean(l) // a peer's text (BMC errors, command output) never reaches the terminal raw
	}
	return lines
}

// watchJSON is one line of "plan watch --json": the plan's progress as
// JSON (the reboots in flight by server and step), without the counters
// that change every second, so that a line is printed only on a change.
func watchJSON(v plan.View) string {
	s := v.Summary()
	type reboot struct {
		Server string    `json:"server"`
		Step   plan.Step `json:"step"`
		Since  string    `json:"since,omitempty"`
	}
	doc := struct {
		UUID     string     `json:"uuid"`
		State    plan.State `json:"state"`
		Total    int        `json:"total"`
		Done     int        `json:"done"`
		InFlight int        `json:"in_flight"`
		Failed   int        `json:"failed"`
		Left     int        `json:"left"`
		Waiting  string     `json:"waiting,omitempty"`
		Reboots  []reboot   `json:"in_flight_reboots"`
	}{UUID: v.UUID, State: v.State, Total: s.Total, Done: s.Done, InFlight: s.InFlight, Failed: s.Failed, Left: s.Left,
		Waiting: clean(s.Waiting), Reboots: []reboot{}}
	for _, r := range v.Reboots {
		if !r.Step.InFlight() {
			continue
		}
		rb := reboot{Server: clean(r.ServerHostname), Step: r.Step}
		if r.StepSince != nil {
			rb.Since = r.StepSince.UTC().Format(time.RFC3339)
		}
		doc.Reboots = append(doc.Reboots, rb)
	}
	raw, _ := json.Marshal(doc)
	return string(raw)
}
