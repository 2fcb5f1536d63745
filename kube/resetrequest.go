package kube

import (
	"context"
	"encoding/json"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
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
// operation Apply); others, any other manager.
func requestOwners(bmh *metal3.BareMetalHost) (token, others bool) {
	for _, e := range bmh.ManagedFields {
		if e.FieldsV1 == nil || !ownsRequest(e.FieldsV1.GetRawBytes()) {
			continue
		}
		if e.Manager == resetTokenOwner && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			token = true
		} else {
			others = true
		}
	}
	return token, others
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
// read, is shared with its owner, never taken from it.
func takeRequest(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost, since string) error {
	return applyToken(ctx, hosts, bmh, map[string]string{
		reboot.Annotation: bmh.Annotations[reboot.Annotation], ResetRequestAnnotation: since}, true)
}

// releaseRequest drops the controller's token of bmh (an apply of nothing
// as resetTokenOwner): what others own stays, what only the token owns
// goes, such as a request its owner withdrew with a server-side apply
// (which leaves a field another manager owns).
func releaseRequest(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost) error {
	return applyToken(ctx, hosts, bmh, nil, false)
}

func applyToken(ctx context.Context, hosts *RebootHosts, bmh *metal3.BareMetalHost, ann map[string]string, cas bool) error {
	meta := map[string]any{"name": bmh.Name, "namespace": hosts.Namespace}
	if cas {
		meta["resourceVersion"] = bmh.ResourceVersion
	}
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
