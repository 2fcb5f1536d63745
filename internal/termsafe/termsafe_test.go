package termsafe

import (
	"testing"
	"unicode"
)

func TestClean(t *testing.T) {
	for _, c := range []struct{ in, want, block string }{
		{"plain text", "plain text", "plain text"},
		{"a\x1b]52;c;ZXZpbA==\x07b", "a]52;c;ZXZpbA==b", "a]52;c;ZXZpbA==b"},
		{"x\x1b[2J\x1b]0;pwned\x07y", "x[2J]0;pwnedy", "x[2J]0;pwnedy"},
		{"line1\nline2\r\tz", "line1 line2  z", "line1\nline2  z"},
		{"c1\u009b31m bidi\u202egnp.exe bad\xff", "c131m bidignp.exe bad", "c131m bidignp.exe bad"},
	} {
		if got := Clean(c.in); got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := CleanBlock(c.in); got != c.block {
			t.Errorf("CleanBlock(%q) = %q, want %q", c.in, got, c.block)
		}
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "ok", "\x1b]52;c;x\x07", "a\nb", "\u202e", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Clean(s), CleanBlock(s)} {
			for _, r := range out {
				if r != '\n' && (unicode.IsControl(r) || bad(r)) {
					t.Fatalf("%q kept %U", out, r)
				}
			}
		}
		if Clean(Clean(s)) != Clean(s) {
			t.Fatalf("not idempotent on %q", s)
		}
	})
}
