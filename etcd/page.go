package etcd

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// encodePage returns the JSON of a page of reboot records, byte for byte
// what encoding/json's Encoder with SetEscapeHTML(false) writes for it
// (TestEncodePageIsJSON compares them with every field of plan.Reboot set
// and each one unset, so that a field added to Reboot later fails the
// test until it is encoded here), about five times faster: a pass encodes
// every page it changed. No HTML escaping: '<', '>' and '&' take one byte
// each, not six (\u003c), so a record within plan's byte bounds
// (MaxNameBytes, MaxLabelBytes, MaxErrorBytes) encodes to about as many
// bytes as its text, and a page within maxTxnBytes. Any JSON decoder
// reads it.
func encodePage(rs []plan.Reboot) ([]byte, error) {
	if rs == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 320*len(rs))
	b = append(b, '[')
	var err error
	for i := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendReboot(b, &rs[i]); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

func appendReboot(b []byte, r *plan.Reboot) ([]byte, error) {
	b = append(b, `{"server_uuid":`...)
	b = appendString(b, r.ServerUUID)
	b = append(b, `,"server_hostname":`...)
	b = appendString(b, r.ServerHostname)
	b = append(b, `,"boot_platform":`...)
	b = appendString(b, r.BootPlatform)
	b = append(b, `,"current_platform":`...)
	b = appendString(b, r.CurrentPlatform)
	b = append(b, `,"headnode":`...)
	b = appendBool(b, r.Headnode)
	if r.JobUUID != "" {
		b = append(b, `,"job_uuid":`...)
		b = appendString(b, r.JobUUID)
	}
	var err error
	for _, f := range [...]struct {
		name string
		t    *time.Time
	}{{`,"started_at":`, r.StartedAt}, {`,"finished_at":`, r.FinishedAt}, {`,"operational_at":`, r.OperationalAt}, {`,"canceled_at":`, r.CanceledAt}} {
		if b, err = appendTime(b, f.name, f.t); err != nil {
			return nil, err
		}
	}
	if r.Core {
		b = append(b, `,"core":true`...)
	}
	if r.Step != "" {
		b = append(b, `,"step":`...)
		b = appendString(b, string(r.Step))
	}
	if b, err = appendTime(b, `,"step_since":`, r.StepSince); err != nil {
		return nil, err
	}
	if r.Frozen {
		b = append(b, `,"frozen":true`...)
	}
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, r.Error)
	}
	if r.JobSeen {
		b = append(b, `,"job_seen":true`...)
	}
	if b, err = appendTime(b, `,"drain_since":`, r.DrainSince); err != nil {
		return nil, err
	}
	if b, err = appendTime(b, `,"job_created_at":`, r.JobCreatedAt); err != nil {
		return nil, err
	}
	if b, err = appendTime(b, `,"asked_at":`, r.AskedAt); err != nil {
		return nil, err
	}
	if b, err = appendTime(b, `,"show_from":`, r.ShowFrom); err != nil {
		return nil, err
	}
	if ph := r.Phases; ph != nil {
		b = append(b, `,"phases":{`...)
		n := len(b)
		for _, f := range [...]struct {
			name string
			t    *time.Time
		}{{`,"drained":`, ph.Drained}, {`,"off":`, ph.Off}, {`,"on":`, ph.On}, {`,"healthy":`, ph.Healthy}} {
			if b, err = appendTime(b, f.name, f.t); err != nil {
				return nil, err
			}
		}
		if len(b) > n {
			b = append(b[:n], b[n+1:]...) // the first field's comma
		}
		b = append(b, '}')
	}
	if len(r.Labels) > 0 {
		b = append(b, `,"labels":{`...)
		for i, k := range slices.Sorted(mapKeys(r.Labels)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, r.Labels[k])
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// appendTime appends name and t as encoding/json does (RFC 3339 with
// nanoseconds), nothing when t is nil (omitempty).
func appendTime(b []byte, name string, t *time.Time) ([]byte, error) {
	if t == nil {
		return b, nil
	}
	b = append(b, name...)
	if _, off := t.Zone(); t.Year() < 0 || t.Year() >= 10000 || off <= -24*3600 || off >= 24*3600 {
		// What RFC 3339 cannot say: encoding/json's answer (an error).
		q, err := t.MarshalJSON()
		if err != nil {
			return nil, err
		}
		return append(b, q...), nil
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendString appends s quoted as encoding/json does without HTML
// escaping: the common case (printable ASCII with nothing to escape)
// directly, the rest through an Encoder.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// wallOnly strips the monotonic clock readings of the times rs points to
// (rs owns them): a page a store keeps after writing it holds the times
// as a read of it would, so that a pass measures durations from the wall
// clock whether its view came from etcd or from the store's pages.
func wallOnly(rs []plan.Reboot) {
	for i := range rs {
		r := &rs[i]
		ts := []*time.Time{r.StartedAt, r.FinishedAt, r.OperationalAt, r.CanceledAt, r.StepSince, r.DrainSince, r.JobCreatedAt, r.AskedAt, r.ShowFrom}
		if ph := r.Phases; ph != nil {
			ts = append(ts, ph.Drained, ph.Off, ph.On, ph.Healthy)
		}
		for _, t := range ts {
			if t != nil {
				*t = t.Round(0)
			}
		}
	}
}
