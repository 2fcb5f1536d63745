package plan

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds on the record fields that grow with what the world says, so that
// a reboot record (and a page of records in a store) stays small whatever
// a fleet reports: a page of the etcd store holds 32 records and must fit
// etcd's 1.5 MiB request limit.
const (
	// MaxErrorBytes bounds Reboot.Error (and Plan.Waiting): longer text
	// (e.g. a job's error as the fleet reported it) is cut (BoundText).
	MaxErrorBytes = 1024
	// MaxLabelBytes bounds the labels of one server, keys and values
	// together (Validate refuses more).
	MaxLabelBytes = 4096
	// MaxNameBytes bounds a reboot's server UUID, hostname, platforms and
	// job UUID (Validate refuses longer ones).
	MaxNameBytes = 253
)

// BoundText returns s as a plan keeps a text from outside (a job's
// error): control characters and invalid UTF-8 replaced by '?', cut to
// at most max bytes on a character boundary, a cut marked with "...".
func BoundText(s string, max int) string {
	clean := func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return '?'
		}
		return r
	}
	if len(s) <= max && !strings.ContainsFunc(s, func(r rune) bool { return clean(r) != r }) {
		return s
	}
	limit := max
	cut := len(s) > max
	if cut {
		limit = max - len("...")
	}
	var b strings.Builder
	for _, r := range s {
		r = clean(r)
		if b.Len()+utf8.RuneLen(r) > limit {
			cut = true
			break
		}
		b.WriteRune(r)
	}
	if cut {
		b.WriteString("...")
	}
	return b.String()
}

// checkBounds checks a reboot's fields against MaxNameBytes and
// MaxLabelBytes.
func (r Reboot) checkBounds() error {
	for _, f := range []struct{ name, v string }{{"server_uuid", r.ServerUUID}, {"server_hostname", r.ServerHostname},
		{"boot_platform", r.BootPlatform}, {"current_platform", r.CurrentPlatform}, {"job_uuid", r.JobUUID}} {
		if len(f.v) > MaxNameBytes {
			return fmt.Errorf("%w: %s of %d bytes, at most %d", ErrTooLarge, f.name, len(f.v), MaxNameBytes)
		}
	}
	n := 0
	for k, v := range r.Labels {
		n += len(k) + len(v)
	}
	if n > MaxLabelBytes {
		return fmt.Errorf("%w: labels of %d bytes, at most %d in all", ErrTooLarge, n, MaxLabelBytes)
	}
	return nil
}
