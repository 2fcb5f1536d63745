package main

import (
	"fmt"
	"strings"
)

// splitList is the non-empty, trimmed items of a comma-separated flag.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseHosts reads --hosts: comma-separated node=host pairs, the
// controller owner's trusted map of Nodes to their BareMetalHosts
// (ExternalRemediationController.Hosts). A node listed twice, or an item
// without a node or a host, is an error.
func parseHosts(s string) (map[string]string, error) {
	items := splitList(s)
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		node, host, ok := strings.Cut(it, "=")
		node, host = strings.TrimSpace(node), strings.TrimSpace(host)
		if !ok || node == "" || host == "" {
			return nil, fmt.Errorf("--hosts: %q is not node=host", it)
		}
		if _, dup := out[node]; dup {
			return nil, fmt.Errorf("--hosts: node %q listed twice", node)
		}
		out[node] = host
	}
	return out, nil
}
