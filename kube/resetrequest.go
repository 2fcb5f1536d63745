package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/reboot"
)

// resetRequest identifies the bare reboot request a reset record answers:
// the annotation's value when the controller took the request. The rest of
// its identity is on the host: the controller's token, its co-ownership of
// the annotation (see requestOwners), which the API server takes away when
// anyone removes the annotation or changes its value, and keeps through
// every other write.
type resetRequest struct {
	Value string `json:"value"`
}

// resetTokenOwner is the field manager of the controller's token on a bare
// request it took: a server-side apply of the annotation with the value it
// has (and of ResetRequestAnnotation), so that the controller co-owns the
// annotation in the host's metadata.managedFields. A removal of the
// annotation (by any writer) takes the field from every manager, and a
// change of its value takes it from every other: the request is then not
// the one taken, whatever the clock and however busy its owner is.
const resetTokenOwner = "rebootkit-reset-token"

// requestOwners reports who owns bmh's bare reboot request in its
// metadata.managedFields: token, the controller's token (resetTokenOwner,
// operation Apply); others, any other manager. A client that may update
// the host can write managedFields, so the token may be forged: it only
// tells whether the request is the one taken, and nothing is applied as
// resetTokenOwner before its entry is checked (applyToken).
func requestOwners(bmh *metal3.BareMetalHost) (token, others bool) {
	for i, e := range bmh.ManagedFields {
		if e.FieldsV1 == nil || !ownsRequest(e.FieldsV1.GetRawBytes()) {
			continue
		}
		if isTokenEntry(&bmh.ManagedFields[i]) {
			token = true
		} else {
			others = true
		}
	}
	return token, others
}

// isTokenEntry reports whether e is the entry a server-side apply as
// resetTokenOwner writes (and removes fields of).
func isTokenEntry(e *metav1.ManagedFieldsEntry) bool {
	return e.Manager == resetTokenOwner && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == ""
}

// tokenClean reports whether a token entry's field set holds nothing but
// what takeRequest applies (the bare request and ResetRequestAnnotation),
// so that an apply as resetTokenOwner, which removes what only that entry
// owns, can remove nothing else. managedFields can be written by any
// client that may update the host (a reboot client too): an entry that
// owns more was not written by the controller.
//
// It reads the JSON token by token and refuses a key given twice: the API
// server's field sets take the union of duplicate keys, which a decoding
// into a map (the last one wins) would hide.
func tokenClean(raw []byte) bool {
	d := json.NewDecoder(bytes.NewReader(raw))
	// {"f:metadata":{"f:annotations":{ ... }}} and nothing more.
	for _, want := range []any{json.Delim('{'), "f:metadata", json.Delim('{'), "f:annotations", json.Delim('{')} {
		if tok, err := d.Token(); err != nil || tok != want {
			return false
		}
	}
	seen := map[string]bool{}
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if tok == json.Delim('}') {
			break
		}
		k, ok := tok.(string)
		if !ok || seen[k] || k != "f:"+reboot.Annotation && k != "f:"+ResetRequestAnnotation {
			return false
		}
		seen[k] = true
		for _, want := range []any{json.Delim('{'), json.Delim('}')} {
			if tok, err := d.Token(); err != nil || tok != want {
				return false
			}
		}
	}
	for range 2 {
		if tok, err := d.Token(); err != nil || tok != json.Delim('}') {
			return false
		}
	}
	_, err := d.Token()
	return errors.Is(err, io.EOF)
}

// forgedToken returns the index of bmh's token entry if it owns more
// than tokenClean allows (-1 if none does).
func forgedToken(bmh *metal3.BareMetalHost) int {
	for i := range bmh.ManagedFields {
		e := &bmh.ManagedFields[i]
		if isTokenEntry(e) && (e.FieldsV1 == nil || !tokenClean(e.FieldsV1.GetRawBytes())) {
			return i
		}
	}
	return -1
}

