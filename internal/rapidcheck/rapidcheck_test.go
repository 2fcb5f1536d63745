package rapidcheck

import (
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"
)

// TestStaleFailFileFails shows that a failure file that no longer fits the
// test's draws is reported, where plain rapid.Check only logs it.
func TestStaleFailFileFails(t *testing.T) {
	dir := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.Chdir(wd) }()

	// A failure file for the inner test holding one value, where the
	// property now draws many: rapid calls it "no longer valid".
	name := t.Name() + "/inner"
	path := filepath.Join("testdata", "rapid", kindaSafe(name))
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(path, kindaSafe(name)+"-1-1.fail")
	content := "# [" + name + "] [rapid] draw x: 5\n#\nv0.4.8#1\n0x5\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	var w *tb
	t.Run("inner", func(t *testing.T) {
		w = &tb{T: t}
		rapid.Check(w, func(rt *rapid.T) {
			rapid.SliceOfN(rapid.Int(), 20, 20).Draw(rt, "xs")
		})
	})
	if len(w.stale) == 0 {
		t.Fatalf("the wrapper did not notice a failure file rapid could not replay")
	}
}

func kindaSafe(s string) string {
	out := []rune{}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			out = append(out, r)
		default:
			out = append(out, '_')
		}
	}
	return string(out)
}

// TestQuickUnlessLong (issue 38, point 17): a newcomer's go test draws
// QuickChecks cases per property; CI's REBOOTKIT_LONG=1, RAPID_CHECKS or
// -rapid.checks keep the count asked for. Old code: every run drew 100,
// and the root's go test took 113-151 s on 2 cores.
func TestQuickUnlessLong(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	if n, ok := checksFor(env(), false); !ok || n != QuickChecks {
		t.Errorf("quick run: got %d, %v; want %d", n, ok, QuickChecks)
	}
	for name, c := range map[string]struct {
		lookup func(string) (string, bool)
		flag   bool
	}{
		"CI":           {env(LongEnv, "1"), false},
		"RAPID_CHECKS": {env("RAPID_CHECKS", "7"), false},
		"flag":         {env(), true},
	} {
		if _, ok := checksFor(c.lookup, c.flag); ok {
			t.Errorf("%s: the count asked for must stand", name)
		}
	}
	if _, ok := checksFor(env(LongEnv, "0"), false); !ok {
		t.Errorf("REBOOTKIT_LONG=0 is a quick run")
	}
}

// TestCheckQuickDrawsFewer: in a quick run CheckQuick draws its own,
// smaller count, and Check draws QuickChecks again after it; in a long
// run (or with a chosen count) both draw the same.
func TestCheckQuickDrawsFewer(t *testing.T) {
	var few, after int
	CheckQuick(t, 3, func(*rapid.T) { few++ })
	Check(t, func(*rapid.T) { after++ })
	if !isQuick {
		if few != after {
			t.Errorf("a long run: CheckQuick drew %d cases, Check %d", few, after)
		}
		return
	}
	if few != 3 || after != QuickChecks {
		t.Errorf("a quick run: CheckQuick drew %d cases (want 3), Check after it %d (want %d)", few, after, QuickChecks)
	}
}
