package main

import (
	"strings"
	"unicode"
)

// clean makes text a peer sent (a BMC's error, a command's output, a
// hostname in a message) safe to print on a terminal: control characters
// (escape sequences: clipboard writes, screen clears, window titles; C0,
// DEL and C1) and bidirectional overrides are dropped, line breaks and
// tabs become spaces.
func clean(s string) string {
	if !needsClean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r), isBidi(r), r == unicode.ReplacementChar:
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsClean(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || isBidi(r) || r == unicode.ReplacementChar {
			return true
		}
	}
	return false
}

func isBidi(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 || r == 0x200E || r == 0x200F || r == 0x061C
}