// tokenOn reports whether the controller's token is on bmh's bare
// request.
func tokenOn(bmh *metal3.BareMetalHost) bool {
	token, _ := requestOwners(bmh)
	return token
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

// takeRequest marks bmh's bare request as taken for the reset state whose
// Since is since: one server-side apply, as resetTokenOwner, of the
// request with the value read and of ResetRequestAnnotation, with a
// compare-and-swap on the version read (a request removed or changed
// since the read is never written back). The apply forces ownership: a
// marker another manager owns (a previous version's merge patch, a tool,
// or a reboot client that rewrote managedFields) is taken over instead of
// answered with 409 for ever; the request itself, applied with the value
// read, is shared with its owner, never taken from it. A token entry
// that owns more than the apply writes (forged) is first removed (see
// applyToken).
func takeRequest(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost, since string) error {
	return applyToken(ctx, hosts, bmh, map[string]string{
		reboot.Annotation: bmh.Annotations[reboot.Annotation], ResetRequestAnnotation: since})
}

// releaseRequest drops the controller's token of bmh (an apply of nothing
// as resetTokenOwner, compare-and-swap on the version read): what others
// own stays, what only the token owns goes, such as a request its owner
// withdrew with a server-side apply (which leaves a field another manager
// owns). A forged token entry is removed instead (see applyToken).
func releaseRequest(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost) error {
	return applyToken(ctx, hosts, bmh, nil)
}

// applyToken applies the annotations ann as resetTokenOwner, forced, with
// a compare-and-swap on bmh's version. An apply removes every field its
// manager's entry owned and no longer applies, unless another manager owns
// it; a client that may update the host can write that entry
// (managedFields), so the entry read is checked first (tokenClean) and the
// compare-and-swap makes the apply act on that entry only. An entry that
// owns more is not the controller's: it is removed, with nothing else
// (a JSON patch of managedFields, compare-and-swap), and the caller
// decides again (reboot.ErrConflict); the fields it claimed stay.
func applyToken(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost, ann map[string]string) error {
	if i := forgedToken(bmh); i >= 0 {
		if err := dropTokenEntry(ctx, hosts, bmh, i); err != nil {
			return err
		}
		return fmt.Errorf("kube: host %s/%s: a %s managedFields entry owning more than the reset request was removed: %w",
			hosts.Namespace, bmh.Name, resetTokenOwner, reboot.ErrConflict)
	}
	meta := map[string]any{"name": bmh.Name, "namespace": hosts.Namespace, "resourceVersion": bmh.ResourceVersion}
	if ann != nil {
		meta["annotations"] = ann
	}
	raw, err := json.Marshal(map[string]any{"apiVersion": metal3.GroupVersion.String(), "kind": "BareMetalHost", "metadata": meta})
	if err != nil {
		return err
	}
	if err := hosts.Client.Patch(ctx, bmh, client.RawPatch(types.ApplyPatchType, raw), client.FieldOwner(resetTokenOwner), client.ForceOwnership); err != nil {
		return mapError("reset of", hosts.Namespace, bmh.Name, err)
	}
	return nil
}

// dropTokenEntry removes bmh's managedFields entry i (a token entry) and
// nothing else: a JSON patch that tests the version read and the entry.
// The API server keeps managedFields unchanged when a write empties them,
// so a lone entry is replaced by [{}], which strips them.
func dropTokenEntry(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost, i int) error {
	at := fmt.Sprintf("/metadata/managedFields/%d", i)
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": bmh.ResourceVersion},
		{"op": "test", "path": at + "/manager", "value": resetTokenOwner},
		{"op": "test", "path": at + "/operation", "value": string(metav1.ManagedFieldsOperationApply)},
	}
	if len(bmh.ManagedFields) == 1 {
		ops = append(ops, map[string]any{"op": "replace", "path": "/metadata/managedFields", "value": []any{map[string]any{}}})
	} else {
		ops = append(ops, map[string]any{"op": "remove", "path": at})
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := hosts.Client.Patch(ctx, bmh, client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(resetFieldOwner)); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			// A test failed (the host changed since the read): decide again.
			return fmt.Errorf("kube: host %s/%s: %w", hosts.Namespace, bmh.Name, reboot.ErrConflict)
		}
		return mapError("reset of", hosts.Namespace, bmh.Name, err)
	}
	return nil
}
