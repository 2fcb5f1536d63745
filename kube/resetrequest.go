package kube

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/rebootkit/rebootkit/reboot"
)

// resetRequest identifies the bare reboot request a reset record answers:
// the annotation's value, the managers that own it in the host's
// metadata.managedFields (manager, operation and subresource), and the
// latest time of their entries when the request was first seen. A client
// that removes the request and makes it again (also while no controller
// watches) bumps the time of its entry, or changes the value or the
// owners: the request is then a new one.
type resetRequest struct {
	Value  string    `json:"value"`
	Owners []string  `json:"owners,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// requestOf is the identity of bmh's bare reboot request.
func requestOf(bmh *metal3.BareMetalHost) resetRequest {
	r := resetRequest{Value: bmh.Annotations[reboot.Annotation]}
	for _, e := range bmh.ManagedFields {
		if e.FieldsV1 == nil || !ownsRequest(e.FieldsV1.GetRawBytes()) {
			continue
		}
		r.Owners = append(r.Owners, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
		if e.Time != nil && e.Time.After(r.At) {
			r.At = e.Time.UTC()
		}
	}
	slices.Sort(r.Owners)
	return r
}

// ownsRequest reports whether a managedFields entry's field set holds the
// bare reboot annotation.
func ownsRequest(raw []byte) bool {
	var fs struct {
		Metadata struct {
			Annotations map[string]json.RawMessage `json:"f:annotations"`
		} `json:"f:metadata"`
	}
	if json.Unmarshal(raw, &fs) != nil {
		return false
	}
	_, ok := fs.Metadata.Annotations["f:"+reboot.Annotation]
	return ok
}

// answers reports whether a record taken for request r answers the
// request cur: the same value and owners, and no owner's entry changed
// since (its time is whole seconds). A record with no identity (written
// before identities were kept) answers any request its marker names.
func (r resetRequest) answers(cur resetRequest) bool {
	if r.Value == "" && r.Owners == nil && r.At.IsZero() {
		return true
	}
	return r.Value == cur.Value && strings.Join(r.Owners, ",") == strings.Join(cur.Owners, ",") && !cur.At.After(r.At)
}
