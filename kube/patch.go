package kube

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// casPatch is a JSON merge patch (RFC 7386) of body that also carries
// metadata.resourceVersion: the API server applies it only if the object is
// still at version, else it answers with a conflict, so a patch is a
// compare-and-swap of exactly the fields in body. Everything else of the
// object (fields of newer API versions this module does not know, other
// controllers' labels, annotations and data) is left as it is: the
// module never writes back an object it read.
func casPatch(version string, body map[string]any) client.Patch {
	meta, _ := body["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["resourceVersion"] = version
	body["metadata"] = meta
	raw, err := json.Marshal(body)
	if err != nil {
		// Only maps, strings and API structs go in: marshalling cannot fail.
		panic("kube: patch: " + err.Error())
	}
	return client.RawPatch(types.MergePatchType, raw)
}

// mapPatch is the merge patch turning map from into map to: changed and
// added keys with their value, removed keys with null. nil if equal.
func mapPatch(from, to map[string]string) map[string]any {
	var out map[string]any
	set := func(k string, v any) {
		if out == nil {
			out = map[string]any{}
		}
		out[k] = v
	}
	for k, v := range to {
		if old, ok := from[k]; !ok || old != v {
			set(k, v)
		}
	}
	for k := range from {
		if _, ok := to[k]; !ok {
			set(k, nil)
		}
	}
	return out
}

// metadataPatch is a patch body changing labels and annotations from their
// current values to the wanted ones (nil: leave them).
func metadataPatch(labels, annotations map[string]any) map[string]any {
	meta := map[string]any{}
	if labels != nil {
		meta["labels"] = labels
	}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	return map[string]any{"metadata": meta}
}
