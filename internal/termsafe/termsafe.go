// Package termsafe makes text a peer sent (a BMC's error, a command's
// output) safe to store, log and print on an operator's terminal.
package termsafe

import (
	"strings"
	"unicode"
)

// Clean drops control characters (escape sequences that write the
// clipboard, clear the screen or set the window title: C0, DEL and C1),
// bidirectional overrides and invalid UTF-8 from s; line breaks and tabs
// become spaces, so the result is one line.
func Clean(s string) string {
	return clean(s, false)
}

// CleanBlock is Clean that keeps line breaks (for multi-line output such
// as a table).
func CleanBlock(s string) string {
	return clean(s, true)
}

func clean(s string, keepLines bool) string {
	if !strings.ContainsFunc(s, bad) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\n' && keepLines:
			b.WriteByte('\n')
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case bad(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func bad(r rune) bool {
	return unicode.IsControl(r) || r == unicode.ReplacementChar || r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 ||
		r == 0x200E || r == 0x200F || r == 0x061C
}
