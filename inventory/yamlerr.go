package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// ErrEmpty is wrapped (with ErrInvalid) when the inventory has no content
// at all: an empty file, or one with only comments.
var ErrEmpty = errors.New("the inventory is empty")

// decodeError turns a YAML decoding error into an operator's message: an
// empty document says so, syntax errors name the line the YAML stops
// making sense (yaml.v3 names the line where the enclosing block started,
// often line 1), and type errors name keys and values, not Go types.
func decodeError(data []byte, err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %w: no servers (see the README's inventory section for an example)", ErrInvalid, ErrEmpty)
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = Scrub(typeMessage(m))
		}
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(msgs, "; "))
	}
	msg := Scrub(strings.TrimPrefix(err.Error(), "yaml: "))
	msg = lineRE.ReplaceAllString(msg, "")
	hint := "check the indentation: keys of one server line up, list items start with \"- \", no tabs"
	switch {
	case strings.Contains(msg, "'}'") || strings.Contains(msg, "']'"):
		hint = "a { or [ not closed on this line?"
	case strings.Contains(msg, "quoted scalar"):
		hint = "a quote not closed?"
	}
	return fmt.Errorf("%w: line %d: %s (%s)", ErrInvalid, syntaxLine(data), msg, hint)
}

var (
	lineRE      = regexp.MustCompile(`^line \d+: `)
	unknownRE   = regexp.MustCompile(`^(line \d+): field (\S+) not found in type \S+$`)
	unmarshalRE = regexp.MustCompile(`^(line \d+): cannot unmarshal !!(\w+) (.*) into (\S+)$`)
)

// typeMessage rewrites one of yaml.v3's unmarshal errors.
func typeMessage(m string) string {
	if s := unknownRE.FindStringSubmatch(m); s != nil {
		return fmt.Sprintf("%s: unknown key %q (the README lists every inventory key)", s[1], s[2])
	}
	if s := unmarshalRE.FindStringSubmatch(m); s != nil {
		want := map[string]string{"bool": "true or false", "int": "a whole number", "string": "a text value",
			"[]string": "a list, like [ssh, host, drain]"}[s[4]]
		if want == "" {
			want = "a different kind of value"
		}
		val := strings.Trim(s[3], "`")
		if s[2] == "map" || s[2] == "seq" {
			val = map[string]string{"map": "a block of keys", "seq": "a list"}[s[2]]
		}
		return fmt.Sprintf("%s: %s: want %s", s[1], val, want)
	}
	return m
}

// syntaxLine is the line (1-based) where the document stops being valid
// YAML: the line after the longest prefix of whole lines that parses.
// Prefixes are bisected, so it takes O(log lines) parses.
func syntaxLine(data []byte) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	ok := func(k int) bool { // the first k lines parse
		var n yaml.Node
		err := yaml.Unmarshal(bytes.Join(lines[:k], nil), &n)
		return err == nil
	}
	lo, hi := 0, len(lines) // ok(lo); !ok(hi) (the whole document failed)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// hintError is an error whose message is written for operators (the fix,
// in the inventory's words) and that still matches the error it replaces
// with errors.Is.
type hintError struct {
	msg string
	err error
}

func (e *hintError) Error() string { return e.msg }
func (e *hintError) Unwrap() error { return e.err }
