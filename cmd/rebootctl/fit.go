package main

import (
	"strings"
	"unicode/utf8"
)

// fitWidth wraps lines to a terminal of width columns (0: as they are):
// a line too long goes on over continuation lines indented by four
// spaces, broken at spaces where it can, so that nothing is cut off
// (why the plan waits comes last on the progress line, and at 80 columns
// it was cut).
func fitWidth(lines []string, width int) []string {
	if width <= 0 {
		return lines
	}
	const indent = "    "
	var out []string
	for _, l := range lines {
		prefix := ""
		for {
			room := width - utf8.RuneCountInString(prefix)
			if room < 8 {
				room, prefix = width, ""
			}
			if utf8.RuneCountInString(l) <= room {
				out = append(out, prefix+l)
				break
			}
			cut := byteIndexOfRune(l, room)
			if sp := strings.LastIndexByte(l[:cut], ' '); sp > 0 {
				cut = sp
			}
			out = append(out, prefix+strings.TrimRight(l[:cut], " "))
			l = strings.TrimLeft(l[cut:], " ")
			prefix = indent
			if l == "" {
				break
			}
		}
	}
	return out
}

// byteIndexOfRune is the byte offset of rune n of s (len(s) past its end).
func byteIndexOfRune(s string, n int) int {
	i := 0
	for k := range s {
		if i == n {
			return k
		}
		i++
	}
	return len(s)
}
