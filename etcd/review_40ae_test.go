package etcd

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
)

// pauseProcess stops this whole process (every goroutine and every timer,
// as a long GC pause, a VM migration or SIGSTOP does) for d; before it
// resumes it, a helper process asks etcd (its JSON gateway) for key and
// saves the answer in out: etcd's own word on the key while this process
// was still stopped.
func pauseProcess(t *testing.T, d time.Duration, ep, key, out string) {
	body := fmt.Sprintf(`{"key":"%s"}`, base64.StdEncoding.EncodeToString([]byte(key)))
	script := fmt.Sprintf("sleep %.3f; curl -s -X POST http://%s/v3/kv/range -d '%s' > %s; kill -CONT %d",
		d.Seconds(), ep, body, out, os.Getpid())
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	go func() { _ = cmd.Wait() }() // reaped later: this goroutine goes on at once when resumed
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		t.Error(err)
	}
	// The stop sometimes lands a few milliseconds after kill returns:
	// spin (yielding to no timer) until resumed.
	for e := time.Since(t0); e < d*9/10 && e < d+10*time.Second; e = time.Since(t0) {
	}
}

// TestReview40ae_PausedLeaderWritesAfterLeaseEnd: Leadership.Guard's doc:
// "the context it returns ends at that instant. A leader paused after Hold
// finds the context ended when it resumes", and reboot.Guard's "a process
// paused in between finds it past its deadline"; a store is told to check
// the context just before it writes (reboottest.Contract, the example's
// inventory, fake.RebootHosts do). But a context's deadline is enforced by
// a timer, and a paused process runs no timers either: when it resumes,
// the goroutine paused inside its fenced call usually runs first, reads
// ctx.Err() == nil, and writes. Here the fenced call is fake.RebootHosts'
// Update (ctx checked under its lock, just before the write), the process
// is paused (SIGSTOP) for 3 TTLs right before that check, while the etcd
// server (another process) lets the lease expire and deletes the election
// key: the next candidate may lead. Ground truth: etcd's answer, taken
// before this process resumed, has no election key, and the store's record
// holds the paused leader's write. Neither reboot's hold/Fenced nor the
// Guard compares the clock with the deadline (ctx.Deadline()), so only
// the timer's luck refuses the late write.
func TestReview40ae_PausedLeaderWritesAfterLeaseEnd(t *testing.T) {
	bin := os.Getenv("REBOOTKIT_ETCD_BIN")
	if bin == "" {
		t.Skip("needs REBOOTKIT_ETCD_BIN: an etcd server in another process, which goes on while this one is paused")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	ep, stop, err := startProcess(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	const ttl = 2
	landed, tries, valid := 0, 10, 0
	for i := 0; i < tries; i++ {
		pre := prefix(t) + strconv.Itoa(i) + "/"
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		c := Candidate{Client: cli, Prefix: pre, ID: "a", TTL: ttl}
		s, err := c.NewSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		l, err := c.Campaign(cctx, s)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
		h, _ := store.Get(ctx, "h")
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "late": ""}
		out := filepath.Join(t.TempDir(), "etcd.json")
		var paused time.Duration
		store.SetInterloper(func(string) {
			t0 := time.Now()
			pauseProcess(t, 3*ttl*time.Second, ep, l.Key, out)
			paused = time.Since(t0)
		})
		err = reboot.Fenced(ctx, l.Guard(), "reboot: update host h", func(gctx context.Context) error {
			_, err := store.Update(gctx, h)
			return err
		})
		store.SetInterloper(nil)
		s.Close()
		cli.Close()
		seen, rerr := os.ReadFile(out)
		if paused < 2*ttl*time.Second || rerr != nil || !strings.Contains(string(seen), `"header"`) || strings.Contains(string(seen), `"kvs"`) {
			// The stop came late (after the write), or etcd did not
			// answer: not a try.
			t.Logf("try %d: not a try: paused %v, etcd said %q (%v)", i, paused, seen, rerr)
			time.Sleep(3 * ttl * time.Second) // the helper's late SIGCONT
			continue
		}
		valid++
		got, _ := store.Get(ctx, "h")
		_, written := got.Annotations[reboot.AnnotationPrefix+"late"]
		t.Logf("try %d: etcd before resume: no election key (%s); Fenced returned %v; the write landed: %v", i, strings.TrimSpace(string(seen)), err, written)
		if written {
			landed++
		}
	}
	if valid == 0 {
		t.Fatal("setup: the process was never paused before its write")
	}
	if landed > 0 {
		t.Fatalf("%d of %d fenced writes from a leader paused %d s (3 TTLs) inside its Guard's call landed after etcd had deleted its election key (etcd's answer taken before the process resumed): the Guard's context had not ended when the process resumed (a deadline is a timer, paused with the process); hold/Fenced and the Guard never compare the clock with ctx.Deadline()", landed, valid, 3*ttl)
	}
}
